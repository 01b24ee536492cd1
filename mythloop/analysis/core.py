"""`analyze(results_dir)`: recompute metrics.json, report.md and the figures from the files alone."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mythloop.analysis.compute import compute_metrics
from mythloop.analysis.load import load_results
from mythloop.analysis.plots import draw_figures
from mythloop.analysis.report import headline_rows, render_report, round_rows
from mythloop.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from mythloop.fileio import write_text_atomic
from mythloop.settings import get_settings
from mythloop.sweep.records import SweepRecord

__all__ = ["AnalysisResult", "analyze"]


@dataclass
class AnalysisResult:
    """Where the analysis wrote its outputs, and the headline table as strings."""

    metrics_path: Path
    report_path: Path
    figures: list[Path]
    headline_rows: list[dict[str, str]]
    round_rows: list[dict[str, Any]] = field(default_factory=list)
    """Per condition and round: the headline metrics (what the Prefect table shows)."""
    simulated: bool | None = None


def _threshold(sweep: SweepRecord, override: float | None) -> float:
    """Explicit value, else the one the sweep recorded, else the setting."""
    if override is not None:
        return float(override)
    if sweep.abstain_threshold is not None:
        return float(sweep.abstain_threshold)
    return float(get_settings().abstain_threshold)


def analyze(
    results_dir: str | Path,
    *,
    abstain_threshold: float | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> AnalysisResult:
    """Read a sweep results dir and write metrics.json, report.md and four PNGs into it."""
    results = load_results(results_dir)
    metrics = compute_metrics(
        results,
        abstain_threshold=_threshold(results.sweep, abstain_threshold),
        resamples=resamples,
        seed=seed,
    )
    root = results.root
    figures = draw_figures(metrics, root)
    metrics_path = root / "metrics.json"
    write_text_atomic(
        metrics_path, json.dumps(metrics, indent=2, sort_keys=True, allow_nan=False) + "\n"
    )
    report_path = root / "report.md"
    write_text_atomic(report_path, render_report(metrics))
    simulated = results.sweep.simulated
    return AnalysisResult(
        metrics_path=metrics_path,
        report_path=report_path,
        figures=figures,
        headline_rows=headline_rows(metrics),
        round_rows=round_rows(metrics),
        simulated=simulated if isinstance(simulated, bool) else None,
    )
