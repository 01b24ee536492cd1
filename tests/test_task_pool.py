"""TaskPool on a stop (a film's scenes, a sweep's shards): `settle` waits for the runs under
way, and `crash_under_way` records a run still under way Crashed instead of leaving it Running
when the process ends. Real flow and task runs on the session's Prefect test API."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _state_type(task_run_id) -> str:
    """The run's state as the API has it ("" until the server has recorded the run)."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            return client.read_task_run(task_run_id).state_type.value
        except ObjectNotFound:  # task runs are recorded from their events, a moment later
            return ""


def _until(what: str, check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} within {timeout:.0f} s")
        time.sleep(0.1)


def _held_task(release: threading.Event):
    from mythloop_tasks.common import mythloop_task

    @mythloop_task(name="held", retries=0)
    def held() -> str:
        release.wait(120)
        return "done"

    return held


def test_a_run_still_under_way_is_recorded_crashed_not_running():
    from prefect import flow

    from mythloop_tasks.common import TaskPool

    release = threading.Event()
    held = _held_task(release)
    seen: dict[str, object] = {}

    @flow
    def stopped() -> None:
        with TaskPool(2) as pool:
            future = pool.submit(held, {})
            _until("the held run recorded Running",
                   lambda: _state_type(future.task_run_id) == "RUNNING")
            seen["settled"] = pool.settle(0.3)
            pool.crash_under_way("stopped by the test")
            seen["after"] = _state_type(future.task_run_id)
            release.set()
            seen["settled_later"] = pool.settle(60)

    try:
        stopped()
    finally:
        release.set()
    assert seen == {"settled": False, "after": "CRASHED", "settled_later": True}


def test_settle_waits_for_runs_that_end_and_crashes_nothing():
    from prefect import flow

    from mythloop_tasks.common import TaskPool

    release = threading.Event()
    held = _held_task(release)
    seen: dict[str, object] = {}

    @flow
    def stopping() -> None:
        with TaskPool(2) as pool:
            futures = [pool.submit(held, {}) for _ in range(2)]
            _until("both held runs started", lambda: len(pool.under_way()) == 2)
            threading.Timer(0.5, release.set).start()
            seen["settled"] = pool.settle(60)
            seen["under_way"] = len(pool.under_way())
            pool.crash_under_way("stopped by the test")  # nothing under way: no change
            seen["results"] = [future.result() for future in futures]
            seen["ids"] = [future.task_run_id for future in futures]

    try:
        stopping()
    finally:
        release.set()
    assert seen["settled"] is True and seen["under_way"] == 0
    assert seen["results"] == ["done", "done"]
    for task_run_id in seen["ids"]:
        _until("the finished run recorded Completed",
               lambda task_run_id=task_run_id: _state_type(task_run_id) == "COMPLETED")
