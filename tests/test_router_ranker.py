"""Ranker with the real embedder and a real store: blend math by hand, statuses reaching the ranking."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mythloop.router import Router, full_text, get_embedder
from mythloop.settings import get_settings
from mythloop.verdicts import VerdictStore, persist_verdicts

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


# --- C4: the agreement rule (docs/blend.md) ------------------------------------------------

def _p_harmful_above_half(helpful: int, harmful: int) -> float:
    """P(theta > 1/2), theta ~ Beta(1 + harmful, 1 + helpful), by the binomial identity:
    for integer a, b, P(theta <= 1/2) = P(Bin(a + b - 1, 1/2) >= a)."""
    from math import comb

    a, b = 1 + harmful, 1 + helpful
    n = a + b - 1
    return 1.0 - sum(comb(n, k) for k in range(a, n + 1)) / 2 ** n


@pytest.mark.parametrize("helpful,harmful", [(0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (1, 5),
                                             (5, 1), (3, 2), (10, 10), (2, 9)])
def test_harm_credibility_is_the_beta_posterior_tail(helpful, harmful):
    from mythloop.router.ranker import harm_credibility

    got = float(harm_credibility(np.array([helpful]), np.array([harmful]))[0])
    assert got == pytest.approx(_p_harmful_above_half(helpful, harmful), abs=1e-12)


def test_agreement_thresholds_in_verdicts():
    """With the uniform prior and kappa 0.9: 3 harmful of 3 demote, 2 of 2 or 4 of 5 do not."""
    from mythloop.router.ranker import AGREEMENT_CREDIBILITY, harm_credibility

    def credible(h, x):
        return bool(harm_credibility(np.array([h]), np.array([x]))[0] >= AGREEMENT_CREDIBILITY)

    assert credible(0, 3) and credible(1, 5) and credible(2, 7)
    assert not credible(0, 2) and not credible(1, 4) and not credible(3, 2) and not credible(5, 3)


def _agreement_expected(catalog, embedder, history, query, related_k):
    """C4 by hand: the C3 terms, with every demoting term dropped for a skill that is not
    credibly harmful (the negative count bonus, harm match, related harmful, suspect)."""
    out = expected_scores(catalog, embedder, history, query, related_k)
    for name, t in out.items():
        mine = [h for h in history if h[2] == name]
        helpful = sum(1 for x in mine if x[3] == "HELPFUL")
        harmful = sum(1 for x in mine if x[3] == "HARMFUL")
        if _p_harmful_above_half(helpful, harmful) >= 0.9:
            continue
        t.update(count_bonus=max(0.0, t["count_bonus"]), harm_match=0.0, related_harmful=0.0,
                 status_mult=1.0)
        t["final"] = (t["semantic"] + W["count"] * t["count_bonus"]
                      + W["context"] * (t["help_match"] - W["harm"] * t["harm_match"])
                      + W["related"] * (t["related_helpful"] - t["related_harmful"]))
    return out


def test_agreement_matches_hand_computed_formula(tmp_path, catalog, embedder):
    store = build_store(tmp_path / "s.db", catalog, embedder)
    # C4's benchmark levers (context weight, prototype, lexical) set to C3's values: the
    # agreement gating alone (test_c4_levers below covers the levers).
    settings = get_settings(eval_blend=True, related_k=40, c4_w_context=W["context"],
                            c4_prototype=False, c4_w_lexical=0.0, c4_prior=0.0)
    c3 = {r.name: r for r in Router(catalog, store, embedder, settings).rank(QUERY, top_k=None)}
    c4 = {r.name: r for r in Router(catalog, store, embedder, settings,
                                    agreement=True).rank(QUERY, top_k=None)}
    expected = _agreement_expected(catalog, embedder, HISTORY, QUERY, 40)
    for name, row in c4.items():
        for key, value in expected[name].items():
            assert row.breakdown[key] == pytest.approx(value, abs=1e-5), (name, key)
    # 2 HARMFUL of 2 is no agreement yet: C3 demotes the poisoned skill, C4 does not.
    assert c3["naive-regex-matcher"].score < c4["naive-regex-matcher"].score
    assert c4["naive-regex-matcher"].breakdown["harm_match"] == 0.0
    # 3 HELPFUL and 2 HARMFUL: suspect in the store (x0.5 in C3), not demoted by C4.
    assert c4["docker-compose-basics"].status == "suspect"
    assert c3["docker-compose-basics"].breakdown["status_mult"] == 0.5
    assert c4["docker-compose-basics"].breakdown["status_mult"] == 1.0
    # Promotion is the same in both: the helpful skill keeps its help match and bonus.
    for key in ("help_match", "count_bonus", "related_helpful", "final"):
        assert c4["regex-debugger"].breakdown[key] == pytest.approx(
            c3["regex-debugger"].breakdown[key])


def test_agreement_demotes_a_credibly_harmful_skill_and_spares_a_flipped_real_one(
        tmp_path, catalog, embedder):
    """3 HARMFUL of 3 archives the poisoned skill in both blends; a real skill with 5 HELPFUL
    then 3 flipped HARMFUL is archived by the streak rule, so C3 sinks it to -1, while C4
    (P(harmful share > 1/2) = 0.25) keeps ranking it on its merits."""
    history = [(f"p{i}", QUERY, "naive-regex-matcher", "HARMFUL", f"nested quantifiers again {i}")
               for i in range(3)]
    history += [(f"h{i}", f"debug a slow regex {i}", "regex-debugger", v,
                 f"regex advice judged {v.lower()} {i}")
                for i, v in enumerate(["HELPFUL"] * 5 + ["HARMFUL"] * 3)]
    store = build_store(tmp_path / "s.db", catalog, embedder, history)
    settings = get_settings(eval_blend=True)
    c3 = {r.name: r for r in Router(catalog, store, embedder, settings).rank(QUERY, top_k=None)}
    c4 = {r.name: r for r in Router(catalog, store, embedder, settings,
                                    agreement=True).rank(QUERY, top_k=None)}
    assert c3["naive-regex-matcher"].score == c4["naive-regex-matcher"].score == -1.0
    assert c3["regex-debugger"].status == c4["regex-debugger"].status == "archived"
    assert c3["regex-debugger"].score == -1.0
    assert c4["regex-debugger"].score > c4["regex-debugger"].breakdown["semantic"] > 0
    assert c4["regex-debugger"].rank == 1


def test_c4_levers_prototype_and_lexical(tmp_path, catalog, embedder):
    """C4 matches a query against each skill's prototype (the mean of its helpful past
    prompts and c4_prior copies of its name+description vector, renormalised; prior 0: the
    prompts alone) and adds BM25 over name + description; C3 keeps neither."""
    history = [(f"s{i}", text, "regex-debugger", "HELPFUL", f"regex advice that helped {i}")
               for i, text in enumerate(["why is my regex slow on long lines",
                                         "catastrophic backtracking in a pattern",
                                         "speed up a regular expression"])]
    store = build_store(tmp_path / "s.db", catalog, embedder, history)
    base = dict(eval_blend=True, related_k=40, c4_w_context=W["context"], c4_w_lexical=0.0,
                c4_prior=0.0)
    proto = {r.name: r for r in Router(catalog, store, embedder, get_settings(**base),
                                       agreement=True).rank(QUERY, top_k=None)}
    best = {r.name: r for r in Router(catalog, store, embedder,
                                      get_settings(**base, c4_prototype=False),
                                      agreement=True).rank(QUERY, top_k=None)}
    vecs = embedder.embed([text for _, text, *_ in history])
    mean = vecs.sum(axis=0)
    mean /= np.linalg.norm(mean)
    q = embedder.embed_one(QUERY)
    assert proto["regex-debugger"].breakdown["help_match"] == pytest.approx(float(mean @ q), abs=1e-5)
    assert best["regex-debugger"].breakdown["help_match"] == pytest.approx(float((vecs @ q).max()),
                                                                           abs=1e-5)
    assert proto["regex-debugger"].breakdown["help_match"] != pytest.approx(
        best["regex-debugger"].breakdown["help_match"], abs=1e-4)
    assert all(r.breakdown["help_match"] == 0.0 for n, r in proto.items() if n != "regex-debugger")
    # With the description prior, every skill has a prototype: its name+description vector
    # (no history), or that vector counted `prior` times among its helpful prompts.
    prior = 0.5
    with_prior = {r.name: r for r in Router(catalog, store, embedder,
                                            get_settings(**{**base, "c4_prior": prior}),
                                            agreement=True).rank(QUERY, top_k=None)}
    full = {s.name: embedder.embed([full_text(s)])[0] for s in catalog.skills}
    mixed = vecs.sum(axis=0) + prior * full["regex-debugger"]
    mixed /= np.linalg.norm(mixed)
    assert with_prior["regex-debugger"].breakdown["help_match"] == pytest.approx(
        float(mixed @ q), abs=1e-5)
    for name, row in with_prior.items():
        if name != "regex-debugger":
            assert row.breakdown["help_match"] == pytest.approx(float(full[name] @ q), abs=1e-5)
    lex = Router(catalog, store, embedder, get_settings(**{**base, "c4_w_lexical": 0.5}),
                 agreement=True).rank(QUERY, top_k=None)
    c3 = Router(catalog, store, embedder, get_settings(**{**base, "c4_w_lexical": 0.5})).rank(
        QUERY, top_k=None)
    assert max(r.breakdown["lexical"] for r in lex) == pytest.approx(1.0)
    assert all(r.breakdown["lexical"] == 0.0 for r in c3)
    plain = {r.name: r.score for r in Router(catalog, store, embedder, get_settings(**base),
                                             agreement=True).rank(QUERY, top_k=None)}
    for row in lex:
        if row.score != -1.0:  # archived stays -1
            assert row.score == pytest.approx(plain[row.name] + 0.5 * row.breakdown["lexical"]
                                              * row.breakdown["status_mult"], abs=1e-6)


def test_c4_lexical_learns_the_words_of_helpful_prompts(tmp_path, catalog, embedder):
    """A word no skill's name or description holds scores nothing until a prompt holding it
    was judged HELPFUL for a skill; then C4's BM25 finds that skill for it (C3: no lexical)."""
    query = "tidy up my zorblax pipeline"
    settings = get_settings(eval_blend=True, c4_w_lexical=0.5, c4_lexical_learned=True)
    empty = VerdictStore(tmp_path / "empty.db")
    before = Router(catalog, empty, embedder, settings, agreement=True).rank(query, top_k=None)
    assert all(r.breakdown["lexical"] == 0.0 for r in before if "zorblax" not in r.description)
    history = [("z1", "my zorblax build keeps failing", "docker-compose-basics", "HELPFUL",
                "compose advice that fixed the build")]
    store = build_store(tmp_path / "s.db", catalog, embedder, history)
    router = Router(catalog, store, embedder, settings, agreement=True)
    after = {r.name: r for r in router.rank(query, top_k=None)}
    assert after["docker-compose-basics"].breakdown["lexical"] == pytest.approx(1.0)
    assert sum(r.breakdown["lexical"] > 0 for r in after.values()) == 1
    c3 = Router(catalog, store, embedder, settings).rank(query, top_k=None)
    assert all(r.breakdown["lexical"] == 0.0 for r in c3)
    # Off by default (docs/blend.md, "Cold skills"): the documents are name + description.
    plain = Router(catalog, store, embedder, get_settings(eval_blend=True, c4_w_lexical=0.5),
                   agreement=True).rank(query, top_k=None)
    assert all(r.breakdown["lexical"] == 0.0 for r in plain if "zorblax" not in r.description)


def test_c4_same_footing_for_a_skill_without_history(tmp_path, catalog, embedder):
    """C4 (c4_prior > 0): a skill with no verdicts gets the pool's helpful share for its
    count bonus and its description among its helpful reasons, as it gets its description for
    a prototype; a credibly harmful skill gets none of these stand-ins."""
    history = [(f"s{i}", f"debug a slow regex {i}", "regex-debugger", "HELPFUL",
                f"regex advice that helped {i}") for i in range(4)]
    history += [(f"p{i}", QUERY, "naive-regex-matcher", "HARMFUL", f"nested quantifiers {i}")
                for i in range(3)]
    store = build_store(tmp_path / "s.db", catalog, embedder, history)
    rows = {r.name: r for r in Router(catalog, store, embedder, get_settings(eval_blend=True),
                                      agreement=True).rank(QUERY, top_k=None)}
    plain = {r.name: r for r in Router(catalog, store, embedder,
                                       get_settings(eval_blend=True, c4_prior=0.0),
                                       agreement=True).rank(QUERY, top_k=None)}
    pooled = 4 / 7 - 0.5
    q = embedder.embed_one(QUERY)
    new = "pytest-fixtures"  # never judged
    assert rows[new].helpful == rows[new].harmful == 0
    assert rows[new].breakdown["count_bonus"] == pytest.approx(pooled)
    assert plain[new].breakdown["count_bonus"] == 0.0
    desc = float(embedder.embed([full_text(next(s for s in catalog.skills if s.name == new))])[0]
                 @ q)
    assert rows[new].breakdown["related_helpful"] == pytest.approx(max(
        plain[new].breakdown["related_helpful"], desc), abs=1e-5)
    # regex-debugger (4 of 4 helpful, n < 10): its own bonus plus the ramp's rest of the pool's
    own = (5 / 6 - 0.5) * 0.4
    assert rows["regex-debugger"].breakdown["count_bonus"] == pytest.approx(own + 0.6 * pooled)
    # The credibly harmful twin: no stand-ins (no prototype without helpful prompts, no pooled
    # bonus, no description as a reason); it is archived as before.
    bad = rows["naive-regex-matcher"]
    assert bad.breakdown["help_match"] == 0.0 and bad.score == -1.0
    assert bad.breakdown["count_bonus"] == plain["naive-regex-matcher"].breakdown["count_bonus"]
