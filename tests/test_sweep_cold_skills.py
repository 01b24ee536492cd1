"""Cold skills (issue 40): a skill with no history is not starved by learning.

Small slices of the bundled fixtures: the hash that picks cold skills, the exploration slot of
C4's learning catalog, `--cold-skills` / `--add-skills-at` through the real sweep flow (a
simulated judge, labelled as such in every output), and their bad values refused in one line
before Prefect starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_bad_input import rejected, sweep_args, ws  # noqa: F401 (ws is a fixture)

from mythloop.data import data_path
from mythloop.fileio import read_jsonl
from mythloop.router import RankedSkill
from mythloop.router.explore import EXPLORE_WINDOW, exploration_rng, learning_catalog
from mythloop.skills import load_catalog
from mythloop.sweep import JudgeOptions, SweepConfig
from mythloop.sweep.config import cold_skill_names, resolve_cold_skills

POOL = data_path("fixtures", "pool")


def _names() -> list[str]:
    return load_catalog(POOL).names()


# ---- which skills are cold ---------------------------------------------------------------


def test_cold_skills_are_a_stable_seeded_hash_of_the_name():
    names = _names()
    fifth = cold_skill_names(names, 0.2, 42)
    assert fifth == cold_skill_names(list(reversed(names)), 0.2, 42)  # any pool order
    assert 0 < len(fifth) < len(names)
    assert set(fifth) <= set(cold_skill_names(names, 0.4, 42))  # a larger fraction adds
    assert fifth != cold_skill_names(names, 0.2, 43)  # another seed, another split
    # A skill's draw does not depend on the others: a smaller pool keeps its cold ones.
    assert cold_skill_names(names[:40], 0.2, 42) == [n for n in fifth if n in names[:40]]


def test_resolve_cold_skills_refuses_what_cannot_work(tmp_path):
    names = _names()
    listed = tmp_path / "cold.txt"
    listed.write_text("# held back\nregex-debugger\n\nasyncio-debugging  # a comment\n")
    config = SweepConfig(cold_skills_file=listed, rounds=3, add_skills_at=2)
    assert resolve_cold_skills(config, names, 42) == ["asyncio-debugging", "regex-debugger"]
    bad = tmp_path / "bad.txt"
    bad.write_text("regex-debugger\nno-such-skill\n")
    cases = [
        (SweepConfig(cold_skills_file=bad), "no-such-skill"),
        (SweepConfig(add_skills_at=1), "needs --cold-skills"),
        (SweepConfig(cold_skills=0.2, rounds=3, add_skills_at=3), "past the last round"),
        (SweepConfig(cold_skills=1e-9), "selects none"),
    ]
    for config, needle in cases:
        with pytest.raises(ValueError, match=needle):
            resolve_cold_skills(config, names, 42)


# ---- the exploration slot ----------------------------------------------------------------


def _ranked(rows: list[tuple[str, float, int, int]]) -> list[RankedSkill]:
    return [RankedSkill(name=name, rank=i, score=score, breakdown={}, status="active",
                        helpful=helpful, harmful=harmful, streak=0, tier=None, description="")
            for i, (name, score, helpful, harmful) in enumerate(rows, start=1)]


def test_exploration_slot_is_seeded_and_favours_the_under_observed():
    # Ranks 1-5 judged often; rank 6 never judged; rank 7 judged often, both as close.
    rows = [(f"warm-{i}", 0.9 - 0.02 * i, 20, 0) for i in range(5)]
    rows += [("new-skill", 0.79, 0, 0), ("old-skill", 0.79, 20, 0)]
    rows += [(f"far-{i}", 0.3, 0, 0) for i in range(3 * EXPLORE_WINDOW)]
    ranked = _ranked(rows)
    top, none = learning_catalog(ranked, 5, 0.0, np.random.default_rng(0))
    assert [r.name for r in top] == [f"warm-{i}" for i in range(5)] and none is None
    picks = {}
    for prompt in range(300):
        a = learning_catalog(ranked, 5, 0.1, exploration_rng(7, 1, f"p{prompt}"))
        b = learning_catalog(ranked, 5, 0.1, exploration_rng(7, 1, f"p{prompt}"))
        assert [r.name for r in a[0]] == [r.name for r in b[0]]  # seeded: the same again
        assert [r.name for r in a[0][:4]] == [f"warm-{i}" for i in range(4)]
        shown = a[1].skill if a[1] else a[0][4].name
        picks[shown] = picks.get(shown, 0) + 1
        if a[1]:
            assert a[1].slot == 5 and a[1].displaced == "warm-4"
            assert a[1].skill in {r.name for r in ranked[4:EXPLORE_WINDOW * 5]}
            assert "Thompson draw" in a[1].reason and a[1].skill in a[1].reason
    assert not any(name.startswith("far-") for name in picks)  # implausible: never shown
    assert picks.get("new-skill", 0) > 3 * picks.get("old-skill", 0) > 0 or (
        picks.get("new-skill", 0) > 30 and picks.get("old-skill", 0) == 0)


def test_an_archived_skill_never_takes_the_exploration_slot():
    rows = [(f"warm-{i}", 0.9 - 0.02 * i, 20, 0) for i in range(5)]
    rows += [("archived", -1.0, 0, 3)] + [(f"far-{i}", 0.1, 20, 0) for i in range(5)]
    ranked = _ranked(rows)
    for prompt in range(100):
        catalog, exploration = learning_catalog(ranked, 5, 0.5, exploration_rng(1, 0, str(prompt)))
        assert "archived" not in [r.name for r in catalog]


# ---- through the sweep flow --------------------------------------------------------------


def _rows(path: Path) -> list[dict]:
    return list(read_jsonl(path)) if path.exists() else []


def _rank(rows: list[dict], prompt_id: str, skill: str) -> int:
    ranks = [r["rank"] for r in rows if r["prompt_id"] == prompt_id and r["skill_name"] == skill]
    return ranks[0] if ranks else 11


@pytest.mark.usefixtures("prefect_harness")
def test_a_cold_skill_is_withheld_from_learning_and_not_starved(tmp_path):
    """--cold-skills FILE: the skill's prompts are never learned from, its held-out prompts
    rank it no worse under C4 than under C0 at every round, C4's round files report the
    exploration slots (C0's none), and the report splits held-out metrics warm / cold."""
    from mythloop_flows.feedback_loop import sweep

    cold = "asyncio-debugging"
    listed = tmp_path / "cold.txt"
    listed.write_text(f"{cold}\n")
    out = tmp_path / "sweep"
    sweep(SweepConfig(conditions=["c0", "c4"], rounds=3, cold_skills_file=listed,
                      results_dir=out))
    meta = json.loads((out / "sweep.json").read_text())
    assert meta["cold_skills"] == [cold] and meta["add_skills_at"] is None
    prompts = {p["id"]: p for p in _fixture_prompts()}
    own = [pid for pid, p in prompts.items() if p.get("expected_skill") == cold]
    assert own, "the fixtures hold prompts of the cold skill"
    for cond in ("c0", "c4"):
        turns = _rows(out / f"{cond}-rep1" / "turns.jsonl")
        assert turns and all(t["expected_skill"] != cold for t in turns)
        assert {t["round"] for t in turns} == {0, 1, 2}
    exploring = 0
    for round_idx in range(3):
        c0 = _rows(out / "c0-rep1" / f"round_{round_idx}.jsonl")
        c4 = _rows(out / "c4-rep1" / f"round_{round_idx}.jsonl")
        for pid in own:
            assert _rank(c4, pid, cold) <= _rank(c0, pid, cold), (round_idx, pid)
        assert not (out / "c0-rep1" / f"round_{round_idx}.explore.jsonl").exists()
        for row in _rows(out / "c4-rep1" / f"round_{round_idx}.explore.jsonl"):
            exploring += 1
            assert row["round"] == round_idx and row["slot"] == 5
            assert 5 < row["rank"] <= EXPLORE_WINDOW * 5 and row["reason"]
            turn = next(t for t in _rows(out / "c4-rep1" / "turns.jsonl")
                        if t["round"] == round_idx and t["prompt_id"] == row["prompt_id"])
            assert turn["ranked_top5"][4] == row["skill"]  # what the judge was shown
    assert exploring > 0
    metrics = json.loads((out / "metrics.json").read_text())
    for cond in ("c0", "c4"):
        for s in metrics["per_round"][cond].values():
            assert {"heldout_warm.hit@5", "heldout_cold.hit@5"} <= set(s)
    report = (out / "report.md").read_text()
    assert "warm and cold skills" in report and cold in report


@pytest.mark.usefixtures("prefect_harness")
def test_a_poisoned_skill_added_later_is_judged_and_demoted_not_promoted(tmp_path):
    """--add-skills-at 1 with a poisoned skill: absent at round 0, shown from round 1, judged
    HARMFUL, and at the last round ranked under its real twin for the trap prompts."""
    from mythloop_flows.feedback_loop import sweep

    poisoned, gold = "naive-regex-matcher", "regex-debugger"
    listed = tmp_path / "cold.txt"
    listed.write_text(f"{poisoned}\n")
    out = tmp_path / "sweep"
    sweep(SweepConfig(conditions=["c4"], rounds=5, cold_skills_file=listed, add_skills_at=1,
                      judge_options=JudgeOptions(noise=0.0, omit_rate=0.0, invent_rate=0.0),
                      results_dir=out))
    box = out / "c4-rep1"
    assert all(r["skill_name"] != poisoned for r in _rows(box / "round_0.jsonl"))
    turns = _rows(box / "turns.jsonl")
    assert all(poisoned not in t["ranked_top5"] for t in turns if t["round"] == 0)
    judged = [a for t in turns if t["round"] >= 1 for a in t["applied"] if a["name"] == poisoned]
    assert len(judged) >= 3 and {a["verdict"] for a in judged} == {"HARMFUL"}
    last = _rows(box / "round_4.jsonl")
    traps = [p["id"] for p in _fixture_prompts() if p.get("trap_for") == poisoned]
    for pid in traps:
        assert _rank(last, pid, gold) < _rank(last, pid, poisoned), pid
        assert _rank(last, pid, poisoned) > 1


def _fixture_prompts() -> list[dict]:
    import yaml

    data = yaml.safe_load(data_path("fixtures", "prompts.yaml").read_text())
    return [dict(p, kind=section) for section in ("in_distribution", "null_prompts", "heldout")
            for p in data.get(section) or []]


# ---- bad values: one line, exit 2, before Prefect ----------------------------------------


@pytest.mark.parametrize(("extra", "names"), [
    ({"--cold-skills": "1.5"}, ("--cold-skills 1.5", "0..1")),
    ({"--cold-skills": "0"}, ("--cold-skills 0", "0..1")),
    ({"--cold-skills": "missing.txt"}, ("cold-skills file", "missing.txt")),
    ({"--add-skills-at": "2"}, ("--add-skills-at", "--cold-skills")),
    ({"--cold-skills": "0.5", "--add-skills-at": "0"}, ("--add-skills-at 0",)),
    # rounds are numbered from 1 everywhere people read them: round 1 is no later round
    ({"--cold-skills": "0.5", "--add-skills-at": "1"},
     ("--add-skills-at 1", "round >= 2", "resumes with --add-skills-at 2")),
    ({"--cold-skills": "0.5", "--add-skills-at": "3"}, ("--add-skills-at 3", "last round")),
])
def test_bad_cold_skill_options_are_refused_in_one_line(ws, extra, names):  # noqa: F811
    rejected(ws, *sweep_args(ws, **extra), names=names)


def test_a_cold_skills_file_naming_an_unknown_skill_is_refused(ws):  # noqa: F811
    listed = ws["root"] / "cold.txt"
    listed.write_text("regex-debugger\nnot-a-skill\n")
    rejected(ws, *sweep_args(ws, **{"--cold-skills": listed}), names=("not-a-skill", "pool"))


def test_a_sweep_from_when_add_skills_at_counted_from_0_says_how_to_resume(ws):  # noqa: F811
    """A sweep started with `--add-skills-at 2` when the option counted rounds from 0 (the
    third round): its printed resume command now means the second round. The rerun is
    refused in one line that gives the number that resumes it; with that number it resumes."""
    from mythloop.sweep.inputs import InputError, check_inputs

    earlier = ws["earlier"]
    then = SweepConfig(pool=ws["pool"], prompts_file=ws["prompts"], rounds=3, cold_skills=0.5,
                       add_skills_at=2, results_dir=earlier)
    meta = json.loads((earlier / "sweep.json").read_text(encoding="utf-8"))
    meta.update(fingerprint=then.fingerprint(), add_skills_at=2)
    (earlier / "sweep.json").write_text(json.dumps(meta), encoding="utf-8")
    typed_again = then.model_copy(update={"add_skills_at": 1})  # `--add-skills-at 2` now
    with pytest.raises(InputError) as info:
        check_inputs(typed_again)
    assert "rerun with --add-skills-at 3 to resume it" in str(info.value)
    assert "\n" not in str(info.value)
    check_inputs(then)  # `--add-skills-at 3` now: the same sweep, resumed
    other = then.model_copy(update={"add_skills_at": 1, "cold_skills": 0.4})
    with pytest.raises(InputError, match="holds a different sweep"):
        check_inputs(other)
