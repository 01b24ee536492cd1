"""`make scale-demo`: a sharded sweep on PostgreSQL-backed Prefect with two workers, checked.

    python -m mythloop_app.scale.demo [--workers 2] [--rounds 2] [--replicates 2] [--keep]
                                      [--no-kill]

Starts PostgreSQL, a Prefect server on it, the `mythloop` process work pool and the workers;
deploys condition-run; runs the parent sweep (2 conditions x 2 replicates x 2 rounds, simulated
judge) whose shards the workers take; checks every shard ran as a deployment flow run on a
worker and the report covers all of them; then (unless --no-kill) kills the worker running a
shard, with the shard's process, mid-shard and checks the sweep still ends with the metrics of
an undisturbed run; stops everything. Exit 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from mythloop.procs import tree_pids, wait_until
from mythloop.settings import get_settings
from mythloop.sweep import SweepConfig
from mythloop.sweep.shards import shard_plan
from mythloop.vocab import Condition
from mythloop_app.scale import api
from mythloop_app.scale.driver import SHARD_DEPLOYMENT
from mythloop_app.scale.stack import POOL, ScaleStack

__all__ = ["demo_config", "shard_facts", "check_sharded_sweep", "run_sharded_sweep",
           "run_sweep_killing_a_worker", "comparable_metrics", "main"]


def demo_config(results_dir: Path, rounds: int = 2, replicates: int = 2,
                conditions: tuple[Condition, ...] = ("c0", "c3"),
                shard_timeout: float = 1200.0) -> SweepConfig:
    """The demo's sweep: simulated judge, fanned out to the condition-run deployment."""
    return SweepConfig(conditions=list(conditions), rounds=rounds, replicates=replicates,
                       judge="simulated", results_dir=results_dir.resolve(),
                       shard_deployment=SHARD_DEPLOYMENT, shard_timeout=shard_timeout)


def shard_facts(stack: ScaleStack, deployment_id: str, settle_s: float = 30.0) -> list[dict]:
    """One row per shard flow run: name, state, worker, pid, and the flow run it belongs to."""
    deadline = time.monotonic() + settle_s
    while True:  # worker events reach the API a moment after the runs end
        runs = api.flow_runs(stack.api_url, deployment_id=deployment_id)
        taken = api.submitted_by(stack.api_url)
        if all(run["id"] in taken for run in runs) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    rows = []
    for run in sorted(runs, key=lambda r: r["name"]):
        parent = (api.parent_flow_run_id(stack.api_url, run["parent_task_run_id"])
                  if run.get("parent_task_run_id") else None)
        rows.append({"name": run["name"], "flow_run_id": run["id"], "state": run["state_type"],
                     "work_pool": run.get("work_pool_name"), "worker": taken.get(run["id"]),
                     "pid": run.get("infrastructure_pid"),
                     "parent_flow_run_id": parent})
    return rows


def check_sharded_sweep(stack: ScaleStack, config: SweepConfig, result: dict,
                        facts: list[dict]) -> list[str]:
    """What is wrong with a finished sharded sweep (empty when all is well)."""
    problems = []
    expected = sorted(f"{c}-rep{r}" for c, r in shard_plan(config))
    if sorted(f["name"] for f in facts) != expected:
        problems.append(f"shard flow runs {sorted(f['name'] for f in facts)} != {expected}")
    parents = {f["parent_flow_run_id"] for f in facts}
    parent_pid = str(stack.driver_pids.get("parent"))
    for fact in facts:
        if fact["state"] != "COMPLETED":
            problems.append(f"{fact['name']} ended {fact['state']}")
        if fact["work_pool"] != POOL or not fact["worker"]:
            problems.append(f"{fact['name']} was not taken by a worker of pool {POOL}: {fact}")
        if not fact["pid"] or str(fact["pid"]).rsplit(":", 1)[-1] == parent_pid:
            problems.append(f"{fact['name']} did not run in a process of its own: {fact}")
    if len(parents) != 1 or None in parents:
        problems.append(f"shards are not subflows of one parent sweep: {sorted(map(str, parents))}")
    workers = {f["worker"] for f in facts}
    if stack.workers >= 2 and stack.worker_limit == 1 and len(workers) < 2:
        problems.append(f"only {workers} took shards; every worker should have taken one")
    if len({f["pid"] for f in facts}) != len(facts):
        problems.append("two shards report the same process")
    results_dir = Path(result["results_dir"])
    try:
        metrics = json.loads((results_dir / "metrics.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [*problems, f"no readable metrics.json in {results_dir}: {exc}"]
    want = {c: list(range(1, config.replicates + 1)) for c in config.conditions}
    if metrics.get("replicates") != want:
        problems.append(f"metrics cover replicates {metrics.get('replicates')}, expected {want}")
    if metrics.get("rounds") != list(range(config.rounds)):
        problems.append(f"metrics cover rounds {metrics.get('rounds')}")
    report = (results_dir / "report.md").read_text(encoding="utf-8")
    for cond in config.conditions:
        if f"{cond}: {', '.join(map(str, want[cond]))}" not in report:
            problems.append(f"report.md does not list {cond} with replicates {want[cond]}")
    return problems


def run_sharded_sweep(stack: ScaleStack, results_dir: Path, *, rounds: int = 2,
                      replicates: int = 2, conditions: tuple[Condition, ...] = ("c0", "c3"),
                      timeout: float = 1500.0) -> dict:
    """Deploy (once per stack), run one sharded sweep; its shard facts, checks and wall time."""
    ids = stack.deployment_ids or stack.deploy()
    shard_id = ids[SHARD_DEPLOYMENT]
    before = {run["id"] for run in api.flow_runs(stack.api_url, deployment_id=shard_id)}
    config = demo_config(results_dir, rounds, replicates, conditions, shard_timeout=timeout - 60)
    started = time.monotonic()
    result = stack.run_sweep(config, timeout=timeout)
    wall = time.monotonic() - started
    facts = [f for f in shard_facts(stack, shard_id) if f["flow_run_id"] not in before]
    return {"config": config, "result": result, "facts": facts, "wall_s": round(wall, 1),
            "problems": check_sharded_sweep(stack, config, result, facts)}


def comparable_metrics(results_dir: Path) -> dict:
    """metrics.json less the run's own metadata (paths, times): what the analysis computed."""
    metrics = json.loads((results_dir / "metrics.json").read_text(encoding="utf-8"))
    metrics.pop("sweep", None)
    return metrics


def _completed_rounds(progress: Path) -> list[int] | None:
    try:
        return json.loads(progress.read_text(encoding="utf-8"))["completed_rounds"]
    except (OSError, ValueError, KeyError):
        return None


def run_sweep_killing_a_worker(stack: ScaleStack, results_dir: Path, reference_dir: Path, *,
                               rounds: int = 3, shard: str = "c0-rep1",
                               timeout: float = 1500.0) -> dict:
    """A host lost mid-shard: the same sweep (c0, c3 x 1 replicate) run twice on the stack,
    undisturbed into reference_dir, then into results_dir with the worker that runs `shard`
    SIGKILLed together with the shard's process once its round 1 is recorded; a new worker
    is started in its place. The sweep must finish, that shard submitted again and completed,
    with metrics identical to the undisturbed run's."""
    ids = stack.deployment_ids or stack.deploy()
    shard_id = ids[SHARD_DEPLOYMENT]
    stack.run_sweep(demo_config(reference_dir, rounds, 1, shard_timeout=timeout - 60),
                    timeout=timeout)
    before = {run["id"] for run in api.flow_runs(stack.api_url, deployment_id=shard_id)}
    config = demo_config(results_dir, rounds, 1, shard_timeout=timeout - 60)
    outcome: dict = {}

    def parent() -> None:  # the parent sweep's driver lives as long as this thread
        try:
            outcome["result"] = stack.run_sweep(config, timeout=timeout)
        except BaseException as exc:  # reported below
            outcome["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=parent, name="parent-sweep", daemon=True)
    thread.start()
    progress = results_dir / shard / "progress.json"
    found: dict = {}

    def shard_process_found() -> bool:  # which worker started the shard's process, and its pid
        if not thread.is_alive():
            return True
        for run in api.flow_runs(stack.api_url, deployment_id=shard_id):
            if run["name"] == shard and run["id"] not in before and run["infrastructure_pid"]:
                pid = int(str(run["infrastructure_pid"]).rsplit(":", 1)[-1])
                for name, proc in stack.procs.items():
                    if name.startswith("worker-") and pid in tree_pids(proc.pid):
                        found.update(worker=name, pid=pid, flow_run_id=run["id"])
                        return True
        return False

    wait_until(shard_process_found, timeout, f"the process running {shard}", interval=0.5)
    wait_until(lambda: _completed_rounds(progress) is not None or not thread.is_alive(),
               timeout, f"{shard} round 1 recorded", interval=0.1)
    problems = []
    killed: dict = {}
    if thread.is_alive() and found:
        stack.kill_worker(found["worker"], found["pid"])
        killed_utc = datetime.now(UTC)
        killed = {**found, "rounds_then": _completed_rounds(progress),
                  "at_s": round(time.monotonic() - started, 1)}
        stack.add_workers(1)  # the host comes back, as a new worker
    if not killed:
        problems.append(f"{shard} ended (or was not found) before it could be killed")
    elif killed["rounds_then"] != [0]:
        problems.append(f"{shard} was killed after rounds {killed['rounds_then']}, not mid-shard")
    thread.join(timeout)
    wall = time.monotonic() - started
    if "error" in outcome or thread.is_alive():
        problems.append(f"the sweep did not finish after the kill: {outcome.get('error')}")
        return {"killed": killed, "problems": problems, "wall_s": round(wall, 1)}
    runs = sorted((r for r in api.flow_runs(stack.api_url, deployment_id=shard_id)
                   if r["name"] == shard and r["id"] not in before), key=lambda r: r["created"])
    states = [r["state_type"] for r in runs]
    if killed and states != ["CRASHED", "COMPLETED"]:
        problems.append(f"{shard}'s flow runs ended {states}, not CRASHED then COMPLETED")
    resubmitted_s = None
    if len(runs) == 2 and killed:
        resubmitted_s = round((datetime.fromisoformat(runs[1]["created"])
                               - killed_utc).total_seconds(), 1)
    if comparable_metrics(results_dir) != comparable_metrics(reference_dir):
        problems.append("metrics.json differs from the undisturbed run's")
    for name in (shard, "c3-rep1"):
        mine, ref = (d / name / "turns.jsonl" for d in (results_dir, reference_dir))
        if mine.read_text().count("\n") != ref.read_text().count("\n"):
            problems.append(f"{name}/turns.jsonl has not as many rows as the undisturbed run's")
        if _completed_rounds(d := results_dir / name / "progress.json") != list(range(rounds)):
            problems.append(f"{d} does not record every round complete")
    return {"killed": killed, "states": states, "resubmitted_s": resubmitted_s,
            "wall_s": round(wall, 1), "problems": problems}


def _print_facts(facts: list[dict]) -> None:
    print(f"{'shard':10} {'state':10} {'worker':10} {'pid':>8}  flow run")
    for f in facts:
        print(f"{f['name']:10} {f['state']:10} {str(f['worker']):10} {str(f['pid']):>8}  "
              f"{f['flow_run_id']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mythloop_app.scale.demo",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument("--results-dir", type=Path, default=None,
                        help="default: <state>/results/scale-demo-<UTC stamp>")
    parser.add_argument("--keep", action="store_true", help="keep the stack's logs folder")
    parser.add_argument("--no-kill", action="store_true",
                        help="skip the worker-killed-mid-shard step (two more sweeps)")
    args = parser.parse_args(argv)
    results_dir = (args.results_dir or get_settings().resolved_results_dir
                   / f"scale-demo-{datetime.now(UTC):%Y%m%dT%H%M%SZ}").resolve()
    started = time.monotonic()
    stack = ScaleStack(workers=args.workers, keep_root=args.keep)
    try:
        print(f"[scale] starting PostgreSQL, a Prefect server and {args.workers} workers ...",
              flush=True)
        stack.start()
        print(f"[scale] {stack.postgres.describe() if stack.postgres else 'no PostgreSQL'}; API {stack.api_url}; "
              f"started in {sum(stack.timings.values()):.0f} s", flush=True)
        run = run_sharded_sweep(stack, results_dir, rounds=args.rounds,
                                replicates=args.replicates)
        _print_facts(run["facts"])
        print(f"[scale] sweep wall {run['wall_s']} s; report: {run['result']['report']}")
        if not args.no_kill:
            print("[scale] a worker killed mid-shard: the same sweep undisturbed, then again "
                  "with the worker running c0-rep1 SIGKILLed with its shard ...", flush=True)
            lost = run_sweep_killing_a_worker(stack, results_dir.with_name(
                results_dir.name + "-killed"), results_dir.with_name(results_dir.name + "-ref"))
            print(f"[scale] killed {lost['killed']}; c0-rep1 flow runs {lost.get('states')}; "
                  f"submitted again {lost.get('resubmitted_s')} s after the kill; sweep wall "
                  f"{lost['wall_s']} s; metrics "
                  f"{'differ' if any('metrics' in p for p in lost['problems']) else 'identical'}")
            run["problems"] += lost["problems"]
    finally:
        print("[scale] stopping everything ...", flush=True)
        stack.stop()
    left = stack.leftovers()  # reached only when the sweep ran: errors propagate after stop()
    problems = run["problems"] + ([f"left behind: {left}"] if any(left.values()) else [])
    for problem in problems:
        print(f"[scale] FAIL: {problem}", file=sys.stderr)
    print(f"[scale] {'FAILED' if problems else 'ok'}: {time.monotonic() - started:.0f} s "
          f"in all{'; logs kept in ' + str(stack.root) if args.keep else ''}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
