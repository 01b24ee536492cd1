"""The report's conclusion and the noise study's table, break-even and figure, on synthetic metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mythloop.analysis.conclusion import claim, single_conclusion
from mythloop.analysis.report import fmt
from mythloop.analysis.study import STUDY_METRICS, compute_study, render_study, table_rows

KEYS = [k for k, _ in STUDY_METRICS]


def _s(mean: float, lo: float | None, hi: float | None, n: int = 3) -> dict:
    """A summary; n < 3 here stands for one without an interval (lo and hi None, a why)."""
    if n < 3:
        return {"mean": mean, "lo": None, "hi": None, "n": 1, "n_prompts": 1,
                "why": "only 1 prompt"}
    return {"mean": mean, "lo": lo, "hi": hi, "n": n * 38, "n_prompts": 38, "n_replicates": n}


def _level_metrics(diffs: dict[str, dict[str, dict]], n: int = 3, rounds: int = 4) -> dict:
    """A metrics.json-shaped dict: per condition the last-round summaries, per treated
    condition the differences to c0."""
    conds = ["c0", *(name.split("-")[0] for name in diffs)]
    last = str(rounds - 1)
    return {
        "conditions": conds,
        "baseline": "c0",
        "replicates": {c: list(range(1, n + 1)) for c in conds},
        "rounds": list(range(rounds)),
        "sweep": {"rounds": rounds},
        "last_round": rounds - 1,
        "per_round": {c: {last: {k: _s(0.5, 0.4, 0.6, n) for k in KEYS}} for c in conds},
        "differences": {name: {"treated": name.split("-")[0], "baseline": "c0",
                               "per_round": {last: d}} for name, d in diffs.items()},
    }


def _diffs(trap, hit5, n=3):
    """trap-win and hit@5 differences as (mean, lo, hi); the other metrics straddle 0."""
    out = {k: _s(0.0, -0.1, 0.1, n) for k in KEYS}
    out["trap.trap_win_rate"] = _s(*trap, n)
    out["in_distribution.hit@5"] = _s(*hit5, n)
    return out


STUDY_META = {"study": "noise", "sweep_id": "D", "judge": "simulated", "simulated": True,
              "rounds": 4, "replicates": 3,
              "level_dirs": {"0.00": "noise-0.00", "0.20": "noise-0.20", "0.40": "noise-0.40"}}


def _study(n=3):
    levels = {
        0.0: _level_metrics({"c3-c0": _diffs((0.9, 0.8, 1.0), (0.0, -0.05, 0.05), n),
                             "c4-c0": _diffs((0.8, 0.6, 1.0), (0.0, -0.05, 0.05), n)}, n),
        0.2: _level_metrics({"c3-c0": _diffs((0.9, 0.7, 1.0), (-0.1, -0.2, -0.05), n),
                             "c4-c0": _diffs((0.8, 0.6, 1.0), (0.0, -0.1, 0.0), n)}, n),
        0.4: _level_metrics({"c3-c0": _diffs((0.3, -0.1, 0.6), (-0.2, -0.3, -0.1), n),
                             "c4-c0": _diffs((0.4, 0.1, 0.7), (0.0, -0.1, 0.1), n)}, n),
    }
    return compute_study(levels, STUDY_META)


def test_claim_reads_the_interval_and_the_metric_direction():
    assert claim("trap.trap_win_rate", _s(0.5, 0.1, 0.9)) == "improves"
    assert claim("in_distribution.hit@5", _s(-0.1, -0.2, -0.05)) == "hurts"
    assert claim("in_distribution.hit@5", _s(-0.05, -0.1, 0.0)) == "none"  # touches 0
    assert claim("catalog.in_distribution.poisoned_rate", _s(-0.4, -0.6, -0.2)) == "improves"
    assert claim("trap.trap_win_rate", _s(0.5, 0.4, 0.6, n=2)) is None  # no interval


def test_noise_table_break_even_and_conclusion():
    study = _study()
    be = study["break_even"]
    assert be["c3-c0"]["trap.trap_win_rate"] == {"noise": 0.4, "claimable": True}
    assert be["c4-c0"]["trap.trap_win_rate"] == {"noise": None, "claimable": True}
    assert be["c3-c0"]["in_distribution.hit@5"]["noise"] == 0.0  # no effect without noise
    assert study["claims"]["c3-c0"]["in_distribution.hit@5"] == {
        "0.00": "none", "0.20": "hurts", "0.40": "hurts"}
    text = study["conclusion"]
    assert "C3 vs C0: improves trap-win rate at noise 0, 0.2" in text
    assert "hurts hit@5 (in-distribution) at noise 0.2, 0.4" in text
    assert "C4 vs C0: improves trap-win rate at noise 0, 0.2, 0.4, hurts nothing" in text
    rows = table_rows(study)
    assert len(rows) == 3 * len(STUDY_METRICS)
    row = next(r for r in rows if r["noise"] == "0.2" and r["metric"] == "hit@5 (in-distribution)")
    assert row["c3-c0"] == "-0.10 [-0.20, -0.05] ▼"
    assert row["c4-c0"] == "+0.00 [-0.10, +0.00]"
    report = render_study(study)
    assert report.index("**Conclusion**") < 400 < report.index("## Noise table")
    assert "](noise_curve.png)" in report and "noise-0.20/report.md" in report
    assert "trap-win rate: noise 0.4" in report and "never (interval excludes 0 up to noise 0.4)" in report
    goal = study["c4_goal"]
    assert goal["0.20"]["trap_win_c4_minus_c3"] == 0.0 and goal["0.20"]["trap_win_within_0_1"]
    assert goal["0.20"]["hit5_not_below_c0"] is True  # [-0.10, +0.00] includes 0
    assert "## C4 goal" in report
    from mythloop.analysis.study import _c4_goal

    table = json.loads(json.dumps(study["table"]))
    table["0.40"]["conditions"]["c4"]["trap.trap_win_rate"]["mean"] = 0.35  # C3: 0.5
    table["0.40"]["differences"]["c4-c0"]["in_distribution.hit@5"] = _s(-0.1, -0.2, -0.05)
    worse = _c4_goal(table)["0.40"]
    assert worse["trap_win_within_0_1"] is False and worse["hit5_not_below_c0"] is False
    json.dumps(study, allow_nan=False)  # metrics.json-ready


def test_study_conclusion_is_not_claimed_without_intervals():
    study = _study(n=2)
    assert study["conclusion"].startswith("not claimed: no interval")
    assert all(not be["claimable"] for per in study["break_even"].values() for be in per.values())
    rows = table_rows(study)
    assert all("no interval" in r["c3-c0"] and "[" not in r["c3-c0"] for r in rows)
    assert "improves" not in render_study(study).split("## Noise table")[0]


def test_single_level_conclusion_names_metrics_with_intervals():
    headline = [
        {"key": "trap.trap_win_rate", "label": "trap-win rate",
         "differences": {"c3-c0": {"last": _s(0.93, 0.8, 1.0)}}},
        {"key": "in_distribution.hit@5", "label": "hit@5 (in-distribution)",
         "differences": {"c3-c0": {"last": _s(-0.1, -0.2, -0.05)}}},
        {"key": "heldout.hit@3", "label": "hit@3 (held-out)",
         "differences": {"c3-c0": {"last": _s(0.02, -0.1, 0.1)}}},
    ]
    metrics = {"baseline": "c0", "replicates": {"c0": [1, 2, 3], "c3": [1, 2, 3]},
               "last_round": 1, "rounds": [0, 1], "sweep": {"rounds": 2}, "headline": headline,
               "differences": {"c3-c0": {"treated": "c3"}}}
    line = single_conclusion(metrics)[0]
    assert line.startswith("**Conclusion** (C3 - C0 at round 2 of 2")
    assert "C3 is mixed against C0" in line
    assert "better on trap-win rate +0.93 [+0.80, +1.00]" in line
    assert "worse on hit@5 (in-distribution) -0.10 [-0.20, -0.05]" in line
    assert "no clear difference on hit@3 (held-out)" in line
    assert "(38 prompts x 3)" in line  # what each claim counted
    metrics["replicates"] = {"c0": [1], "c3": [1]}  # the prompt is the unit: still claimed
    lines = single_conclusion(metrics)
    assert "better on trap-win rate" in lines[0]
    assert "cover prompt variation only" in lines[1]


def test_fmt_says_why_there_is_no_interval():
    assert fmt(_s(0.5, 0.25, 0.75, n=3)) == "0.500 [0.250, 0.750]"
    assert fmt(_s(0.5, 0.25, 0.75, n=2)) == "0.500 (no interval: only 1 prompt)"
    assert fmt(_s(0.1, 0.1, 0.1), sign=True) == "+0.100 [+0.100, +0.100] (no spread)"


def test_noise_curve_png(tmp_path: Path):
    import matplotlib.image as mpimg

    from mythloop.analysis.plots_study import draw_noise_curve

    for n in (3, 2):  # with and without intervals
        path = draw_noise_curve(_study(n), tmp_path / f"curve{n}.png")
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[1] > 1000 and image.std() > 0.01


@pytest.mark.parametrize("levels", [[0.2], [0.4, 0.0, 0.2, 0.2]])
def test_levels_are_sorted_and_distinct(levels):
    from mythloop.sweep.study import level_dir_name, normalise_levels

    out = normalise_levels(levels)
    assert out == sorted(set(levels))
    assert [level_dir_name(x) for x in out][-1] == f"noise-{max(levels):.2f}"
