"""Flow state hooks: a failed sweep leaves a clear markdown artifact on its flow run.

Attach with `@flow(on_failure=[record_sweep_failure])`. The artifact (key `sweep-failure`,
one history per key in the UI's Artifacts page) names every failed task run, the subflow
it ran in, and its error, so a failed nightly sweep explains itself the next morning.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from uuid import UUID

from prefect import Flow
from prefect.client.orchestration import SyncPrefectClient, get_client
from prefect.client.schemas.actions import ArtifactCreate
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
    TaskRunFilter,
    TaskRunFilterFlowRunId,
)
from prefect.client.schemas.objects import FlowRun, StateType
from prefect.logging import get_logger
from prefect.states import State

__all__ = ["record_sweep_failure", "failed_steps", "FailedStep", "SWEEP_FAILURE_KEY"]

SWEEP_FAILURE_KEY = "sweep-failure"
_BAD = {StateType.FAILED, StateType.CRASHED}
# Task run states reach the API as events a moment after the flow sees them fail.
_SETTLE_S = 6.0
_MAX_DEPTH = 4


@dataclass(frozen=True)
class FailedStep:
    """One failed task run (or a subflow that failed outside any task)."""

    where: str          # "sweep-simulated / c0-rep1"
    name: str           # the task run's name
    state: str          # Failed, Crashed, TimedOut ...
    error: str          # the state's message
    task_run_id: UUID | None


def _one_line(text: str | None, limit: int = 600) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _collect(client: SyncPrefectClient, run: FlowRun, where: str, depth: int) -> list[FailedStep]:
    """Failed task runs of `run` and, recursively, of its failed subflows."""
    tasks = client.read_task_runs(
        task_run_filter=TaskRunFilter(flow_run_id=TaskRunFilterFlowRunId(any_=[run.id])))
    children = client.read_flow_runs(
        flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(
            any_=[run.id])))
    by_parent_task = {child.parent_task_run_id: child for child in children}
    steps: list[FailedStep] = []
    for task_run in sorted(tasks, key=lambda t: t.expected_start_time or t.created or 0):
        if not task_run.state or task_run.state.type not in _BAD:
            continue
        child = by_parent_task.get(task_run.id)
        if child is not None:
            continue  # a subflow's stand-in task; its own steps are listed below
        steps.append(FailedStep(where, task_run.name, task_run.state.name or "?",
                                _one_line(task_run.state.message), task_run.id))
    for child in children:
        if not child.state or child.state.type not in _BAD:
            continue
        inner = (_collect(client, child, f"{where} / {child.name}", depth + 1)
                 if depth < _MAX_DEPTH else [])
        steps.extend(inner or [FailedStep(f"{where} / {child.name}", child.name,
                                          child.state.name or "?", _one_line(child.state.message),
                                          None)])
    return steps


def failed_steps(client: SyncPrefectClient, flow_run: FlowRun,
                 settle_s: float = _SETTLE_S) -> list[FailedStep]:
    """The failed task runs under a flow run, waiting briefly for late task states."""
    deadline = time.monotonic() + settle_s
    while True:
        steps = _collect(client, flow_run, flow_run.name, 0)
        if any(step.task_run_id for step in steps) or time.monotonic() >= deadline:
            return steps
        time.sleep(0.5)


def render_failure(flow_run: FlowRun, state: State, steps: list[FailedStep]) -> str:
    """The artifact's markdown: what failed, where, and with which error."""
    lines = [f"# Sweep failed: {flow_run.name}", "",
             f"**Flow run:** `{flow_run.id}`  ", f"**State:** {state.name}  ",
             f"**Error:** {_one_line(state.message) or 'no message'}", ""]
    parameters = flow_run.parameters or {}
    config = parameters.get("config") if isinstance(parameters.get("config"), dict) else None
    if config and config.get("results_dir"):
        lines += [f"**Results dir:** `{config['results_dir']}`", ""]
    if steps:
        lines += ["## Failed task runs", "", "| where | task run | state | error |",
                  "|---|---|---|---|"]
        lines += [f"| {s.where} | `{s.name}` | {s.state} | {s.error.replace('|', '/')} |"
                  for s in steps]
    else:
        lines += ["No task run failed: the flow itself raised (see the error above and the "
                  "flow run's logs)."]
    lines += ["", "Rerunning the sweep with the same results dir resumes it: finished rounds "
              "are skipped."]
    return "\n".join(lines)


def record_sweep_failure(flow: Flow, flow_run: FlowRun, state: State) -> None:
    """`on_failure` hook: a markdown artifact naming the failed task run(s) and their error."""
    logger = get_logger("mythloop.hooks")
    try:
        with get_client(sync_client=True) as client:
            steps = failed_steps(client, flow_run)
            client.create_artifact(ArtifactCreate(
                key=SWEEP_FAILURE_KEY, type="markdown", flow_run_id=flow_run.id,
                description=f"Why sweep run {flow_run.name} failed",
                data=render_failure(flow_run, state, steps)))
        named = ", ".join(f"{s.where}/{s.name}" for s in steps) or "the flow itself"
        logger.error("sweep %s failed in %s; see the %r artifact", flow_run.name, named,
                     SWEEP_FAILURE_KEY)
    except Exception as exc:  # a hook must never hide the failure it reports
        logger.warning("could not record the sweep failure: %s", exc)
