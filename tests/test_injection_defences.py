"""C4 and C5's defences against a judge a skill's description can persuade (docs/blend.md,
"Defences"): each changes what it should and nothing else. Real embedder, real stores, the
small pool of the ranker's tests."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from mythloop.router import Router, full_text
from mythloop.router.ranker import harm_credibility
from mythloop.router.tuning import trusted_pairs
from mythloop.settings import get_settings
from mythloop.sweep.config import ranking_settings
from mythloop.sweep.tuned import round_pairs
from mythloop.verdicts import VerdictStore, persist_verdicts

QUERY = "my regular expression freezes when the input string is very long"
REGEX = ["my regex hangs on long inputs", "catastrophic backtracking in a log pattern",
         "speed up a slow regular expression", "a pattern with nested quantifiers times out"]
# docker-compose-basics praised for regex prompts: what a persuaded judge writes about an
# injected skill it is shown, whatever the prompt
BOUGHT = [(f"b{i}", text, "docker-compose-basics", "HELPFUL", f"this skill solved it well {i}")
          for i, text in enumerate(REGEX)]
HONEST = [("h0", REGEX[0], "regex-debugger", "HELPFUL", "explained catastrophic backtracking")]
RANK = 2  # of the 5 skills: the gate lets a skill's praise count where it ranks 1st or 2nd


def build_store(path: Path, catalog, embedder, history) -> VerdictStore:
    store = VerdictStore(path)
    for session, query, skill, verdict, reason in history:
        res = persist_verdicts(store, [skill], [{"name": skill, "verdict": verdict,
                                                 "reason": reason}],
                               session_id=session, host="test", query=query, embedder=embedder,
                               known_skills=set(catalog.names()))
        assert len(res.applied) == 1, res
    return store


def rank(catalog, store, embedder, query=QUERY, **settings) -> dict:
    s = get_settings(eval_blend=True, **settings)
    return {r.name: r for r in Router(catalog, store, embedder, s, agreement=True).rank(
        query, top_k=None)}


def test_the_gate_ranks_skills_by_their_description_alone(catalog, embedder):
    """The premise of the tests below: for the regex prompts, docker-compose-basics is not
    among the 2 best skills on its name and description; regex-debugger is."""
    router = Router(catalog, None, embedder,
                    get_settings(eval_blend=True, c4_plausible_rank=RANK), agreement=True)
    gate = router.plausibility
    assert gate is not None and gate.max_rank == RANK
    ranks = gate.ranks(REGEX)
    assert ranks.shape == (len(REGEX), len(catalog.skills))
    docker, regex = gate.index["docker-compose-basics"], gate.index["regex-debugger"]
    assert (ranks[:, docker] > RANK).all() and (ranks[:, regex] <= RANK).all()
    assert not gate.allows([docker] * len(REGEX), REGEX).any()
    assert gate.allows([regex] * len(REGEX), REGEX).all()
    # ranks are 1 + the number of skills scoring higher, from the description-only score
    vecs = embedder.embed(REGEX)
    score = gate.scores(vecs, REGEX)
    assert (ranks == 1 + (score[:, None, :] > score[:, :, None]).sum(axis=2)).all()


def test_praise_for_an_implausible_prompt_no_longer_lifts_a_skill(tmp_path, catalog, embedder):
    """docker-compose-basics, praised four times for regex prompts, gains nothing from it
    with the gate (help_match is its description's cosine and its count bonus the pool's
    prior, as for a skill with no history) and climbs without it; the store keeps every verdict."""
    store = build_store(tmp_path / "s.db", catalog, embedder, BOUGHT + HONEST)
    gated = rank(catalog, store, embedder, c4_plausible_rank=RANK)
    open_ = rank(catalog, store, embedder, c4_plausible_rank=0)
    fresh = rank(catalog, VerdictStore(tmp_path / "empty.db"), embedder,
                 c4_plausible_rank=RANK)
    d = "docker-compose-basics"
    assert gated[d].helpful == open_[d].helpful == 4  # counters untouched, only not evidence
    assert gated[d].breakdown["help_match"] == pytest.approx(
        fresh[d].breakdown["help_match"], abs=1e-6)
    assert open_[d].breakdown["help_match"] > gated[d].breakdown["help_match"] + 0.05
    # its count is that of a skill never judged (pytest-fixtures): the pool's prior alone
    assert gated[d].breakdown["count_bonus"] == pytest.approx(
        gated["pytest-fixtures"].breakdown["count_bonus"])
    assert open_[d].breakdown["count_bonus"] != pytest.approx(gated[d].breakdown["count_bonus"])
    assert open_[d].score > gated[d].score + 0.05
    # the honest verdict on a plausible prompt still counts, exactly as without the gate
    r = "regex-debugger"
    assert gated[r].breakdown["help_match"] == pytest.approx(open_[r].breakdown["help_match"],
                                                             abs=1e-6)
    assert gated[r].breakdown["help_match"] > fresh[r].breakdown["help_match"] + 0.01


def test_the_gate_changes_nothing_when_all_praise_is_plausible(tmp_path, catalog, embedder):
    """Only plausible verdicts in the store: the gated ranking is the ungated one, term by
    term."""
    history = [(f"h{i}", text, "regex-debugger", "HELPFUL", f"fixed the backtracking {i}")
               for i, text in enumerate(REGEX)]
    history += [("p0", "write pytest fixtures for a database", "pytest-fixtures", "HELPFUL",
                 "fixture with yield handled teardown"),
                ("x0", REGEX[1], "naive-regex-matcher", "HARMFUL", "nested plus quantifiers")]
    store = build_store(tmp_path / "s.db", catalog, embedder, history)
    gated = rank(catalog, store, embedder, c4_plausible_rank=RANK)
    open_ = rank(catalog, store, embedder, c4_plausible_rank=0)
    assert list(gated) == list(open_)
    for name, row in gated.items():
        assert row.breakdown == pytest.approx(open_[name].breakdown, abs=1e-9)


def test_bought_praise_does_not_shield_a_skill_from_demotion(tmp_path, catalog, embedder):
    """Four implausible HELPFUL verdicts and three HARMFUL ones: without the gate the praise
    keeps the skill from being credibly harmful; with it, the three HARMFUL verdicts are the
    evidence and it is demoted (C4's rule, on the praise that counts)."""
    harm = [(f"x{i}", "compose file for two services", "docker-compose-basics", "HARMFUL",
             f"its compose advice is outdated {i}") for i in range(3)]
    store = build_store(tmp_path / "s.db", catalog, embedder, BOUGHT + harm)
    assert harm_credibility([4], [3])[0] < 0.9 <= harm_credibility([0], [3])[0]
    query = "set up docker compose for a web app and a database"
    gated = rank(catalog, store, embedder, query, c4_plausible_rank=RANK)
    open_ = rank(catalog, store, embedder, query, c4_plausible_rank=0)
    d = "docker-compose-basics"
    assert gated[d].breakdown["harm_match"] > 0 and open_[d].breakdown["harm_match"] == 0.0
    assert gated[d].score < open_[d].score


def test_the_cap_bounds_what_verdicts_add_and_nothing_else(tmp_path, catalog, embedder):
    """c4_max_lift: a skill's score is at most its no-verdict score (semantic, lexical and
    its description standing in for prototype and reason) plus the cap; below the cap a
    score is unchanged."""
    store = build_store(tmp_path / "s.db", catalog, embedder, BOUGHT + HONEST)
    cap = 0.05
    capped = rank(catalog, store, embedder, c4_plausible_rank=0, c4_max_lift=cap)
    open_ = rank(catalog, store, embedder, c4_plausible_rank=0)
    s = get_settings()
    q = embedder.embed_one(QUERY)
    bound = 0
    for skill in catalog.skills:
        row, free = capped[skill.name], open_[skill.name]
        full = float(embedder.embed([full_text(skill)])[0] @ q)
        base = (row.breakdown["semantic"] + s.c4_w_lexical * row.breakdown["lexical"]
                + s.c4_w_context * full + s.w_related * full)
        assert row.score == pytest.approx(min(free.score, base + cap), abs=1e-6)
        bound += free.score > base + cap + 1e-6
    assert bound >= 1  # the bought praise lifted docker-compose-basics past the cap
    assert capped["docker-compose-basics"].score < open_["docker-compose-basics"].score


def test_c5_trusted_pairs_leave_out_what_the_gate_distrusts(tmp_path, catalog, embedder):
    """C5's training pairs: the implausible praise drops out with the gate; the honest pair
    stays; without a gate every HELPFUL verdict of a not credibly harmful skill is a pair."""
    store = build_store(tmp_path / "s.db", catalog, embedder, BOUGHT + HONEST)
    gate = Router(catalog, store, embedder, get_settings(eval_blend=True,
                                                         c4_plausible_rank=RANK),
                  agreement=True).plausibility
    open_ = trusted_pairs(store, catalog)
    gated = trusted_pairs(store, catalog, plausible=gate)
    assert sorted(p.skill for p in open_) == ["docker-compose-basics"] * 4 + ["regex-debugger"]
    assert [(p.query, p.skill) for p in gated] == [(REGEX[0], "regex-debugger")]
    assert np.all([p.text == full_text(next(s for s in catalog.skills if s.name == p.skill))
                   for p in gated])


def test_the_sweep_gates_c5_pairs_only_when_told(tmp_path, catalog, embedder, monkeypatch):
    """A sweep's C5 fine-tune trains on every trusted pair by default (docs/blend.md: the gate
    cost C5 the hard prompts on MetaTool, and the over-praise rule holds the attack without
    it); MYTHLOOP_C5_GATE_PAIRS=1 puts the gate of the run's own router on them."""
    store = build_store(tmp_path / "s.db", catalog, embedder, BOUGHT + HONEST)
    router = Router(catalog, store, embedder,
                    get_settings(eval_blend=True, c4_plausible_rank=RANK), agreement=True)
    run = SimpleNamespace(store=store, catalog=catalog, router=router)
    monkeypatch.delenv("MYTHLOOP_C5_GATE_PAIRS", raising=False)
    assert "MYTHLOOP_C5_GATE_PAIRS" not in ranking_settings()
    pairs, dropped = round_pairs(run, 1)
    assert [(p.query, p.skill) for p in pairs] == \
        [(p.query, p.skill) for p in trusted_pairs(store, catalog)] and not dropped
    assert sorted(p.skill for p in pairs) == ["docker-compose-basics"] * 4 + ["regex-debugger"]
    monkeypatch.setenv("MYTHLOOP_C5_GATE_PAIRS", "1")
    gated, _ = round_pairs(run, 1)
    assert [(p.query, p.skill) for p in gated] == [(REGEX[0], "regex-debugger")]
    assert ranking_settings()["MYTHLOOP_C5_GATE_PAIRS"] is True  # in a sweep's fingerprint
