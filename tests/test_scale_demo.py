"""The scale-out demo for real: PostgreSQL, a Prefect server on it, a process work pool and two
workers; a sharded sweep whose shards the workers take; a shard that fails; nothing left behind.

Slow (a few minutes): it starts every server itself, all on 127.0.0.1, and stops them even
when a test fails (the fixture's finalizer, then a sweep for processes carrying the stack's tag).
The tests share one stack; a test that finds it stopped (the stop test ran before it) gets a
new one, so every test runs alone or in any order.
"""

from __future__ import annotations

import json

import pytest

from mythloop.procs import port_listening
from mythloop_app.scale.demo import (
    comparable_metrics,
    demo_config,
    run_sharded_sweep,
    run_sweep_killing_a_worker,
)
from mythloop_app.scale.stack import ScaleStack

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def _stacks():
    """The module's stacks, each stopped at the end (again: a no-op for a stopped one)."""
    stacks: list[ScaleStack] = []
    try:
        yield stacks
    finally:
        for stack in stacks:
            stack.stop()
        left = [stack.leftovers() for stack in stacks]
        assert all(one == {"pids": [], "ports": [], "dirs": []} for one in left), \
            f"the stacks left {left} behind"


@pytest.fixture
def stack(_stacks, tmp_path_factory):
    """Two workers, one flow run each at a time, on PostgreSQL: the module's stack, or a new
    one when a test before stopped it."""
    if not _stacks or not _stacks[-1].procs:  # stop() clears procs
        stack = ScaleStack(workers=2, worker_limit=1,
                           root=tmp_path_factory.mktemp("scale") / "stack")
        _stacks.append(stack)
        stack.start()
    return _stacks[-1]


def test_sharded_sweep_runs_each_shard_on_a_worker(stack, tmp_path):
    assert stack.postgres is not None and "postgresql+asyncpg://" in stack.postgres.url
    run = run_sharded_sweep(stack, tmp_path / "results", rounds=2, replicates=2)
    assert run["problems"] == []
    facts = run["facts"]
    assert sorted(f["name"] for f in facts) == ["c0-rep1", "c0-rep2", "c3-rep1", "c3-rep2"]
    assert {f["state"] for f in facts} == {"COMPLETED"}
    assert {f["worker"] for f in facts} == {"worker-1", "worker-2"}
    # The parent ran in its own process; each shard in another, started by a worker.
    assert str(stack.driver_pids["parent"]) not in {str(f["pid"]) for f in facts}
    result = run["result"]
    assert [(s["condition"], s["replicate"], s["completed_rounds"]) for s in result["shards"]] \
        == [("c0", 1, [0, 1]), ("c3", 1, [0, 1]), ("c0", 2, [0, 1]), ("c3", 2, [0, 1])]
    results = tmp_path / "results"
    metrics = json.loads((results / "metrics.json").read_text())
    assert metrics["replicates"] == {"c0": [1, 2], "c3": [1, 2]}
    assert metrics["rounds"] == [0, 1]
    for shard in ("c0-rep1", "c0-rep2", "c3-rep1", "c3-rep2"):
        rows = (results / shard / "round_1.jsonl").read_text().splitlines()
        assert rows and json.loads(rows[0])["cond"] == shard[:2]


def test_a_failed_shard_fails_the_sweep_naming_it(stack, tmp_path):
    if not stack.deployment_ids:  # this test run alone
        stack.deploy()
    results = tmp_path / "results"
    results.mkdir()
    # Storage trouble for exactly one shard: its sandbox path is taken by a file.
    (results / "c3-rep1").write_text("not a folder\n")
    with pytest.raises(RuntimeError) as failure:
        # --force: the planted file is deliberate, not a mistaken results dir (refused alone)
        config = demo_config(results, rounds=1, replicates=1, shard_timeout=900)
        stack.run_sweep(config.model_copy(update={"force": True}), timeout=960)
    message = str(failure.value)
    line = next((ln for ln in message.splitlines()
                 if ln.startswith("RuntimeError:") and "did not complete" in ln), message)
    assert "1 of 2 shards did not complete: c3-rep1" in line
    assert "c0-rep1" not in line
    assert json.loads((results / "c0-rep1" / "progress.json").read_text())[
        "completed_rounds"] == [0]  # the other shard's work is kept
    assert not (results / "report.md").exists()  # no analysis of a partial sweep


@pytest.mark.scale_long
def test_a_worker_killed_mid_shard_costs_nothing_but_time(stack, tmp_path):
    """SIGKILL to the worker running c0-rep1 and to the shard's process once its round 1 is
    recorded (a host lost): the parent notices the shard's heartbeats stopped, marks that run
    Crashed and submits the shard again; it resumes from its progress.json and the sweep ends
    with the metrics of the same sweep run undisturbed."""
    lost = run_sweep_killing_a_worker(stack, tmp_path / "killed", tmp_path / "reference")
    assert lost["problems"] == [], lost
    assert lost["killed"]["rounds_then"] == [0]
    assert lost["states"] == ["CRASHED", "COMPLETED"]
    assert comparable_metrics(tmp_path / "killed") == comparable_metrics(tmp_path / "reference")


def test_stopping_the_stack_leaves_no_process_or_port(stack):
    """Stop the shared stack and look for anything left (a later test gets a new one)."""
    ports = stack.ports()
    assert len(stack.leftovers()["pids"]) >= 4  # postgres, server, two workers at least
    stack.stop()
    assert stack.leftovers() == {"pids": [], "ports": [], "dirs": []}
    assert not any(port_listening("127.0.0.1", p) for p in ports)
