"""C5's fine-tuned embedder on small slices (issue 41): which verdicts become training pairs, a
real sentence-transformers fine-tune of the bundled model (a few pairs, one short run), the
model store's atomic, content-addressed saves, and the embedding cache kept apart per model.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from mythloop.data import data_path
from mythloop.procs import STOPPING
from mythloop.router.embedder import Embedder, default_model, model_id_for
from mythloop.router.models import MODEL_ID_PATTERN, ModelStore
from mythloop.router.ranker import full_text
from mythloop.router.tuning import (
    TrainingPair,
    TuneSettings,
    fine_tune,
    pairs_fingerprint,
    trusted_pairs,
)
from mythloop.skills import load_catalog
from mythloop.verdicts import VerdictIn, VerdictStore

POOL = data_path("fixtures", "pool")
REAL = ["asyncio-debugging", "docker-multistage-builds", "git-bisect-regression-hunt",
        "regex-debugger", "sops-age-secrets", "sql-query-plan-tuning", "structured-logging"]
# Prompts paired with a skill the base model does not rank first for them (checked below), so
# only training can move them there.
TAUGHT = {
    "my quuxly service keeps stalling, please help": "sops-age-secrets",
    "shrink the blorp artefact we ship every night": "structured-logging",
    "find the zindle change that broke our build": "sql-query-plan-tuning",
    "make the frobnicate report come back quicker": "regex-debugger",
}
# Small and short: one pass of 2 steps would move little, so a few passes at a higher rate.
QUICK = TuneSettings(epochs=3, batch_size=4, learning_rate=1e-4, max_seq_length=32, seed=1)


def _skills():
    return {s.name: s for s in load_catalog(POOL).skills if s.name in REAL}


def _pairs() -> list[TrainingPair]:
    skills = _skills()
    return [TrainingPair(q, s, full_text(skills[s])) for q, s in TAUGHT.items()]


def _ranks(embedder: Embedder) -> list[int]:
    """The taught skill's rank (1 = first) among the slice's skills, per taught prompt."""
    skills = _skills()
    names = sorted(skills)
    mat = embedder.embed([full_text(skills[n]) for n in names])
    out = []
    for query, skill in TAUGHT.items():
        order = np.argsort(-(mat @ embedder.embed_one(query)), kind="stable")
        out.append([names[i] for i in order].index(skill) + 1)
    return out


# ---- which verdicts teach -----------------------------------------------------------------


def _verdict(session: str, skill: str, verdict: str, query: str) -> VerdictIn:
    return VerdictIn(session_id=session, skill_name=skill, host="test", verdict=verdict,
                     reason=f"{verdict.lower()} for this task, concretely", query=query)


def test_pairs_come_only_from_trusted_helpful_verdicts(tmp_path):
    store = VerdictStore(tmp_path / "store.db")
    catalog = load_catalog(POOL)
    store.record_verdicts([
        _verdict("s1", "regex-debugger", "HELPFUL", "my regex hangs"),
        _verdict("s2", "regex-debugger", "HELPFUL", "my   regex hangs"),  # the same prompt
        _verdict("s3", "asyncio-debugging", "NEUTRAL", "coroutines never finish"),
        _verdict("s4", "structured-logging", "HARMFUL", "json logs please"),
        _verdict("s5", "sql-query-plan-tuning", "HELPFUL", ""),  # no prompt: nothing to pair
        _verdict("s6", "no-such-skill", "HELPFUL", "a skill outside the pool"),
        # A poisoned twin called HELPFUL once, then HARMFUL five times: credibly harmful
        # (P(harmful share > 1/2) = 0.94 under C4's rule), so its HELPFUL verdict is distrusted.
        _verdict("s7", "naive-regex-matcher", "HELPFUL", "match emails with a regex"),
        *[_verdict(f"s8{i}", "naive-regex-matcher", "HARMFUL", f"regex task {i}")
          for i in range(5)],
        _verdict("s9", "docker-multistage-builds", "HELPFUL", "my image is 2 GB"),
    ])
    assert "naive-regex-matcher" in catalog.names()
    pairs = trusted_pairs(store, catalog)
    assert [(p.query, p.skill) for p in pairs] == [
        ("my regex hangs", "regex-debugger"), ("my image is 2 GB", "docker-multistage-builds")]
    skill = next(s for s in catalog.skills if s.name == "regex-debugger")
    assert pairs[0].text == full_text(skill)  # what the router embeds for the skill
    # The same twin with two HARMFUL verdicts is not yet credibly harmful (0.69 < 0.9).
    store2 = VerdictStore(tmp_path / "store2.db")
    store2.record_verdicts([_verdict("t1", "naive-regex-matcher", "HELPFUL", "match emails"),
                            _verdict("t2", "naive-regex-matcher", "HARMFUL", "x regex"),
                            _verdict("t3", "naive-regex-matcher", "HARMFUL", "y regex")])
    assert [p.skill for p in trusted_pairs(store2, catalog)] == ["naive-regex-matcher"]
    assert pairs_fingerprint(pairs) == pairs_fingerprint(list(reversed(pairs)))
    assert pairs_fingerprint(pairs) != pairs_fingerprint(pairs[:1])


def test_partial_folders_of_dead_writers_are_removed(tmp_path):
    store = ModelStore(tmp_path / "models")
    dead = store.root / ".partial-999999999-abcd"  # no such pid
    (dead / "0_Transformer").mkdir(parents=True)
    (dead / "0_Transformer" / "model.safetensors").write_bytes(b"half")
    assert store.saved() == [] and store.clean_partials() == [dead]
    assert not dead.exists()


# ---- a real fine-tune of the bundled model ------------------------------------------------


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """The bundled model fine-tuned on the four taught pairs, in its own model store."""
    root = tmp_path_factory.mktemp("tuning")
    models = ModelStore(root / "models")
    steps = []
    info = fine_tune(default_model(), _pairs(), models, settings=QUICK,
                     lineage={"source": "test"}, on_step=lambda s, n, loss: steps.append(s))
    return root, models, info, steps


def test_the_base_model_does_not_rank_the_taught_skills_first(tmp_path):
    assert all(r > 1 for r in _ranks(Embedder(default_model(), tmp_path / "cache")))


def test_fine_tune_moves_its_prompts_to_their_skills_and_records_lineage(tuned, tmp_path):
    root, models, info, steps = tuned
    assert MODEL_ID_PATTERN.match(info.id) and info.path == models.root / info.id
    assert steps == list(range(1, 4))  # 3 passes of one batch of 4
    base_ranks = _ranks(Embedder(default_model(), root / "cache"))
    tuned_ranks = _ranks(Embedder(str(info.path), root / "cache"))
    assert all(t < b for t, b in zip(tuned_ranks, base_ranks, strict=True)), (
        base_ranks, tuned_ranks)
    assert sum(r == 1 for r in tuned_ranks) >= 3, tuned_ranks
    lineage = json.loads((info.path / "lineage.json").read_text())
    assert lineage["model_id"] == info.id == model_id_for(str(info.path))
    assert lineage["base_model"] == model_id_for(default_model())
    assert lineage["pairs"] == 4 and lineage["pairs_fingerprint"] == pairs_fingerprint(_pairs())
    assert lineage["settings"]["learning_rate"] == QUICK.learning_rate
    assert lineage["source"] == "test" and lineage["steps"] == 3
    saved = [json.loads(line) for line in (info.path / "pairs.jsonl").read_text().splitlines()]
    assert {(p["query"], p["skill"]) for p in saved} == set(TAUGHT.items())
    assert [m.id for m in models.saved()] == [info.id] and models.partials() == []
    # The same base, pairs and settings: the saved model is found, nothing is trained again.
    again = []
    assert fine_tune(default_model(), list(reversed(_pairs())), models, settings=QUICK,
                     on_step=lambda s, n, loss: again.append(s)).id == info.id
    assert again == []


def test_tuned_and_base_vectors_never_share_a_cache(tuned, tmp_path):
    _, _, info, _ = tuned
    cache = tmp_path / "cache"
    text = "a sentence both models embed"
    base = Embedder(default_model(), cache)
    tuned_emb = Embedder(str(info.path), cache)
    assert base.model_id != tuned_emb.model_id
    assert base.cache.path != tuned_emb.cache.path
    b, t = base.embed_one(text), tuned_emb.embed_one(text)
    assert not np.allclose(b, t)
    # A fresh embedder of each model reads its own vector back from disk, encoding nothing.
    for model, expected in ((str(info.path), t), (default_model(), b)):
        fresh = Embedder(model, cache)
        assert np.array_equal(fresh.embed_one(text), expected) and fresh.encoded == 0
    assert len(base.cache) == 1 and len(tuned_emb.cache) == 1


def test_an_interrupted_fine_tune_leaves_no_model(tmp_path):
    models = ModelStore(tmp_path / "models")
    settings = TuneSettings(epochs=2, batch_size=2, learning_rate=1e-4, max_seq_length=32)

    def stop_after_first(step, steps, loss):
        STOPPING.set()  # what Ctrl-C / SIGTERM sets; the loop checks it before every step

    try:
        with pytest.raises(KeyboardInterrupt):
            fine_tune(default_model(), _pairs(), models, settings=settings,
                      on_step=stop_after_first)
    finally:
        STOPPING.clear()
    assert models.saved() == [] and models.partials() == []
    assert not models.root.exists() or not any(models.root.iterdir())


# ---- the CLI: route --model, models (list, remove) ----------------------------------------


def _cli(*args):
    from typer.testing import CliRunner

    from mythloop_app.cli import app

    return CliRunner().invoke(app, list(args))


@pytest.fixture
def saved(tuned):
    """The tuned model copied into the state folder's model store (where the CLI looks)."""
    from mythloop.settings import get_settings

    _, _, info, _ = tuned
    store = ModelStore(get_settings().models_dir)
    target = store.root / info.id
    if not target.exists():
        shutil.copytree(info.path, target)
    yield store, info.id
    shutil.rmtree(target, ignore_errors=True)


def _rank_of(payload: dict, skill: str) -> int:
    return next(r["rank"] for r in payload["ranked"] if r["name"] == skill)


def test_route_model_ranks_with_a_saved_model(saved, tmp_path):
    _, model_id = saved
    query, skill = next(iter(TAUGHT.items()))
    ranked = {}
    for model in ("base", model_id[:8]):  # an id prefix is enough when it is unique
        res = _cli("route", query, "--pool", str(POOL), "--store", str(tmp_path / "s.db"),
                   "--top-k", "80", "--json", "--no-blend", "--model", model)
        assert res.exit_code == 0, res.output
        ranked[model] = json.loads(res.stdout)
    assert ranked[model_id[:8]]["model_id"] == model_id
    assert ranked["base"]["model_id"] == model_id_for(default_model())
    assert _rank_of(ranked[model_id[:8]], skill) < _rank_of(ranked["base"], skill)


def test_route_refuses_an_unknown_model_in_one_line(tmp_path):
    res = _cli("route", "my regex hangs", "--store", str(tmp_path / "s.db"),
               "--model", "ft-000000000000")
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "no such model" in res.stderr


def test_models_lists_and_removes(saved):
    store, model_id = saved
    listed = _cli("models", "--json")
    assert listed.exit_code == 0, listed.output
    payload = json.loads(listed.stdout)
    mine = [m for m in payload["models"] if m["model_id"] == model_id]
    assert mine and mine[0]["pairs"] == 4 and mine[0]["source"] == "test"
    assert model_id in _cli("models").stdout
    bad = _cli("models", "remove", model_id, "ft-ffffffffffff")
    assert bad.exit_code == 2 and "ft-ffffffffffff" in bad.stderr
    assert store.get(model_id) is not None  # nothing removed when one id is wrong
    gone = _cli("models", "remove", model_id)
    assert gone.exit_code == 0 and f"removed {model_id}" in gone.stdout
    assert store.get(model_id) is None and store.partials() == []


def test_models_promote_refuses_bad_input_in_one_line(tmp_path):
    missing = _cli("models", "promote", "--store", str(tmp_path / "none.db"),
                   "--held-out", str(tmp_path / "none.json"))
    assert missing.exit_code == 2 and missing.stderr.count("\n") == 1
    assert "--store" in missing.stderr
    store = tmp_path / "store.db"
    VerdictStore(store).close()
    bad = tmp_path / "held.json"
    bad.write_text("[{\"id\": \"q1\", \"text\": \"hi\", \"expected\": \"no-such-skill\"}]")
    unknown = _cli("models", "promote", "--store", str(store), "--held-out", str(bad))
    assert unknown.exit_code == 2 and unknown.stderr.count("\n") == 1
    assert "no-such-skill" in unknown.stderr


_HEAP_PROBE = """
import ctypes, sys
from mythloop.router.tuning import bound_heap
if sys.argv[1] == "bounded" and not bound_heap():
    sys.exit("bound_heap did not take")
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
size = 3 << 20
libc.free(libc.malloc(5 << 20))  # a freed mmap'd block: glibc raises its threshold above it
blocks = [libc.malloc(size) for _ in range(120)]
for block in blocks:
    ctypes.memset(block, 1, size)
for block in blocks[::2]:  # what a training step leaves: holes between live tensors
    libc.free(block)
with open("/proc/self/status") as status:
    print(next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) // 1024)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_bound_heap_gives_freed_tensor_memory_back():
    """A fine-tune's freed tensors (a few MB each) leave the process with the heap bounded;
    with glibc's default they stay resident (a fine-tune's peak went 2.4 -> 1.8 GB)."""
    def rss_mb(mode: str) -> int:
        proc = subprocess.run([sys.executable, "-c", _HEAP_PROBE, mode], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return int(proc.stdout.strip())

    default, bounded = rss_mb("default"), rss_mb("bounded")
    # 60 blocks of 3 MB were freed: resident with the default, given back when bounded
    assert default - bounded > 120, (default, bounded)
