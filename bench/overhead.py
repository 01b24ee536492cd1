"""Benchmark: per-task orchestration overhead of a mythloop task vs a bare Prefect `@task`.
How it measures: docs/performance.md, "bench/overhead.py"."""

import contextlib
import io
import tempfile
import time
from pathlib import Path

from common import part_main, ratio_stats, repo_on_path, stats


def _tasks() -> dict:
    """The task variants (built lazily: importing Prefect is slow)."""
    from prefect import task

    from mythloop_tasks.common import LLM_TAG, mythloop_task

    @task(name="bench-bare")
    def bare(i: int, payload: object = None) -> int:
        return i

    @mythloop_task(name="bench-mythloop")
    def mythloop(i: int) -> int:
        return i

    return {"bare": bare, "mythloop": mythloop,
            "mythloop_llm_tag": mythloop.with_options(tags={LLM_TAG}),
            "mythloop_no_persist": mythloop.with_options(persist_result=False)}


def measure(variants: list[str], n: int, payload: object = None) -> dict[str, float]:
    """Seconds for N sequential calls of each variant, each inside one flow run."""
    from prefect import flow
    from prefect.utilities.annotations import quote

    tasks = _tasks()

    @flow(name="bench-overhead")
    def loop(variant: str, n: int) -> float:
        fn = tasks["bare" if variant.startswith("bare") else variant]
        arg = {"bare_payload": payload, "bare_payload_quoted": quote(payload)}.get(variant)
        t0 = time.perf_counter()
        for i in range(n):
            fn(i, arg) if arg is not None else fn(i)
        return time.perf_counter() - t0

    return {v: loop(v, n) for v in variants}


def run(n: int = 200, repeats: int = 3, breakdown: bool = True, breakdown_n: int | None = None,
        start_server: bool = True) -> dict:
    repo_on_path()
    from sweep import open_condition_run, prefect_server

    from mythloop.sweep import SweepConfig

    with contextlib.ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-ovh-")))
        server = stack.enter_context(prefect_server(start_server))
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        measure(["bare", "mythloop"], 5)  # warm-up: first task runs register definitions
        pair: dict[str, list[float]] = {"bare": [], "mythloop": []}
        for _ in range(repeats):
            for name, seconds in measure(["bare", "mythloop"], n).items():
                pair[name].append(seconds / n * 1e3)
        extra: dict[str, dict] = {}
        if breakdown:
            bn = breakdown_n or max(1, n // 2)
            # a realistic heavy task argument: the sweep's ConditionRun, opened
            payload = open_condition_run(SweepConfig(results_dir=workdir, rounds=1), "c3", 1,
                                         workdir)
            names = ["mythloop_llm_tag", "mythloop_no_persist", "bare_payload",
                     "bare_payload_quoted"]
            for name, seconds in measure(names, bn, payload).items():
                extra[name] = {"per_task_ms": seconds / bn * 1e3, "n": bn}
            payload.close()
    bare_ms, ml_ms = pair["bare"], pair["mythloop"]
    return {"n": n, "repeats": repeats, "bare_ms": stats(bare_ms), "mythloop_ms": stats(ml_ms),
            "mythloop_over_bare": ratio_stats(ml_ms, bare_ms),
            "extra_ms_per_task": stats([m - b for m, b in zip(ml_ms, bare_ms, strict=True)]),
            "breakdown": extra, "prefect_startup_s": server["startup_s"]}


if __name__ == "__main__":  # the harness runs it: python bench/overhead.py [--set KEY=VALUE]
    part_main("overhead")
