"""report.md, the figures, determinism, the CLI and the bootstrap helpers."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mythloop.analysis import analyze
from mythloop.analysis.plots import FIGURES
from mythloop.analysis.stats import bootstrap_mean, difference, summarize

DATA = Path(__file__).parent / "data" / "results_small"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("out") / "results"
    shutil.copytree(DATA, root)
    return root, analyze(root)


def test_report_sections_intervals_and_simulated_banner(analysed):
    root, result = analysed
    report = result.report_path.read_text()
    assert result.report_path == root / "report.md"
    assert "SIMULATED JUDGE" in report
    # c3 round 1 hit@1: replicates 1/3 and 1 -> mean 0.667; two replicates give no interval
    assert "0.667 (n=2, n too small)" in report and "0.667 [0.333, 1.000]" not in report
    assert "(n=1, n too small)" in report  # c0's last round has one replicate
    assert re.search(r"\| hit@3 \(in-distribution\) \| 0\.667 \(n=2, n too small\) \|", report)
    assert "**Conclusion**: not claimed: 2 replicate(s)" in report.split("## What was run")[0]
    assert "round 2 of 2" in report
    for name in FIGURES:
        assert f"]({name})" in report
    for text in (
        "all-MiniLM-L6-v2",
        "2025-01-01T02:00:00Z",
        "replicate_seeds",
        "ServerError: 503",
        "BackendTimeout",
        "not ranked",
        "malformed JSON",
        "sops-pgp",
    ):
        assert text in report, text


def test_report_of_a_real_judge_is_not_labelled_simulated(tmp_path):
    root = tmp_path / "r"
    shutil.copytree(DATA, root)
    sweep = json.loads((root / "sweep.json").read_text())
    sweep.update(judge="gemini", simulated=False, model="gemini-3-flash-preview")
    (root / "sweep.json").write_text(json.dumps(sweep))
    report = analyze(root).report_path.read_text()
    assert "SIMULATED" not in report
    assert "not simulated" in report


def test_figures_are_png_images(analysed):
    import matplotlib.image as mpimg

    root, result = analysed
    assert [p.name for p in result.figures] == list(FIGURES)
    for path in result.figures:
        assert path.parent == root
        assert path.read_bytes()[:8] == PNG_MAGIC
        image = mpimg.imread(path)
        assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 300
        assert image.std() > 0.01  # something was drawn
    assert not list(root.glob(".*.png")) and not list(root.glob(".metrics.json-*"))


def test_analyze_is_deterministic(analysed):
    root, result = analysed
    first_metrics = result.metrics_path.read_bytes()
    first_report = result.report_path.read_bytes()
    again = analyze(root)
    assert again.metrics_path.read_bytes() == first_metrics
    assert again.report_path.read_bytes() == first_report
    assert again.headline_rows == result.headline_rows


def test_metrics_json_is_strict_json(analysed):
    _, result = analysed
    text = result.metrics_path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data["sweep"]["simulated"] is True
    assert data["analysis"]["abstain_threshold"] == 0.45


def test_cli_analyze(analysed):
    from mythloop_app.cli import app

    root, _ = analysed
    out = CliRunner().invoke(app, ["analyze", str(root)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert f"report: {root / 'report.md'}" in out.output
    assert "SIMULATED JUDGE" in out.output
    assert "trap-win rate" in out.output


def test_cli_analyze_without_sweep(tmp_path):
    from mythloop_app.cli import app

    out = CliRunner().invoke(app, ["analyze", str(tmp_path)], env={"COLUMNS": "200"})
    assert out.exit_code == 2
    assert "no sweep.json" in out.output
    assert "Traceback" not in out.output


def test_bootstrap_collapses_for_identical_and_single_values():
    assert bootstrap_mean([0.4, 0.4, 0.4]) == {"mean": 0.4, "lo": 0.4, "hi": 0.4, "n": 3}
    assert bootstrap_mean([0.7]) == {"mean": 0.7, "lo": 0.7, "hi": 0.7, "n": 1}
    assert summarize({1: None, 2: None}) is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bootstrap_interval_contains_the_mean_and_is_seeded(seed):
    values = list(np.random.default_rng(seed).uniform(0, 1, size=5))
    s = bootstrap_mean(values)
    assert min(values) <= s["lo"] <= s["mean"] <= s["hi"] <= max(values)
    assert s["lo"] < s["hi"]
    assert bootstrap_mean(values) == s


def test_difference_pairs_by_replicate_when_it_can():
    paired = difference({1: 0.5, 2: 0.7}, {1: 0.4, 2: 0.6})
    assert paired["pairing"] == "paired" and paired["method"] == "none"  # n=2: no interval
    assert paired["mean"] == pytest.approx(0.1) and paired["lo"] is None is paired["hi"]
    paired = difference({1: 0.5, 2: 0.7, 3: 0.4}, {1: 0.4, 2: 0.5, 3: 0.4})
    assert paired["pairing"] == "paired" and paired["method"] == "t"
    diffs = np.array([0.1, 0.2, 0.0])  # the t interval of the per-replicate differences
    half = 4.302652729911275 * diffs.std(ddof=1) / np.sqrt(3)
    assert (paired["lo"], paired["hi"]) == (pytest.approx(0.1 - half), pytest.approx(0.1 + half))
    unpaired = difference({1: 0.5, 2: 0.7, 3: 0.9}, {1: 0.4})
    assert unpaired["pairing"] == "unpaired" and unpaired["lo"] is None  # one baseline value
    assert unpaired["mean"] == pytest.approx(0.3)
    welch = difference({1: 0.5, 2: 0.7, 3: 0.9}, {1: 0.4, 2: 0.5, 4: 0.3})
    assert welch["method"] == "welch-t" and welch["lo"] < 0.3 < welch["hi"]
    assert difference({1: None}, {1: 0.2}) is None


def test_the_interval_method_follows_the_replicate_count():
    from mythloop.analysis.stats import mean_interval, zero_width

    assert mean_interval([0.2, 0.6]) == {"mean": 0.4, "lo": None, "hi": None, "n": 2,
                                         "method": "none"}
    small = mean_interval([0.2, 0.4, 0.6])
    assert small["method"] == "t"
    assert small["lo"] == pytest.approx(0.4 - 4.302652729911275 * 0.2 / np.sqrt(3))
    # t is wider than the percentile bootstrap over the same 3 values (which undercovers)
    boot = bootstrap_mean([0.2, 0.4, 0.6])
    assert small["lo"] < boot["lo"] and small["hi"] > boot["hi"]
    many = mean_interval(list(np.linspace(0, 1, 10)))
    assert many["method"] == "bootstrap" and many["lo"] < many["mean"] < many["hi"]
    flat = mean_interval([0.04, 0.04, 0.04])
    assert zero_width(flat) and not zero_width(small) and not zero_width(mean_interval([1.0]))
