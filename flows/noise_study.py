"""A noise study: the `sweep` flow run once per simulated-judge noise level, then the study.

    sweep(config, noise_levels=[0, 0.2, 0.4])     flow "sweep" (the outer run)
      sweep-simulated-noise-0.00 ...             subflow "sweep" per level, one after another,
                                                 each an ordinary sweep in D/noise-<level>/
      analyze noise study                        task: D/report.md, D/metrics.json,
                                                 D/noise_curve.png, artifacts

Each level resumes like any sweep (finished rounds are skipped), so rerunning the same
command after an interruption picks up where it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from prefect import task

from mythloop.settings import get_settings
from mythloop.sweep import SweepConfig
from mythloop.sweep.config import default_results_dir
from mythloop.sweep.records import SweepOutcome
from mythloop.sweep.study import finish_study, level_config, prepare_study_dir
from mythloop_tasks.common import say

if TYPE_CHECKING:
    from mythloop.analysis.study import StudyResult

__all__ = ["run_noise_study", "analyze_study_results"]


@task(name="analyze-noise-study", task_run_name="analyze noise study {judge}")
def analyze_study_results(root: str, judge: str) -> StudyResult:
    """Rebuild the study's report, metrics and noise curve, and publish them as artifacts."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    from mythloop.analysis.study import analyze_study
    from mythloop_tasks.analysis import _report_for_ui, artifact_key

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


def run_noise_study(config: SweepConfig, levels: list[float]) -> SweepOutcome:
    """Run every level's sweep in turn (inside the calling flow), then the study analysis."""
    from mythloop_flows.feedback_loop import sweep

    root = prepare_study_dir(config, config.results_dir or default_results_dir(
        get_settings().resolved_results_dir), levels)
    say(f"[study] noise levels {', '.join(f'{x:g}' for x in levels)} -> {root}")
    runs = []
    for noise in levels:
        cfg = level_config(config, root, noise)
        runs.append(sweep.with_options(
            flow_run_name=f"sweep-{config.judge}-noise-{noise:.2f}")(cfg))
    finish_study(root)
    analyze_study_results(str(root), config.judge)
    report = Path(root) / "report.md"
    say(f"[study] report: {report}")
    return SweepOutcome(results_dir=str(root), report=str(report), levels=levels,
                        level_results=runs, shards=[s for r in runs for s in r.shards],
                        failed_turns=sum(r.failed_turns for r in runs))
