"""The Prefect side of the scale-out stack, run only as `python -m mythloop_app.scale.driver ...`.

Prefect is imported inside the commands, and the stack runs them as child processes pointed at the stack's API (PREFECT_API_URL), so the
process that drives the stack stays free of Prefect state.

    deploy --pool P --source DIR      condition-run/condition-run and sweep/sharded-sweep -> P
    sweep --config FILE --out FILE    the parent sweep here; its shards go to the deployment
    burst --tasks N --out FILE        a flow submitting N trivial tasks (server load benchmark)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import cast

from mythloop.fileio import write_json_atomic

SHARD_DEPLOYMENT = "condition-run/condition-run"
SWEEP_DEPLOYMENT = "sweep/sharded-sweep"
ENTRYPOINT = "flows/feedback_loop.py"


def deploy(pool: str, source: Path) -> dict:
    """Both deployments, from the checkout at `source` (a path every worker sees)."""
    from prefect import Flow, flow

    from mythloop.sweep import SweepConfig

    ids = {}
    # from_source returns the flow itself when called outside an event loop
    shard = cast(Flow, flow.from_source(source=str(source),
                                        entrypoint=f"{ENTRYPOINT}:condition_run"))
    ids[SHARD_DEPLOYMENT] = str(shard.deploy(
        name="condition-run", work_pool_name=pool, print_next_steps=False, build=False,
        push=False, tags=["mythloop", "shard"],
        description="One condition x replicate of a sweep; started by a fanned-out sweep."))
    parent = cast(Flow, flow.from_source(source=str(source), entrypoint=f"{ENTRYPOINT}:sweep"))
    ids[SWEEP_DEPLOYMENT] = str(parent.deploy(
        name="sharded-sweep", work_pool_name=pool, print_next_steps=False, build=False,
        push=False, tags=["mythloop", "sweep"],
        parameters={"config": SweepConfig(shard_deployment=SHARD_DEPLOYMENT)
                    .model_dump(mode="json")},
        description="A sweep whose shards run as condition-run flow runs on the pool's "
                    "workers; results_dir must be a path every worker sees."))
    return ids


def run_sweep(config_path: Path) -> dict:
    """The parent sweep in this process (flow heartbeats off: it only waits)."""
    from mythloop.sweep import SweepConfig
    from mythloop_flows.feedback_loop import sweep

    config = SweepConfig.model_validate_json(config_path.read_text(encoding="utf-8"))
    return sweep(config).model_dump(mode="json")


def burst(n_tasks: int, id_path: Path) -> dict:
    """One flow that submits n trivial tasks at once and waits for them."""
    from prefect import flow, task
    from prefect.runtime import flow_run

    @task(name="noop", persist_result=False)
    def noop(i: int) -> int:
        return i

    @flow(name="task-burst", persist_result=False)
    def task_burst(n: int) -> int:
        write_json_atomic(id_path, {"flow_run_id": str(flow_run.id)})
        return sum(f.result() for f in [noop.submit(i) for i in range(n)])

    return {"sum": task_burst(n_tasks)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mythloop_app.scale.driver")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("deploy")
    p.add_argument("--pool", required=True)
    p.add_argument("--source", type=Path, required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("sweep")
    p.add_argument("--config", type=Path, required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("burst")
    p.add_argument("--tasks", type=int, required=True)
    p.add_argument("--id-file", type=Path, required=True)
    p.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.command == "deploy":
        result = deploy(args.pool, args.source)
    elif args.command == "sweep":
        result = run_sweep(args.config)
    else:
        result = burst(args.tasks, args.id_file)
    write_json_atomic(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
