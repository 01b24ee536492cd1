"""The few Prefect API reads the scale-out stack needs, through Prefect's own client.

Each call opens a `SyncPrefectClient` on the stack's API URL (not PREFECT_API_URL, which the
driving process leaves unset) and returns plain values, so callers need no Prefect types.
Prefect is imported inside the functions: importing this module stays cheap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

__all__ = ["ApiError", "online_workers", "pool_exists", "flow_runs", "parent_flow_run_id",
           "task_run_count", "submitted_by"]


class ApiError(RuntimeError):
    """The API answered an error status (or could not be reached)."""


@contextlib.contextmanager
def client(api_url: str) -> Iterator[SyncPrefectClient]:
    """A Prefect client on `api_url`; HTTP errors and unreachable servers become ApiError."""
    import httpx
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

    try:
        with SyncPrefectClient(api_url, httpx_settings={"timeout": 30.0}) as prefect:
            yield prefect
    except ObjectNotFound as exc:
        raise ApiError(f"not found: {exc}") from None
    except (PrefectHTTPStatusError, httpx.HTTPError) as exc:
        raise ApiError(" ".join(str(exc).split())[:300]) from None


def _not_found(exc: Exception) -> bool:
    """A 404 from the API, however the client reports it."""
    from prefect.exceptions import ObjectNotFound

    response = getattr(exc, "response", None)
    return isinstance(exc, ObjectNotFound) or getattr(response, "status_code", None) == 404


def pool_exists(api_url: str, pool: str) -> bool:
    """True when the work pool is there."""
    with client(api_url) as prefect:
        try:
            prefect.read_work_pool(pool)
        except Exception as exc:
            if _not_found(exc):
                return False
            raise
    return True


def online_workers(api_url: str, pool: str) -> list[str]:
    """Names of the pool's workers the API counts as ONLINE (none while the pool is missing)."""
    with client(api_url) as prefect:
        try:
            workers = prefect.read_workers_for_work_pool(pool)
        except Exception as exc:
            if _not_found(exc):
                return []
            raise
    return sorted(w.name for w in workers if str(getattr(w.status, "value", w.status)) == "ONLINE")


def flow_runs(api_url: str, *, deployment_id: str | None = None,
              ids: list[str] | None = None) -> list[dict]:
    """Flow runs of a deployment, or with the given ids (up to 200), as JSON-ready dicts
    (`id`, `name`, `state_type`, `work_pool_name`, `infrastructure_pid`,
    `parent_task_run_id`, ...)."""
    from uuid import UUID

    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterId,
    )

    deployments = (DeploymentFilter(id=DeploymentFilterId(any_=[UUID(deployment_id)]))
                   if deployment_id else None)
    runs = FlowRunFilter(id=FlowRunFilterId(any_=[UUID(i) for i in ids])) if ids else None
    with client(api_url) as prefect:
        found = prefect.read_flow_runs(flow_run_filter=runs, deployment_filter=deployments,
                                       limit=200)
    return [run.model_dump(mode="json") for run in found]


def parent_flow_run_id(api_url: str, task_run_id: str) -> str:
    """The flow run a task run belongs to (a subflow's parent is its parent task run's)."""
    from uuid import UUID

    with client(api_url) as prefect:
        return str(prefect.read_task_run(UUID(task_run_id)).flow_run_id)


def task_run_count(api_url: str, flow_run_id: str, state_type: str | None = None) -> int:
    """Task runs of one flow run, optionally only those in state_type (COMPLETED ...)."""
    with client(api_url) as prefect:
        # The sync client has no count call; the route is the API's own.
        task_runs: dict = {"flow_run_id": {"any_": [flow_run_id]}}
        if state_type:
            task_runs["state"] = {"type": {"any_": [state_type]}}
        response = prefect.request("POST", "/task_runs/count", json={"task_runs": task_runs})
        response.raise_for_status()
        return int(response.json())


def submitted_by(api_url: str) -> dict[str, str]:
    """flow run id -> name of the worker that submitted it (its submitted-flow-run events)."""
    from prefect.events.filters import EventFilter, EventNameFilter, EventOrder

    with client(api_url) as prefect:
        page = prefect.read_events(
            EventFilter(event=EventNameFilter(name=["prefect.worker.submitted-flow-run"]),
                        order=EventOrder.ASC), limit=50)
    taken: dict[str, str] = {}
    for event in page.events:
        worker = event.resource.get("prefect.resource.name") or "?"
        for related in event.related:
            rid = related.get("prefect.resource.id") or ""
            if rid.startswith("prefect.flow-run."):
                taken[rid.removeprefix("prefect.flow-run.")] = worker
    return taken
