"""Prefect side of the history across nights: append the sweep to the history, compare it with
the last comparable night, raise each regression as a Prefect event, publish the trend.

    event     mythloop.sweep.regression, resource = the deployment the sweep ran from
              (prefect.deployment.<id>; an ad hoc sweep: mythloop.sweep.<sweep key>),
              payload = cond, metric, label, before, after, interval, results_dir, baseline_dir
    artifacts sweep-<key>-history (table, a row per night and condition), and history.png
              in the results dir (each headline metric per night, with intervals)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect import task
from prefect.artifacts import create_table_artifact
from prefect.events import emit_event
from prefect.runtime import deployment

from mythloop.analysis.compare import compare, render_markdown, side_from_metrics, side_from_night
from mythloop.analysis.history import (
    append_night,
    draw_history,
    history_path,
    last_comparable,
    night_rows,
    read_nights,
    trend_rows,
)
from mythloop.fileio import write_text_atomic
from mythloop_tasks.analysis import artifact_key
from mythloop_tasks.common import say

__all__ = ["REGRESSION_EVENT", "record_night", "regression_resource"]

REGRESSION_EVENT = "mythloop.sweep.regression"
TREND_NIGHTS = 30  # nights shown in the trend plot and table


def regression_resource(sweep_key: str) -> dict[str, str]:
    """The deployment this flow run came from; an ad hoc sweep names its sweep key instead."""
    if deployment.id:
        return {"prefect.resource.id": f"prefect.deployment.{deployment.id}",
                "prefect.resource.name": str(deployment.name or "")}
    return {"prefect.resource.id": f"mythloop.sweep.{sweep_key}",
            "prefect.resource.name": f"sweep {sweep_key} (not from a deployment)"}


def _brief(s: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if s is None else {k: s.get(k) for k in ("mean", "lo", "hi", "n", "method")
                                   if k in s}


@task(name="history", task_run_name="history {sweep_key}")
def record_night(results_dir: str, sweep_key: str) -> dict[str, Any]:
    """Append this sweep to the history, compare it with the last comparable night, emit an
    event per metric that got worse beyond its interval, and publish the trend."""
    root = Path(results_dir)
    metrics = json.loads((root / "metrics.json").read_text(encoding="utf-8"))
    path = history_path()
    rows = night_rows(metrics, root, sweep_key=sweep_key)
    append_night(rows, path)
    current = side_from_metrics(metrics, str(root), str(root))
    nights = read_nights(path)
    previous = last_comparable(nights, current.series, exclude_dir=str(root))
    regressions: list[dict[str, Any]] = []
    if previous is None:
        say(f"[history] {path}: first night of this configuration, nothing to compare")
    else:
        comparison = compare(side_from_night(previous), current)
        write_text_atomic(root / "compare.md", render_markdown(comparison))
        resource = regression_resource(sweep_key)
        for row in comparison.regressions:
            payload = {"cond": row["cond"], "metric": row["metric"], "label": row["label"],
                       "before": _brief(row["a"]), "after": _brief(row["b"]),
                       "interval": _brief(row["difference"]), "results_dir": str(root),
                       "baseline_dir": previous.results_dir, "baseline_night": previous.night,
                       "sweep_key": sweep_key}
            emit_event(event=REGRESSION_EVENT, resource=resource, payload=payload)
            regressions.append(payload)
            d = row["difference"]
            say(f"[history] REGRESSION {row['cond']} {row['label']}: "
                f"{d['mean']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}] against "
                f"{previous.night} ({previous.results_dir})")
        if not regressions:
            say(f"[history] no metric worse beyond its interval than {previous.night}")
    series = [n for n in nights if n.series == current.series][-TREND_NIGHTS:]
    figure = draw_history(series, root / "history.png")
    create_table_artifact(
        table=trend_rows(series), key=artifact_key(sweep_key, "history"),
        description=(f"Last {len(series)} night(s) of this configuration: last round, mean "
                     f"[95% CI] over prompts x replicates. Trend plot: {figure}; history: {path}"))
    return {"history": str(path), "figure": str(figure), "regressions": regressions,
            "baseline": previous.results_dir if previous else None}
