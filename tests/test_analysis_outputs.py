"""report.md, the figures, determinism and the CLI (the interval helpers: test_analysis_intervals.py)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mythloop.analysis import analyze
from mythloop.analysis.plots import FIGURES

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
    # c3 round 1 hit@1: 3 prompts x 2 replicates -> mean 0.667 with an interval over prompts
    assert re.search(r"\| hit@1 \(in-distribution\) \| 0\.333 \[0\.\d+, 0\.\d+\] \|", report)
    assert "n too small" not in report
    top = report.split("## What was run")[0]
    # a newcomer reads what the conditions and the judge are before the Conclusion
    assert top.index("**C0**: blend off") < top.index("Judge: the simulated judge") \
        < top.index("**Conclusion** (C3 - C0 at round 2 of 2")
    assert "**Power**" in top and "80% power" in top
    assert "[history.png](history.png)" in report
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
