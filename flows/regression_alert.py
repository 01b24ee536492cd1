"""The action of the regression automation (`mythloop serve` creates both): a flow run named
after the metric that got worse, leaving a markdown artifact under the stable key
`sweep-regression-alert`, so the regression shows in the runs list and in Artifacts without
reading the event feed. With a notification block configured
(MYTHLOOP_REGRESSION_NOTIFY_BLOCK) the automation also sends the message through it.
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.artifacts import create_markdown_artifact

ALERT_KEY = "sweep-regression-alert"


def _fmt(s: dict[str, Any] | None) -> str:
    if not s:
        return "—"
    return f"{s.get('mean', 0):+.3f} [{s.get('lo', 0):+.3f}, {s.get('hi', 0):+.3f}] (n={s.get('n')})"


def alert_markdown(regression: dict[str, Any]) -> str:
    before, after = regression.get("before") or {}, regression.get("after") or {}
    return "\n".join([
        f"# Regression: {regression.get('cond', '?')} {regression.get('label', '?')}",
        "",
        f"- before ({regression.get('baseline_night', '?')}): {before.get('mean')} "
        f"(`{regression.get('baseline_dir', '?')}`)",
        f"- after: {after.get('mean')} (`{regression.get('results_dir', '?')}`)",
        f"- after - before, 95% interval (prompts x replicates, paired by prompt): {_fmt(regression.get('interval'))}",
        "",
        f"Details: `mythloop compare {regression.get('results_dir', 'RESULTS')} --baseline last`"
        f" or `compare.md` in the results dir.",
    ])


@flow(name="regression-alert", flow_run_name="regression {regression[cond]} {regression[metric]}")
def regression_alert(regression: dict[str, Any]) -> str:
    """Publish one regression (the payload of a mythloop.sweep.regression event)."""
    return str(create_markdown_artifact(
        markdown=alert_markdown(regression), key=ALERT_KEY,
        description=f"Sweep regression: {regression.get('cond')} {regression.get('label')}"))
