"""Benchmark: scale-out on this machine.
How it measures: docs/performance.md, "bench/scale.py"."""

import contextlib
import json
import sys
import time
from collections import Counter

from common import REPO, part_main

from mythloop.procs import stop_process
from mythloop_app.scale import api
from mythloop_app.scale.demo import run_sharded_sweep
from mythloop_app.scale.stack import ScaleStack


def sweep_scaling(timeout: float = 1800.0) -> dict:
    """Wall time of the same sharded sweep with 1 and with 2 workers, on one stack."""
    stack = ScaleStack(workers=1)
    try:
        stack.start()
        warm = run_sharded_sweep(stack, stack.root / "warmup", rounds=1, replicates=1,
                                 conditions=("c0",), timeout=timeout)
        runs = {}
        for workers in (1, 2):
            if workers == 2:
                stack.add_workers(1)
                stack.workers = 2
            run = run_sharded_sweep(stack, stack.root / f"sweep-{workers}w", timeout=timeout)
            runs[workers] = {"wall_s": run["wall_s"], "problems": run["problems"],
                             "shards_per_worker": dict(Counter(str(f["worker"])
                                                               for f in run["facts"]))}
        return {"workers_1": runs[1], "workers_2": runs[2],
                "speedup_2_over_1": round(runs[1]["wall_s"] / runs[2]["wall_s"], 2),
                "warmup_wall_s": warm["wall_s"], "stack_start_s": stack.timings,
                "shape": "2 conditions x 2 replicates x 2 rounds, simulated judge, "
                         "worker limit 1 flow run"}
    finally:
        stack.stop()


def task_burst(database: str, n_tasks: int, timeout: float) -> dict:
    """Start the burst flow against a fresh server; time until the API shows all completed."""
    stack = ScaleStack(workers=0, database=database)
    try:
        stack.start()
        id_file, out = stack.root / "burst-id.json", stack.root / "burst.json"
        proc = stack.spawn("burst", [sys.executable, "-m", "mythloop_app.scale.driver", "burst",
                                      "--tasks", str(n_tasks), "--id-file", str(id_file),
                                      "--out", str(out)], stack.client_env(), cwd=REPO)
        started = time.monotonic()
        while not id_file.exists():  # the flow has begun: the clock starts here
            if proc.poll() is not None or time.monotonic() - started > 120:
                raise RuntimeError(f"the burst flow did not start; its log ends:\n"
                                   f"{stack.log('burst')}")
            time.sleep(0.1)
        t0 = time.monotonic()
        flow_run_id = json.loads(id_file.read_text())["flow_run_id"]
        client_done = api_done = None
        completed = 0  # task runs the API counts COMPLETED
        while time.monotonic() - t0 < timeout:
            if client_done is None and proc.poll() is not None:
                client_done = round(time.monotonic() - t0, 1)
            with contextlib.suppress(api.ApiError, OSError):  # a busy server's 503: not yet
                completed = api.task_run_count(stack.api_url, flow_run_id, "COMPLETED")
            if completed >= n_tasks:
                api_done = round(time.monotonic() - t0, 1)
                break
            time.sleep(0.5)
        if proc.poll() is None:
            stop_process(proc, grace=5.0)
        return {"database": database, "tasks": n_tasks,
                "client_done_s": client_done, "api_all_completed_s": api_done,
                "completed_seen": completed, "timed_out": api_done is None,
                "client_exit": proc.returncode}
    finally:
        stack.stop()


def run(tasks: int = 1000, burst_timeout: float = 300.0, sweep: bool = True,
        burst: bool = True) -> dict:
    result: dict = {}
    if sweep:
        result["sharded_sweep"] = sweep_scaling()
    if burst:
        result["task_burst"] = {db: task_burst(db, tasks, burst_timeout)
                                for db in ("sqlite", "postgres")}
    return result


if __name__ == "__main__":  # the harness runs it: python bench/scale.py [--set KEY=VALUE]
    part_main("scale")
