"""Honest statistics: intervals over prompts from 1 replicate, bands inside the axes, no claim
from a zero-width interval, the Conclusion names a round file cut mid-line, one round
numbering, a study names its levels.

Each test runs the real analysis (`mythloop.analysis.analyze` on a results dir built from
tests/data/results_small) and reads what it wrote: metrics.json, report.md, the figures.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from mythloop.analysis import analyze

RESULTS_SMALL = Path(__file__).resolve().parent / "data" / "results_small"


def _copy_cell(root: Path, src: str, cond: str, rep: int) -> None:
    """A replicate folder made from another one (rows relabelled): the same numbers."""
    target = root / f"{cond}-rep{rep}"
    target.mkdir()
    for file in (RESULTS_SMALL / src).iterdir():
        lines = []
        for line in file.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            row["replicate"] = rep
            if "session_id" in row:
                row["session_id"] = row["session_id"].replace(src, f"{cond}-rep{rep}")
            lines.append(json.dumps(row))
        (target / file.name).write_text("".join(x + "\n" for x in lines), encoding="utf-8")


def _three_replicates(root: Path, source) -> Path:
    """ROOT as a sweep of c0 and c3 with 3 replicates, each a copy of the small results
    dir's cell named by SOURCE(cond)."""
    root.mkdir()
    sweep = json.loads((RESULTS_SMALL / "sweep.json").read_text(encoding="utf-8"))
    sweep["replicates"] = 3
    (root / "sweep.json").write_text(json.dumps(sweep), encoding="utf-8")
    for cond in ("c0", "c3"):
        for rep in (1, 2, 3):
            _copy_cell(root, source(cond), cond, rep)
    return root


@pytest.fixture()
def three_identical(tmp_path) -> Path:
    """c0 and c3 with 3 replicates each, every replicate a copy of rep1: the per-replicate
    differences are all equal, so every interval of a difference has zero width."""
    return _three_replicates(tmp_path / "three", lambda cond: f"{cond}-rep1")


def _figure_bands(metrics: dict, key: str) -> tuple[int, str, list[tuple[float, float]],
                                                   tuple[float, float]]:
    """(filled bands drawn, caption, each band's y extent, the y-axis range) of one figure."""
    import matplotlib.pyplot as plt
    from matplotlib.collections import PolyCollection

    from mythloop.analysis.plots import _by_round

    fig = _by_round(metrics, key, "t", "y", "")
    try:
        polys = [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]
        extents = [(float(p.get_paths()[0].vertices[:, 1].min()),
                    float(p.get_paths()[0].vertices[:, 1].max())) for p in polys]
        caption = " ".join(t.get_text() for t in fig.texts)
        ylim = tuple(sorted(fig.axes[0].get_ylim()))
    finally:
        plt.close(fig)
    return len(polys), caption, extents, ylim  # type: ignore[return-value]


def test_two_replicates_and_one_draw_bands_over_the_prompts(tmp_path):
    # c3 has 2 replicates, c0 1 at its last round: the prompt is the unit, so both get
    # an interval, inside the metric's range and inside the axes
    root = tmp_path / "two"
    shutil.copytree(RESULTS_SMALL, root)
    result = analyze(root)
    metrics = json.loads(result.metrics_path.read_text(encoding="utf-8"))
    for key in ("in_distribution.hit@3", "trap.trap_win_rate", "trap.twin_rank"):
        bands, caption, extents, (low, high) = _figure_bands(metrics, key)
        assert bands == 2, key
        assert "Wilson interval at the clustered effective size" in caption
        assert all(low <= a <= b <= high for a, b in extents), (key, extents, low, high)
    report = result.report_path.read_text(encoding="utf-8")
    headline = report.split("## Headline", 1)[1].split("##", 1)[0]
    table = headline.split("|", 1)[1]
    assert re.search(r"\[[-+]?\d", table) and "n too small" not in table
    assert "prompt variation only" in metrics["per_round"]["c0"]["1"][
        "in_distribution.hit@3"]["covers"]


def test_every_interval_stays_in_its_metrics_range(three_identical):
    from mythloop.analysis.metrics import metric_range

    cell = three_identical / "c3-rep3" / "round_1.jsonl"
    rows = [json.loads(x) for x in cell.read_text(encoding="utf-8").splitlines()]
    rows = [r for r in rows if r["prompt_id"] != rows[0]["prompt_id"]]  # a miss
    cell.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    metrics = json.loads(analyze(three_identical).metrics_path.read_text(encoding="utf-8"))
    checked = 0
    for cond, rounds in metrics["per_round"].items():
        for summaries in rounds.values():
            for key, s in summaries.items():
                low, high = metric_range(key)
                if s["lo"] is None:
                    continue
                checked += 1
                assert (low is None or s["lo"] >= low) and (high is None or s["hi"] <= high), \
                    (cond, key, s)
    for d in metrics["differences"]["c3-c0"]["per_round"].values():
        for key, s in d.items():
            low, high = metric_range(key)
            if s["lo"] is not None and low is not None and high is not None:
                checked += 1
                assert -(high - low) <= s["lo"] <= s["hi"] <= high - low, (key, s)
    assert checked > 100
    bands, _, extents, (low, high) = _figure_bands(metrics, "in_distribution.hit@3")
    assert bands == 2 and all(low <= a <= b <= high for a, b in extents)


@pytest.fixture()
def c3_as_c0(tmp_path) -> Path:
    """c3's replicates are copies of c0's: every prompt gives the same difference (0)."""
    return _three_replicates(tmp_path / "same", lambda cond: "c0-rep1")


def test_a_zero_width_interval_is_never_a_claim(c3_as_c0):
    result = analyze(c3_as_c0)
    metrics = json.loads(result.metrics_path.read_text(encoding="utf-8"))
    last = str(metrics["last_round"])
    diffs = metrics["differences"]["c3-c0"]["per_round"][last]
    with_interval = [d for d in diffs.values() if d.get("n_prompts") and d["lo"] is not None]
    assert len(with_interval) > 10
    assert all(d["lo"] == d["hi"] == d["mean"] == 0 for d in with_interval)
    # a group of one prompt gets no interval, and says why
    assert diffs["null.abstention_rate"]["why"] == "only 1 prompt"
    conclusion = next(x for x in result.report_path.read_text(encoding="utf-8").splitlines()
                      if x.startswith("**Conclusion**"))
    assert "better on" not in conclusion and "worse on" not in conclusion
    assert "C3 does not beat C0" in conclusion
    assert "not claimed, every prompt gave the same difference" in conclusion
    assert "(no spread)" in result.report_path.read_text(encoding="utf-8")


def test_a_round_file_cut_mid_line_is_named_in_the_conclusion(three_identical):
    cell = three_identical / "c3-rep2" / "round_1.jsonl"
    text = cell.read_text(encoding="utf-8")
    lines = text.splitlines()
    cut = len(lines) - 3
    cell.write_text("\n".join(lines[:cut - 1]) + "\n" + lines[cut - 1][:40], encoding="utf-8")
    result = analyze(three_identical)
    report = result.report_path.read_text(encoding="utf-8")
    caveat = next(x for x in report.splitlines() if x.startswith("**Based on incomplete data**"))
    assert f"c3-rep2/round_1.jsonl cut at line {cut}" in caveat
    assert "C3 - C0 at round 2 of 2" in caveat
    assert report.index("**Based on incomplete data**") < report.index("## What was run")


def test_rounds_are_numbered_from_1_in_terminal_report_and_plots(tmp_path):
    from typer.testing import CliRunner

    from mythloop_app.cli import app

    root = tmp_path / "two"
    shutil.copytree(RESULTS_SMALL, root)
    out = CliRunner().invoke(app, ["analyze", str(root)])
    assert out.exit_code == 0, out.output
    assert "round 1 -> 2" in out.stdout and " r0 " not in out.stdout
    report = (root / "report.md").read_text(encoding="utf-8")
    assert "round 1 of 2" in report and "round 2 of 2" in report
    assert "round 0 of" not in report


def test_a_noise_studys_judge_line_names_its_levels():
    from mythloop.sweep import JudgeOptions, SweepConfig
    from mythloop.sweep.inputs import judge_label

    config = SweepConfig(judge_options=JudgeOptions(noise=0.0))
    assert "noise levels 0, 0.2, 0.4" in judge_label(config, [0.0, 0.2, 0.4])
    assert "noise 0," in judge_label(config)


def test_the_reports_degenerate_cases_read_as_counted(three_identical):
    """3 replicates, each a copy of the first: a twin ranked 1st in all 3 reads like a gold
    ranked 2nd in all 3 (no spread); the verdict and tag rates say what they counted and
    take their interval from those counts, not from the 3 replicates."""
    from scipy.stats import binomtest

    result = analyze(three_identical)
    report = result.report_path.read_text(encoding="utf-8")
    pairs = report.split("## Trap pairs", 1)[1].split("##", 1)[0]
    regex = next(x for x in pairs.splitlines() if x.startswith("| c0 | t_regex"))
    cells = [c.strip() for c in regex.split("|")]
    assert cells[5] == "2.00 [2.00, 2.00] (no spread)"  # gold rank 2 in every replicate
    assert cells[7] == "1.00 [1.00, 1.00] (no spread)"  # twin rank 1 in every replicate
    assert cells[9].endswith("(0 of 3)")
    verdicts = report.split("## Verdicts and tags", 1)[1].split("##", 1)[0]
    checked = 0
    for line in verdicts.splitlines():
        for m in re.finditer(r"(\d\.\d+) \[(\d\.\d+), (\d\.\d+)\] \((\d+) of (\d+)\)", line):
            k, n = int(m[4]), int(m[5])
            ci = binomtest(k, n).proportion_ci(method="wilson")
            assert (float(m[2]), float(m[3])) == pytest.approx((ci.low, ci.high), abs=6e-4)
            checked += 1
    assert checked >= 8
    parse = next(x for x in verdicts.splitlines() if x.startswith("| tag parse rate"))
    assert "0.139" not in parse and "(18 of 18)" in parse


def test_the_conclusion_names_every_effect_its_tables_show(three_identical):
    """A prompt group's ranking metric that a condition clearly lowered (normal-prompt hit@1,
    against C0 and over its own rounds) is named in the Conclusion, and the first-to-last
    table shows it; the headline's own metrics are not repeated."""
    import numpy as np

    from mythloop.analysis.conclusion import single_conclusion
    from mythloop.analysis.report import render_report
    from mythloop.analysis.stats import paired_difference

    metrics = json.loads(analyze(three_identical).metrics_path.read_text(encoding="utf-8"))
    kept, lost = np.ones((25, 3)), np.ones((25, 3))
    lost[:5] = 0.0  # 5 of 25 normal prompts lose their gold from rank 1: 1.00 -> 0.80
    lowered = paired_difference(lost, kept, (0.0, 1.0))
    assert lowered["hi"] < 0  # a claimable effect: the whole interval under 0
    last = str(metrics["last_round"])
    metrics["differences"]["c3-c0"]["per_round"][last]["normal.hit@1"] = lowered
    metrics["deltas"]["c3"]["normal.hit@1"] = lowered
    lines = single_conclusion(metrics)
    versus = next(x for x in lines if x.startswith("**Conclusion** (C3 - C0"))
    assert "worse on hit@1 (normal) -0.20" in versus and "C3 does not beat C0" in versus
    rounds = next(x for x in lines if x.startswith("**Over the rounds**"))
    assert "C3 worse on hit@1 (normal) -0.20" in rounds and "C0 no clear change" in rounds
    report = render_report(metrics)
    table = report.split("First round (", 1)[1].split("##", 1)[0]
    assert re.search(r"\| hit@1 \(normal\) \| .* \| -0\.200 \[", table)
    assert table.count("| hit@3 (held-out) |") == 1


def test_the_figures_footers_fit_inside_the_figure(three_identical):
    """The note under each by-round figure (what the bands are, how a miss counts) is
    wrapped inside the figure and stays under the x axis (trap_win_rate.png's ran off its
    right edge)."""
    import matplotlib.pyplot as plt

    from mythloop.analysis.plots import _by_round

    metrics = json.loads(analyze(three_identical).metrics_path.read_text(encoding="utf-8"))
    for c in metrics["per_round"]["c3"].values():  # two methods and the 1-replicate note
        c["trap.trap_win_rate"]["method"] = "t-cluster"
        c["trap.trap_win_rate"]["covers"] = "prompt variation only"
    note = "; a twin or gold outside the top 10 counts as rank 11; ties lose"
    fig = _by_round(metrics, "trap.trap_win_rate", "t", "y", note)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
        footer = fig.texts[-1]
        box = footer.get_window_extent(renderer)
        axis = fig.axes[0].xaxis.get_tightbbox(renderer)
        assert "ties lose" in footer.get_text() and footer.get_text().count("\n") >= 1
        assert 0 <= box.x0 and box.x1 <= fig.bbox.width and 0 <= box.y0
        assert box.y1 <= axis.y0  # under the x axis and its label, not over them
    finally:
        plt.close(fig)
