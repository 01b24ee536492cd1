"""The few Prefect REST API reads the scale-out stack needs, over plain HTTP (no Prefect import)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

__all__ = ["ApiError", "call", "online_workers", "deployment", "flow_runs", "task_run_count",
           "submitted_by"]


class ApiError(RuntimeError):
    """The API answered an error status."""


def call(api_url: str, path: str, body: dict | None = None, timeout: float = 30.0):
    """GET (body None) or POST JSON to api_url + path; the decoded answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{api_url}{path}", data=data,
                                     headers={"Content-Type": "application/json"},
                                     method="GET" if body is None else "POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:
        raise ApiError(f"{path}: HTTP {exc.code}: {exc.read()[:300]!r}") from None
    return json.loads(raw) if raw else None


def online_workers(api_url: str, pool: str) -> list[str]:
    """Names of the pool's workers the API counts as ONLINE (none while the pool is missing)."""
    try:
        workers = call(api_url, f"/work_pools/{pool}/workers/filter", {})
    except ApiError as exc:
        if "HTTP 404" in str(exc):
            return []
        raise
    return sorted(w["name"] for w in workers if w.get("status") == "ONLINE")


def deployment(api_url: str, flow_name: str, name: str) -> dict:
    return call(api_url, f"/deployments/name/{flow_name}/{name}")


def flow_runs(api_url: str, *, deployment_id: str | None = None,
              ids: list[str] | None = None) -> list[dict]:
    """Flow runs of a deployment, or with the given ids (up to 200)."""
    where: dict = {}
    if deployment_id:
        where["deployment_id"] = {"any_": [deployment_id]}
    if ids:
        where["id"] = {"any_": ids}
    return call(api_url, "/flow_runs/filter", {"flow_runs": where, "limit": 200})


def task_run_count(api_url: str, flow_run_id: str, state_type: str | None = None) -> int:
    """Task runs of one flow run, optionally only those in state_type (COMPLETED ...)."""
    task_runs: dict = {"flow_run_id": {"any_": [flow_run_id]}}
    if state_type:
        task_runs["state"] = {"type": {"any_": [state_type]}}
    return int(call(api_url, "/task_runs/count", {"task_runs": task_runs}))


def submitted_by(api_url: str) -> dict[str, str]:
    """flow run id -> name of the worker that submitted it (its submitted-flow-run events)."""
    answer = call(api_url, "/events/filter", {
        "filter": {"event": {"name": ["prefect.worker.submitted-flow-run"]}, "order": "ASC"},
        "limit": 50})
    taken: dict[str, str] = {}
    for event in answer.get("events", []):
        worker = event["resource"].get("prefect.resource.name", "?")
        for related in event.get("related", []):
            rid = related.get("prefect.resource.id", "")
            if rid.startswith("prefect.flow-run."):
                taken[rid.removeprefix("prefect.flow-run.")] = worker
    return taken
