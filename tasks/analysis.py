"""Prefect side of the sweep analysis: run `analyze`, publish the headline and the report;
the same for a noise study (`analyze_study_results`: the study's table and report).

Artifacts use the same keys every night (`sweep-<key>-headline`, `sweep-<key>-report`),
so Prefect keeps each night's version under one key and the UI shows the history.
"""

from __future__ import annotations

import re
from pathlib import Path

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from mythloop.analysis import AnalysisResult, analyze
from mythloop.analysis.study import StudyResult, analyze_study

__all__ = ["analyze_results", "analyze_study_results", "artifact_key"]

_FIGURE_LINK = re.compile(r"!\[(?P<caption>[^\]]*)\]\((?P<name>[^)\s]+\.png)\)")


def artifact_key(sweep_key: str, suffix: str) -> str:
    """`sweep-<sweep_key>-<suffix>` in the lowercase letters, digits and dashes Prefect accepts."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"sweep-{sweep_key}-{suffix}".lower()).strip("-")
    slug = re.sub(r"-{2,}", "-", slug)
    if slug in ("sweep", f"sweep-{suffix}"):
        raise ValueError(
            f"sweep_key {sweep_key!r} has no letters or digits: pass a name like 'nightly'"
        )
    return slug


def _report_for_ui(report: str, results_dir: Path) -> str:
    """Relative image links do not resolve in the Prefect UI: name the files instead."""
    return _FIGURE_LINK.sub(
        lambda m: f"*Figure ({m['caption']}):* `{results_dir / m['name']}`", report
    )


@task(name="analyze", task_run_name="analyze {sweep_key}")
def analyze_results(results_dir: str | Path, sweep_key: str) -> AnalysisResult:
    """Recompute the sweep's metrics, report and figures, then publish them as artifacts."""
    result = analyze(results_dir)
    simulated = " (SIMULATED judge)" if result.simulated else ""
    create_table_artifact(
        table=result.round_rows,
        key=artifact_key(sweep_key, "headline"),
        description=f"Per-round headline metrics, mean [95% CI] over prompts x replicates{simulated}.",
    )
    report = result.report_path.read_text(encoding="utf-8")
    create_markdown_artifact(
        markdown=_report_for_ui(report, result.report_path.parent),
        key=artifact_key(sweep_key, "report"),
        description=f"Sweep report{simulated}: {result.report_path}",
    )
    return result


@task(name="analyze-noise-study", task_run_name="analyze noise study {judge}")
def analyze_study_results(root: str, judge: str) -> StudyResult:
    """Rebuild the study's report, metrics and noise curve, and publish them as artifacts."""
    result = analyze_study(root, reanalyse_levels=False)
    simulated = " (SIMULATED judge)" if result.simulated else ""
    key = f"{judge}-noise-study"
    create_table_artifact(table=result.table_rows, key=artifact_key(key, "table"),
                          description=f"Noise study: last-round differences{simulated}.")
    report = result.report_path.read_text(encoding="utf-8")
    create_markdown_artifact(markdown=_report_for_ui(report, result.report_path.parent),
                             key=artifact_key(key, "report"),
                             description=f"Noise study report{simulated}: {result.report_path}")
    return result
