"""Ranker with the real embedder and a real store: blend math by hand, statuses reaching the ranking."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mythloop.router import Router, get_embedder
from mythloop.settings import get_settings
from mythloop.skills import load_catalog
from mythloop.verdicts import VerdictStore, persist_verdicts

POOL_SMALL = Path(__file__).parent / "data" / "pool_small"
QUERY = "my regular expression freezes when the input string is very long"
W = {"count": 0.10, "context": 0.15, "harm": 1.5, "related": 0.10}

# (session, query, skill, verdict, reason) -- the history the store is built from
HISTORY = [
    ("t1", "my regex hangs on long inputs", "regex-debugger", "HELPFUL", "explained catastrophic backtracking clearly"),
    ("t1", "my regex hangs on long inputs", "naive-regex-matcher", "HARMFUL", "nested plus quantifiers cause the hang"),
    ("t2", "log parser pattern is exponential", "regex-debugger", "HELPFUL", "atomic groups fixed the log pattern"),
    ("t2", "log parser pattern is exponential", "naive-regex-matcher", "HARMFUL", "its advice makes backtracking worse"),
    ("t3", "write pytest fixtures for a db", "pytest-fixtures", "HELPFUL", "fixture with yield handled teardown"),
    ("t3", "write pytest fixtures for a db", "python-logging-setup", "NEUTRAL", "not relevant to the testing task"),
] + [
    (f"d{i}", f"compose file question {i}", "docker-compose-basics", v, f"compose advice judged {v.lower()} {i}")
    for i, v in enumerate(["HELPFUL", "HARMFUL", "HELPFUL", "HARMFUL", "HELPFUL"])
]


@pytest.fixture(scope="module")
def embedder():
    return get_embedder()


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(POOL_SMALL)


def build_store(path: Path, catalog, embedder, history=HISTORY) -> VerdictStore:
    store = VerdictStore(path)
    names = set(catalog.names())
    for session, query, skill, verdict, reason in history:
        res = persist_verdicts(store, [skill], [{"name": skill, "verdict": verdict, "reason": reason}],
                               session_id=session, host="test", query=query, embedder=embedder,
                               known_skills=names)
        assert len(res.applied) == 1, res
    return store


def expected_scores(catalog, embedder, history, query, related_k) -> dict[str, dict]:
    """The blend formula written out per skill with plain Python, from the same vectors."""
    def vec(text):
        return embedder.embed([text])[0].astype(np.float64)

    q = vec(query)
    reasons = [(s, v, float(vec(r) @ q)) for _, _, s, v, r in history if v != "NEUTRAL"]
    nearest = sorted(reasons, key=lambda t: -t[2])[:related_k]
    out = {}
    for skill in catalog.skills:
        name_text = skill.name.replace("-", " ")
        semantic = max(float(vec(f"{name_text}: {skill.description}") @ q), float(vec(name_text) @ q))
        mine = [h for h in history if h[2] == skill.name]
        h = sum(1 for x in mine if x[3] == "HELPFUL")
        n = h + sum(1 for x in mine if x[3] == "HARMFUL")
        count_bonus = ((h + 1) / (n + 2) - 0.5) * min(1, n / 10) if n else 0.0
        help_ctx = [x[1] for x in mine if x[3] == "HELPFUL"][-3:]
        harm_ctx = [x[1] for x in mine if x[3] == "HARMFUL"][-3:]
        help_match = max((float(vec(c) @ q) for c in help_ctx), default=0.0)
        harm_match = max((float(vec(c) @ q) for c in harm_ctx), default=0.0)
        rel_h = max((c for s, v, c in nearest if s == skill.name and v == "HELPFUL"), default=0.0)
        rel_x = max((c for s, v, c in nearest if s == skill.name and v == "HARMFUL"), default=0.0)
        harmful = n - h
        suspect = n >= 5 and (harmful > 3 or harmful / n > 0.3)
        mult = 0.5 if suspect else 1.0
        final = (semantic + W["count"] * count_bonus + W["context"] * (help_match - W["harm"] * harm_match)
                 + W["related"] * (rel_h - rel_x)) * mult
        out[skill.name] = {"semantic": semantic, "count_bonus": count_bonus, "help_match": help_match,
                           "harm_match": harm_match, "related_helpful": rel_h,
                           "related_harmful": rel_x, "status_mult": mult, "final": final}
    return out


@pytest.mark.parametrize("related_k", [2, 40])
def test_blend_matches_hand_computed_formula(tmp_path, catalog, embedder, related_k):
    store = build_store(tmp_path / "s.db", catalog, embedder)
    settings = get_settings(eval_blend=True, related_k=related_k, w_count=W["count"],
                            w_context=W["context"], w_harm=W["harm"], w_related=W["related"])
    ranked = Router(catalog, store, embedder, settings).rank(QUERY, top_k=None)
    expected = expected_scores(catalog, embedder, HISTORY, QUERY, related_k)
    assert len(ranked) == len(catalog.skills)
    for row in ranked:
        for key, value in expected[row.name].items():
            assert row.breakdown[key] == pytest.approx(value, abs=1e-5), (row.name, key)
        assert row.score == row.breakdown["final"]
    finals = [r.score for r in ranked]
    assert finals == sorted(finals, reverse=True) and [r.rank for r in ranked] == [1, 2, 3, 4, 5]
    by_name = {r.name: r for r in ranked}
    assert by_name["docker-compose-basics"].status == "suspect"
    assert (by_name["regex-debugger"].helpful, by_name["naive-regex-matcher"].harmful) == (2, 2)
    assert by_name["naive-regex-matcher"].streak == 2
    if related_k == 2:  # only the two nearest reasons count: some skill with reasons gets 0
        assert sum(1 for r in ranked if r.breakdown["related_helpful"] or r.breakdown["related_harmful"]) <= 2


def test_archive_gives_minus_one_on_the_very_next_rank(tmp_path, catalog, embedder):
    store = VerdictStore(tmp_path / "s.db")
    router = Router(catalog, store, embedder, get_settings(eval_blend=True))
    assert router.rank(QUERY, top_k=1)[0].name == "naive-regex-matcher"
    other = VerdictStore(tmp_path / "s.db")  # another connection, as another worker would write
    for i in range(3):
        persist_verdicts(other, ["naive-regex-matcher"],
                         [{"name": "naive-regex-matcher", "verdict": "HARMFUL",
                           "reason": f"teaches catastrophic backtracking, round {i}"}],
                         session_id=f"r{i}", host="h", query=QUERY, embedder=embedder,
                         known_skills=set(catalog.names()))
        row = next(r for r in router.rank(QUERY, top_k=None) if r.name == "naive-regex-matcher")
        assert row.harmful == i + 1  # every write reaches the next ranking
    assert row.status == "archived" and row.score == -1.0 and row.rank == len(catalog.skills)


def test_blend_off_is_pure_semantic(tmp_path, catalog, embedder):
    store = build_store(tmp_path / "s.db", catalog, embedder)
    on = Router(catalog, store, embedder, get_settings(eval_blend=True)).rank(QUERY, top_k=None)
    off = Router(catalog, store, embedder, get_settings(eval_blend=False)).rank(QUERY, top_k=None)
    flag = Router(catalog, store, embedder, get_settings(eval_blend=True), blend=False).rank(QUERY, top_k=None)
    assert [r.name for r in off] == [r.name for r in flag]
    for r in off:
        assert r.score == r.breakdown["semantic"] and r.breakdown["status_mult"] == 1.0
    sem_on = {r.name: r.breakdown["semantic"] for r in on}
    assert {r.name: r.score for r in off} == pytest.approx(sem_on)
    assert any(abs(r.score - r.breakdown["semantic"]) > 1e-3 for r in on)


def test_top_k_and_ties_are_deterministic(catalog, embedder):
    router = Router(catalog, None, embedder, get_settings(eval_blend=True))
    full = router.rank(QUERY, top_k=None)
    assert [r.name for r in router.rank(QUERY, top_k=3)] == [r.name for r in full[:3]]
    same = router.rank_vector(np.zeros(router.dim, np.float32), top_k=None)  # all scores tie at 0
    assert [r.name for r in same] == sorted(catalog.names())


def test_embeddings_are_normalised_and_cached(tmp_path, embedder):
    from mythloop.router import embedder as embedder_module
    from mythloop.router.embedder import Embedder

    assert get_embedder() is embedder
    vecs = embedder.embed(["first text to cache", "second text to cache"])
    assert vecs.dtype == np.float32 and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    models = dict(embedder_module._MODELS)
    fresh = Embedder(embedder.model, embedder.cache.path.parent)  # same disk cache, new instance
    again = fresh.embed(["second text to cache", "first text to cache"])
    assert fresh.encoded == 0 and np.array_equal(again, vecs[::-1])
    other_cache = Embedder(embedder.model, tmp_path / "cache")
    other_cache.embed(["first text to cache"])
    assert other_cache.encoded == 1
    assert embedder_module._MODELS == models  # no second model load in this process
