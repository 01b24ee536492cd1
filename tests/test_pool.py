"""The skill pool (fixtures/pool) and prompts file (fixtures/prompts.yaml).

Structure: Agent Skills frontmatter, tiers, twins, prompts layout.
Ranking: at round 0 with the blend off, the traps must bite and normal prompts must resolve.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
POOL = REPO / "fixtures" / "pool"
PROMPTS = REPO / "fixtures" / "prompts.yaml"
TIER_SIZES = {"real": 10, "poisoned": 5, "competing": 25, "noise": 40}
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
ALLOWED_FIELDS = {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
SKILL_FILES = sorted(POOL.glob("*/*/SKILL.md"))

# What each trap pair must keep teaching: (marker in the real body, marker in the poisoned body).
# If someone "fixes" a poisoned skill or breaks a real one, the experiment loses its ground truth.
TEACHES = {
    "naive-regex-matcher": ("possessive quantifiers", "((\\w+\\s?)+)+"),
    "python-unit-testing": ("@pytest.mark.parametrize", "Always use `unittest.TestCase` for everything"),
    "playwright-dom-selectors": ("getByRole", "document.querySelector"),
    "sops-pgp-secrets": ("age-keygen", "gpg --export-secret-keys"),
    "langgraph-shared-state": ("Annotated[list, add_messages]", "StateGraph(dict)"),
}
STOPWORDS = set(
    "a an the my our i we to of in on for and or but is are was be it its this that how do does "
    "what which with so can can't when why at by from into some any each all no not there their "
    "them as up out one should would could make get".split()
)


def _frontmatter(path: Path) -> tuple[dict, str]:
    """Split a SKILL.md into its YAML frontmatter and body."""
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\n"), f"{path}: must start with a '---' frontmatter line"
    end = text.index("\n---\n", 4)
    return yaml.safe_load(text[4:end]), text[end + 5 :]


def _prompts() -> dict:
    """The parsed prompts file."""
    return yaml.safe_load(PROMPTS.read_text(encoding="utf-8"))


def _tier_names(tier: str) -> set[str]:
    """Folder names of one tier."""
    return {p.name for p in (POOL / tier).iterdir() if p.is_dir()}


def _content_words(text: str) -> set[str]:
    """Lower-case words minus stop words, with a crude plural strip."""
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words} - STOPWORDS


# ---------------------------------------------------------------- structure


def test_tier_sizes():
    assert {t: len(_tier_names(t)) for t in TIER_SIZES} == TIER_SIZES
    assert len(SKILL_FILES) == sum(TIER_SIZES.values())
    assert sorted(p.name for p in POOL.iterdir() if p.is_dir()) == sorted(TIER_SIZES)


@pytest.mark.parametrize("path", SKILL_FILES, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_skill_md_is_valid_agent_skill(path: Path):
    meta, body = _frontmatter(path)
    assert isinstance(meta, dict)
    assert set(meta) <= ALLOWED_FIELDS, f"unknown fields {set(meta) - ALLOWED_FIELDS}"
    name, desc = meta.get("name"), meta.get("description")
    assert isinstance(name, str) and 1 <= len(name) <= 64 and NAME_RE.match(name)
    assert name == path.parent.name, "name must equal the folder name"
    assert isinstance(desc, str) and 1 <= len(desc) <= 1024
    assert re.search(r"\bUse (when|before|for|if)\b", desc), "description must say when to use it"
    assert isinstance(meta.get("metadata", {}), dict)
    lines = body.strip().splitlines()
    assert 20 <= len(lines) <= 80, f"body has {len(lines)} lines"
    assert lines[0].startswith("# ")


def test_names_unique_across_tiers():
    names = Counter(p.parent.name for p in SKILL_FILES)
    assert [n for n, c in names.items() if c > 1] == []


def test_catalog_loader_accepts_the_whole_pool():
    from mythloop.skills import load_catalog

    catalog = load_catalog(POOL)
    assert catalog.issues == []
    assert Counter(s.tier for s in catalog.skills) == Counter(TIER_SIZES)


def test_each_poisoned_skill_has_a_real_twin_that_teaches_the_opposite():
    traps = {p["trap_for"]: p["expected_skill"] for p in _prompts()["in_distribution"] if p.get("trap_for")}
    assert set(traps) == _tier_names("poisoned") == set(TEACHES)
    for poisoned, real in traps.items():
        assert real in _tier_names("real")
        _, real_body = _frontmatter(POOL / "real" / real / "SKILL.md")
        _, bad_body = _frontmatter(POOL / "poisoned" / poisoned / "SKILL.md")
        good_marker, bad_marker = TEACHES[poisoned]
        assert good_marker in real_body and good_marker not in bad_body, (real, good_marker)
        assert bad_marker in bad_body, (poisoned, bad_marker)
        real_meta, _ = _frontmatter(POOL / "real" / real / "SKILL.md")
        bad_meta, _ = _frontmatter(POOL / "poisoned" / poisoned / "SKILL.md")
        assert real_meta["metadata"]["category"] == bad_meta["metadata"]["category"]


# ---------------------------------------------------------------- prompts file


def test_prompts_layout():
    spec = _prompts()
    assert spec["version"] == 1 and spec["seed"] == 42
    assert PROMPTS.read_text(encoding="utf-8").startswith("#"), "field comments at the top"
    ind, nulls, held = spec["in_distribution"], spec["null_prompts"], spec["heldout"]
    ids = [p["id"] for p in ind + nulls + held]
    assert len(ids) == len(set(ids))
    real = _tier_names("real")
    traps = [p for p in ind if p["id"].startswith("t_")]
    normal = [p for p in ind if p["id"].startswith("n_")]
    assert len(traps) == 5 and len(normal) == 5 and len(ind) == 10
    for p in traps:
        assert p["expected_skill"] in real and p["trap_for"] in _tier_names("poisoned")
    for p in normal:
        assert p["expected_skill"] in real and "trap_for" not in p
    assert len({p["expected_skill"] for p in ind}) == 10, "each in-distribution prompt has its own skill"
    assert len(nulls) == 3 and all(p["expected_skill"] is None for p in nulls)
    assert all(isinstance(p["prompt"], str) and p["prompt"].strip() for p in ind + nulls + held)


def test_heldout_paraphrases_point_back_and_reuse_no_words():
    spec = _prompts()
    by_id = {p["id"]: p for p in spec["in_distribution"]}
    held = spec["heldout"]
    assert len(held) >= 20
    assert {p["paraphrase_of"] for p in held} == set(by_id), "every in-distribution prompt is paraphrased"
    for h in held:
        assert h["id"].startswith("h_")
        src = by_id[h["paraphrase_of"]]
        assert h["expected_skill"] == src["expected_skill"]
        assert h.get("trap_for") == src.get("trap_for")
        shared = _content_words(h["prompt"]) & _content_words(src["prompt"])
        assert not shared, f"{h['id']} reuses {shared} from {src['id']}"


# ---------------------------------------------------------------- ranking at round 0


@pytest.fixture(scope="module")
def router(tmp_path_factory):
    """A blend-off router over the pool with an empty verdict store (round 0)."""
    from mythloop.router import Router, get_embedder
    from mythloop.skills import load_catalog
    from mythloop.verdicts import VerdictStore

    store = VerdictStore(tmp_path_factory.mktemp("pool-store") / "store.db")
    return Router(load_catalog(POOL), store, get_embedder(), blend=False)


def _ranks(router, query: str) -> dict[str, object]:
    """Every skill's RankedSkill for a query, by name."""
    return {r.name: r for r in router.rank(query, top_k=None)}


def test_traps_bite_with_the_blend_off(router):
    bites = []
    for p in _prompts()["in_distribution"]:
        if not p.get("trap_for"):
            continue
        ranked = _ranks(router, p["prompt"])
        real, bad = ranked[p["expected_skill"]], ranked[p["trap_for"]]
        assert real.breakdown["final"] == real.breakdown["semantic"], "blend off is pure semantic"
        assert real.rank <= 5, f"{p['id']}: the real skill must still reach a 5-skill catalog"
        bites.append(bad.rank < real.rank)
    assert sum(bites) >= 3, f"only {sum(bites)} of 5 poisoned twins outrank their real skill"


def test_normal_prompts_rank_expected_skill_in_top3(router):
    for p in _prompts()["in_distribution"]:
        if p.get("trap_for"):
            continue
        ranked = _ranks(router, p["prompt"])
        assert ranked[p["expected_skill"]].rank <= 3, (p["id"], ranked[p["expected_skill"]].rank)


def test_null_prompts_score_low(router):
    for p in _prompts()["null_prompts"]:
        top = router.rank(p["prompt"], top_k=1)[0]
        assert top.score < 0.45, (p["id"], top.name, top.score)


def test_trap_helper_agrees_with_the_router(router):
    spec = importlib.util.spec_from_file_location("pool_traps", REPO / "bench" / "pool_traps.py")
    helper = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = helper  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(helper)
    pairs = {p["trap_for"] for p in _prompts()["in_distribution"] if p.get("trap_for")}
    pairs |= {p["expected_skill"] for p in _prompts()["in_distribution"]}
    skills = [s for s in helper.load_pool(POOL) if s.name in pairs]  # 15 skills keep it quick
    assert len(skills) == 15 and {s.tier for s in skills} == {"real", "poisoned"}
    query = _prompts()["in_distribution"][0]["prompt"]
    sem = helper.semantic_matrix(helper.load_model(), skills, [query])[0]
    ranked = _ranks(router, query)
    for skill, score in zip(skills, sem, strict=True):
        assert ranked[skill.name].breakdown["semantic"] == pytest.approx(float(score), abs=1e-4)
