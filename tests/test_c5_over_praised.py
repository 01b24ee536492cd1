"""C5's over-praise defence (docs/blend.md, "Defences"): a skill praised on more prompts than
Tukey's upper fence over the skills with pairs teaches the tuned model nothing."""

from __future__ import annotations

from mythloop.data import data_path
from mythloop.router.tuning import (
    OVER_PRAISED_FLOOR,
    TrainingPair,
    drop_over_praised,
    pairs_fingerprint,
    trusted_pairs,
)
from mythloop.settings_model import Settings
from mythloop.skills import load_catalog
from mythloop.verdicts import VerdictIn, VerdictStore


def _pairs(counts: dict[str, int]) -> list[TrainingPair]:
    """COUNTS distinct prompts per skill, interleaved as a store's order would be."""
    out = []
    for k in range(max(counts.values())):
        for skill, n in counts.items():
            if k < n:
                out.append(TrainingPair(f"prompt {k} for {skill}", skill, f"text of {skill}"))
    return out


def test_a_skill_praised_far_beyond_the_others_gives_no_pairs():
    # Nine honest skills with 6-10 prompts each and one praised on 14 (Q1 7.25, Q3 9: fence
    # 11.6),
    # as an injected copy was after one round on MetaTool.
    counts = {f"tool-{i}": n for i, n in enumerate([6, 7, 7, 8, 8, 8, 9, 9, 10])}
    counts["tool-copy"] = 14
    pairs = _pairs(counts)
    kept, dropped = drop_over_praised(pairs, 1.5)
    assert dropped == ["tool-copy"]
    assert kept == [p for p in pairs if p.skill != "tool-copy"]  # the rest, in their order
    # Under the fence it stays; a wider fence (3 IQR: 14.25) keeps it too.
    counts["tool-copy"] = 11
    assert drop_over_praised(_pairs(counts), 1.5)[1] == []
    counts["tool-copy"] = 14
    assert drop_over_praised(_pairs(counts), 3.0)[1] == []


def test_without_an_outlier_the_pairs_and_their_fingerprint_are_unchanged():
    pairs = _pairs({"a": 10, "b": 10, "c": 9, "d": 10, "e": 8})
    kept, dropped = drop_over_praised(pairs, 1.5)
    assert (kept, dropped) == (pairs, [])
    assert pairs_fingerprint(kept) == pairs_fingerprint(pairs)


def test_the_floor_and_the_off_switch_keep_every_pair():
    # A small store (the fixtures: one or two prompts a skill): the fence is 1, but no skill
    # with FLOOR prompts or fewer is dropped.
    small = _pairs({"a": 1, "b": 1, "c": 1, "d": 2, "e": OVER_PRAISED_FLOOR})
    assert drop_over_praised(small, 1.5) == (small, [])
    big = _pairs({"a": 1, "b": 1, "c": 1, "d": 1, "e": OVER_PRAISED_FLOOR + 1})
    assert drop_over_praised(big, 1.5)[1] == ["e"]
    assert drop_over_praised(big, 0) == (big, [])
    assert drop_over_praised(big[:1], 1.5) == (big[:1], [])  # one skill: nothing to compare
    assert drop_over_praised([], 1.5) == ([], [])


def test_prompts_are_counted_once_per_skill():
    # The same prompt praised again (later rounds) is one prompt, not many.
    pairs = _pairs({"a": 6, "b": 6, "c": 6, "d": 6})
    pairs += [TrainingPair("prompt 0 for a", "a", "text of a")] * 20
    assert drop_over_praised(pairs, 1.5)[1] == []


def test_the_default_is_on_and_a_store_of_persuaded_praise_loses_the_injected_skill(tmp_path):
    assert Settings().c5_over_praised == 1.5
    catalog = load_catalog(data_path("fixtures", "pool"))
    honest = ["regex-debugger", "asyncio-debugging", "structured-logging", "sops-age-secrets",
              "docker-multistage-builds", "sql-query-plan-tuning"]
    store = VerdictStore(tmp_path / "store.db")
    rows = []
    for i, skill in enumerate(honest):
        rows += [VerdictIn(session_id=f"h{i}-{k}", skill_name=skill, host="test",
                           verdict="HELPFUL", reason="it is what this prompt needs, concretely",
                           query=f"{skill} question {k}") for k in range(6)]
    # A skill the judge praises wherever it is shown: on every honest prompt.
    rows += [VerdictIn(session_id=f"p{k}", skill_name="git-bisect-regression-hunt", host="test",
                       verdict="HELPFUL", reason="it is what this prompt needs, concretely",
                       query=row.query) for k, row in enumerate(rows)]
    store.record_verdicts(rows)
    pairs = trusted_pairs(store, catalog)
    kept, dropped = drop_over_praised(pairs, Settings().c5_over_praised)
    assert dropped == ["git-bisect-regression-hunt"]
    assert {p.skill for p in kept} == set(honest) and len(kept) == 36
