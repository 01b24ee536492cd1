"""Every metric of the analysis on tests/data/results_small, against answers worked out by hand.

The scenario (see tests/data/results_small/README.md): 2 conditions x 2 replicates x 2 rounds.
Round 0 is the same ranking R0 everywhere; c0-rep1 round 1 repeats R0 (blend off), c0-rep2
round 1 is an empty file, c3-rep1 and c3-rep2 round 1 show learning (C3R1a, C3R1b).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from mythloop.analysis import AnalysisError, analyze, load_results

DATA = Path(__file__).parent / "data" / "results_small"
L3 = 1 / math.log2(3)  # nDCG@5 of a gold at rank 2


@pytest.fixture(scope="module")
def metrics(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("small") / "results"
    shutil.copytree(DATA, root)
    result = analyze(root)
    return json.loads(result.metrics_path.read_text())


def cell(metrics: dict, cond: str, rep: int, rnd: int) -> dict:
    return metrics["cells"][cond][str(rep)][str(rnd)]


def approx(x):
    return pytest.approx(x, abs=1e-9)


def test_round0_ranking_metrics(metrics):
    m = cell(metrics, "c0", 1, 0)
    # in-distribution gold ranks: t_regex 2, t_sops missing (11), n_pytest 1
    assert m["in_distribution.n_prompts"] == 3
    assert m["in_distribution.hit@1"] == approx(1 / 3)
    assert m["in_distribution.hit@3"] == approx(2 / 3)
    assert m["in_distribution.hit@5"] == approx(2 / 3)
    assert m["in_distribution.mrr"] == approx(0.5)
    assert m["in_distribution.ndcg@5"] == approx((1 + L3) / 3)
    assert m["in_distribution.gold_rank"] == approx(14 / 3)
    assert m["in_distribution.abstention_rate"] == approx(0.0)
    assert m["trap.hit@1"] == approx(0.0)
    assert m["trap.hit@3"] == approx(0.5)
    assert m["trap.mrr"] == approx(0.25)
    assert m["trap.ndcg@5"] == approx(L3 / 2)
    assert m["trap.gold_rank"] == approx(6.5)
    assert m["normal.hit@1"] == approx(1.0)
    assert m["normal.gold_rank"] == approx(1.0)
    assert m["heldout.hit@1"] == approx(1.0)


def test_round0_pairs_tiers_null(metrics):
    m = cell(metrics, "c0", 1, 0)
    assert m["trap.n_pairs"] == 2
    assert m["trap.trap_win_rate"] == approx(0.0)  # twin rank 1 on both trap prompts
    assert m["trap.twin_rank"] == approx(1.0)
    # t_regex 0.65-0.70; t_sops gold missing -> lowest shown 0.10 - 0.001 - 0.60
    assert m["trap.gap_all"] == approx((-0.05 + (0.099 - 0.60)) / 2)
    assert m["trap.gap_both_present"] == approx(-0.05)
    assert m["trap.n_gap_both_present"] == 1
    assert m["heldout.trap_win_rate"] == approx(1.0)
    assert m["heldout.gap_all"] == approx(0.02)
    assert m["tier_rank.in_distribution.real"] == approx(5 / 3)
    assert m["tier_rank.in_distribution.poisoned"] == approx(1.0)
    assert m["tier_rank.in_distribution.competing"] == approx(2.5)
    assert m["tier_rank.in_distribution.noise"] == approx(3.0)
    assert m["tier_count.in_distribution.real"] == 3
    assert m["null.n_prompts"] == 1
    assert m["null.top_score"] == approx(0.40)
    assert m["null.abstention_rate"] == approx(1.0)
    assert all(
        m[f"status.{s}.{t}"] == 0
        for s in ("suspect", "archived")
        for t in ("real", "poisoned", "competing", "noise")
    )


def test_round0_turn_metrics(metrics):
    m = cell(metrics, "c3", 2, 0)
    assert (m["turns.total"], m["turns.ok"], m["turns.failed"], m["turns.timeout"]) == (4, 4, 0, 0)
    assert m["catalog.in_distribution.poisoned_rate"] == approx(2 / 3)
    assert m["catalog.trap.poisoned_rate"] == approx(1.0)
    assert m["catalog.trap.twin_rate"] == approx(1.0)
    assert m["catalog.normal.poisoned_rate"] == approx(0.0)
    assert m["catalog.null.poisoned_rate"] == approx(0.0)
    assert m["tags.parse_rate"] == approx(1.0)
    assert m["tags.null_tagged_rate"] == approx(0.0)
    assert (m["tags.total"], m["tags.off_catalog"], m["tags.invented"]) == (9, 1, 1)
    assert m["tags.off_catalog_rate"] == approx(1 / 9)
    assert m["tags.invented_rate"] == approx(1 / 9)
    # 7 applied verdicts, 4 right: naive HARMFUL, expected HELPFUL x2, noise NEUTRAL
    assert (m["verdicts.scored"], m["verdicts.correct"]) == (7, 4)
    assert m["verdicts.accuracy"] == approx(4 / 7)
    assert m["verdicts.accuracy.real"] == approx(2 / 3)
    assert m["verdicts.accuracy.poisoned"] == approx(0.5)
    assert m["verdicts.accuracy.competing"] is None
    assert m["verdicts.accuracy.noise"] == approx(0.5)
    assert m["verdict_mix.real.HARMFUL"] == 1
    assert m["verdict_mix.noise.HELPFUL"] == 1


def test_c3_rep1_round1_twin_missing_and_failed_turn(metrics):
    m = cell(metrics, "c3", 1, 1)
    assert m["in_distribution.hit@1"] == approx(1.0)
    assert m["in_distribution.ndcg@5"] == approx(1.0)
    assert m["trap.trap_win_rate"] == approx(1.0)
    assert m["trap.twin_rank"] == approx((3 + 11) / 2)  # sops-pgp left the top 10
    assert m["trap.gap_all"] == approx((0.37 + (0.50 - 0.099)) / 2)
    assert m["trap.gap_both_present"] == approx(0.37)
    assert m["null.abstention_rate"] == approx(0.0)  # top score 0.50 >= 0.45
    assert m["status.suspect.poisoned"] == 1  # naive-regex, ranked twice, counted once
    assert (m["turns.ok"], m["turns.failed"], m["turns.timeout"]) == (3, 1, 0)
    assert m["catalog.in_distribution.poisoned_rate"] == approx(1 / 3)  # failed turn counts
    assert m["catalog.trap.twin_rate"] == approx(0.5)
    assert m["tags.null_tagged_rate"] == approx(1.0)
    assert m["verdicts.accuracy"] == approx(1.0)
    assert m["verdicts.accuracy.competing"] == approx(1.0)


def test_c3_rep2_round1(metrics):
    m = cell(metrics, "c3", 2, 1)
    assert m["in_distribution.hit@1"] == approx(1 / 3)
    assert m["in_distribution.hit@3"] == approx(1.0)
    assert m["in_distribution.mrr"] == approx(2 / 3)
    assert m["in_distribution.ndcg@5"] == approx((1 + 2 * L3) / 3)
    assert m["trap.trap_win_rate"] == approx(0.5)
    assert m["trap.gap_all"] == approx(0.005)
    assert m["heldout.hit@1"] == approx(0.0)
    assert m["heldout.hit@3"] == approx(1.0)
    assert m["heldout.ndcg@5"] == approx(0.5)
    assert m["heldout.trap_win_rate"] == approx(0.0)
    assert m["null.top_score"] == approx(0.46)  # the archived -1.0 row is not the top
    assert m["null.abstention_rate"] == approx(0.0)
    assert m["status.suspect.poisoned"] == 1
    assert m["status.archived.noise"] == 1
    assert m["turns.timeout"] == 1
    assert m["tags.parse_rate"] == approx(0.5)
    assert m["tags.parse_failures"] == 1
    assert m["verdicts.accuracy"] == approx(0.5)


def test_empty_round_gives_no_cell(metrics):
    assert cell(metrics, "c0", 2, 1) == {}
    s = metrics["per_round"]["c0"]["1"]["in_distribution.hit@1"]
    # one replicate left, three prompts: an interval over the prompts, which says it covers
    # prompt variation only
    assert (s["mean"], s["n"], s["n_prompts"], s["n_replicates"]) == (approx(1 / 3), 3, 3, 1)
    assert 0.0 <= s["lo"] < 1 / 3 < s["hi"] <= 1.0
    assert "prompt variation only" in s["covers"]


def _matrix(metrics, cond, rnd, key, reps):
    """prompts x replicates of a metric, rebuilt from the per-prompt values."""
    from mythloop.analysis.compute import unit_matrix
    from mythloop.analysis.load import load_results
    from mythloop.analysis.metrics import measurement_units

    results = load_results(DATA)
    by_rep = {rep: measurement_units(results.sandboxes[(cond, rep)].rounds[rnd],
                                     results.prompts, 0.45).get(key) for rep in reps}
    pids = sorted({p for col in by_rep.values() for p in col or {}})
    return unit_matrix(by_rep, reps, pids)


def test_replicate_summaries(metrics):
    from mythloop.analysis.stats import interval

    r1 = metrics["per_round"]["c3"]["1"]
    s = r1["in_distribution.hit@1"]
    # three prompts x two replicates: the prompt is the unit, so two replicates give an
    # interval, and it is the one of the per-prompt matrix
    assert (s["mean"], s["n"], s["n_prompts"], s["n_replicates"]) == (approx(2 / 3), 6, 3, 2)
    assert s["values"] == [approx(1.0), approx(1 / 3)]  # per replicate, as before
    again = interval(_matrix(metrics, "c3", 1, "in_distribution.hit@1", [1, 2]), (0.0, 1.0))
    assert (s["lo"], s["hi"]) == (again["lo"], again["hi"])
    assert 0.0 <= s["lo"] < s["mean"] < s["hi"] <= 1.0
    s = r1["trap.trap_win_rate"]
    assert s["mean"] == approx(0.75) and s["method"] == "wilson-cluster"
    assert 0.0 <= s["lo"] < 0.75 < s["hi"] <= 1.0
    assert r1["null.top_score"]["mean"] == approx(0.48)
    assert r1["trap.gap_all"]["mean"] == approx((0.3855 + 0.005) / 2)
    assert r1["trap.gap_all"]["method"] == "t-cluster"  # a score gap has no bounds
    s = metrics["per_round"]["c3"]["0"]["in_distribution.mrr"]
    assert s["mean"] == approx(0.5) and 0.0 <= s["lo"] <= s["hi"] <= 1.0
    rank = r1["trap.twin_rank"]  # ranks stay within [1, 11]
    assert 1.0 <= rank["lo"] <= rank["mean"] <= rank["hi"] <= 11.0


def test_differences_and_deltas(metrics):
    diff = metrics["differences"]["c3-c0"]["per_round"]
    d0 = diff["0"]["in_distribution.hit@1"]
    # every prompt ranked alike in both conditions: a zero-width interval, never a claim
    assert d0["pairing"] == "paired by prompt and replicate"
    assert (d0["mean"], d0["lo"], d0["hi"]) == (0, 0, 0)
    d1 = diff["1"]["in_distribution.hit@1"]  # c0 has only rep1 at round 1
    assert d1["pairing"] == "paired by prompt (replicates unpaired)"
    assert d1["mean"] == approx(1 / 3) and -1.0 <= d1["lo"] < 1 / 3 < d1["hi"] <= 1.0
    d1 = diff["1"]["trap.trap_win_rate"]
    assert d1["mean"] == approx(0.75) and -1.0 <= d1["lo"] <= d1["hi"] <= 1.0
    delta = metrics["deltas"]["c3"]["in_distribution.hit@1"]  # rep1 +2/3, rep2 0
    assert delta["mean"] == approx(1 / 3) and (delta["n_prompts"], delta["n_replicates"]) == (3, 2)
    assert -1.0 <= delta["lo"] < delta["mean"] < delta["hi"] <= 1.0
    # c0 has no rep2 at its last round: the delta pairs the runs measured at both rounds
    assert metrics["deltas"]["c0"]["in_distribution.hit@1"]["n_replicates"] == 1
    assert (metrics["first_round"], metrics["last_round"]) == (0, 1)


def test_power_is_stated_for_hit5_and_trap_win(metrics):
    power = metrics["power"]["c3-c0"]
    assert set(power) == {"in_distribution.hit@5", "trap.trap_win_rate"}
    for p in power.values():
        assert p["power"] == 0.8 and 0 < p["mde"] <= 1.0 and p["n_prompts"] >= 2
        assert p["detects"] is False  # 3 prompts: no difference has 80% power


def test_per_prompt_values_average_to_the_cell_metrics(metrics):
    from mythloop.analysis.load import load_results
    from mythloop.analysis.metrics import measurement_metrics, measurement_units

    results = load_results(DATA)
    for (_cond, _rep), box in results.sandboxes.items():
        for rows in box.rounds.values():
            flat = measurement_metrics(rows, results.prompts, 0.45)
            for key, per_prompt in measurement_units(rows, results.prompts, 0.45).items():
                assert flat[key] == approx(sum(per_prompt.values()) / len(per_prompt)), key


def test_pairs_table(metrics):
    sops = metrics["pairs"]["c3"]["t_sops"]
    assert (sops["gold"], sops["twin"]) == ("sops-age", "sops-pgp")
    assert sops["first"]["gold_rank"]["mean"] == approx(11.0)
    assert sops["last"]["gold_rank"]["mean"] == approx(1.5)
    assert sops["last"]["twin_rank"]["mean"] == approx(6.0)
    assert sops["twin_status_last"] == {"1": "not ranked", "2": "suspect"}
    assert metrics["pairs"]["c3"]["t_regex"]["twin_status_last"] == {"1": "suspect", "2": "active"}
    assert metrics["pairs"]["c0"]["t_regex"]["twin_status_last"] == {"1": "active"}
    assert metrics["pairs"]["c0"]["h_regex"]["kind"] == "heldout"


def test_pooled_verdicts_tags_and_mix(metrics):
    c3 = metrics["overall"]["c3"]
    assert c3["verdicts.accuracy"]["values"] == [approx(9 / 12), approx(5 / 9)]
    # pooled over the replicates: what was counted, 14 of 21 verdicts right
    assert c3["verdicts.accuracy"]["counts"] == [[9, 12], [5, 9]]
    assert (c3["verdicts.accuracy"]["k"], c3["verdicts.accuracy"]["n"]) == (14, 21)
    assert c3["verdicts.accuracy"]["mean"] == approx(14 / 21)
    assert c3["tags.parse_rate"]["values"] == [approx(1.0), approx(0.8)]
    k, n = c3["tags.parse_rate"]["k"], c3["tags.parse_rate"]["n"]
    assert c3["tags.parse_rate"]["mean"] == approx(k / n) and k < n
    assert c3["turns.failed"]["mean"] == approx(0.5)
    assert metrics["overall"]["c0"]["verdicts.accuracy"]["mean"] == approx(4 / 7)
    mix = metrics["verdict_mix"]
    assert mix["c3"]["real"] == {"HELPFUL": 7, "NEUTRAL": 0, "HARMFUL": 2}
    assert mix["c3"]["poisoned"] == {"HELPFUL": 3, "NEUTRAL": 0, "HARMFUL": 3}
    assert mix["c3"]["competing"] == {"HELPFUL": 0, "NEUTRAL": 1, "HARMFUL": 0}
    assert mix["c3"]["noise"] == {"HELPFUL": 2, "NEUTRAL": 3, "HARMFUL": 0}
    assert mix["c0"]["noise"] == {"HELPFUL": 3, "NEUTRAL": 3, "HARMFUL": 0}


def test_failures_and_data_issues(metrics):
    failures = [
        (f["round"], f["cond"], f["replicate"], f["prompt_id"], f["status"])
        for f in metrics["failures"]
    ]
    assert failures == [(1, "c3", 1, "t_sops", "failed"), (1, "c3", 2, "t_sops", "timeout")]
    assert metrics["failures"][0]["error"].startswith("ServerError: 503")
    issues = {(i["file"], i["line"], i["problem"].split(":")[0]) for i in metrics["data_issues"]}
    assert issues == {
        ("c0-rep2/round_1.jsonl", None, "no measurement rows"),
        ("c0-rep2/turns.jsonl", None, "no turns for round 1"),
        ("c3-rep2/round_0.jsonl", 8, "malformed JSON"),
    }
    # the malformed line was dropped, the rest of that round is R0
    assert cell(metrics, "c3", 2, 0)["in_distribution.mrr"] == approx(0.5)


def test_headline_rows_come_from_metrics(metrics):
    row = next(r for r in metrics["headline"] if r["key"] == "trap.trap_win_rate")
    assert row["conditions"]["c3"]["last"]["mean"] == approx(0.75)
    assert row["differences"]["c3-c0"]["last"]["mean"] == approx(0.75)


def test_missing_round_file_and_bad_turn_lines(tmp_path):
    root = tmp_path / "r"
    shutil.copytree(DATA, root)
    (root / "c3-rep1" / "round_1.jsonl").unlink()
    with (root / "c3-rep1" / "turns.jsonl").open("a") as fh:
        fh.write("not json\n")
        fh.write('{"round": 1, "prompt_id": "t_regex"}\n')  # no status
    results = load_results(root)
    problems = {(i.file, i.problem) for i in results.issues}
    assert ("c3-rep1/round_1.jsonl", "missing round file") in problems
    assert sum(1 for i in results.issues if i.file == "c3-rep1/turns.jsonl" and i.line) == 2
    metrics = json.loads(analyze(root).metrics_path.read_text())
    s = metrics["per_round"]["c3"]["1"]["in_distribution.hit@1"]
    assert (s["mean"], s["n_replicates"], s["replicates"]) == (approx(1 / 3), 1, [2])


@pytest.mark.parametrize("content", [None, "[1, 2]", "{not json"])
def test_not_a_sweep_dir(tmp_path, content):
    if content is not None:
        (tmp_path / "sweep.json").write_text(content)
    with pytest.raises(AnalysisError, match="sweep"):
        load_results(tmp_path)


def test_sweep_without_sandboxes(tmp_path):
    (tmp_path / "sweep.json").write_text("{}")
    with pytest.raises(AnalysisError, match="no <cond>-rep<k>"):
        load_results(tmp_path)


def test_rows_are_held_without_unread_fields_and_the_metrics_do_not_change(tmp_path, monkeypatch):
    """load_results leaves out the fields no metric reads (a ranked skill's breakdown, a turn's
    reply tail) and shares the rows' strings; the metrics are those of the rows as on disk."""
    import mythloop.analysis.load as load

    root = tmp_path / "r"
    shutil.copytree(DATA, root)
    round_file = root / "c3-rep1" / "round_0.jsonl"  # as the sweep writes it: with a breakdown
    lines = [json.loads(line) for line in round_file.read_text().splitlines() if line.strip()]
    round_file.write_text("".join(json.dumps({**row, "breakdown": {"semantic": row["score"]}})
                                  + "\n" for row in lines))
    box = load_results(root).sandboxes[("c3", 1)]
    rows = box.rounds[0]
    assert rows and all(not set(r) & load.UNREAD_FIELDS[load.MeasurementRow] for r in rows)
    assert box.turns and all(not set(t) & load.UNREAD_FIELDS[load.TurnRow] for t in box.turns)
    assert rows[0]["cond"] is rows[-1]["cond"]  # one string, shared
    slim = json.loads(analyze(root).metrics_path.read_text())
    monkeypatch.setattr(load, "UNREAD_FIELDS", {})
    full = json.loads(analyze(root).metrics_path.read_text())
    assert slim == full
