"""Benchmark: the seed-sized sweep as the Prefect flow vs the same library calls in a plain loop.
How it measures: docs/performance.md, "bench/sweep.py"."""

import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from itertools import count
from pathlib import Path
from unittest.mock import patch

import common

from mythloop.fileio import write_text_atomic

FAKE_GEMINI = common.REPO / "tests" / "fakes" / "gemini"


def seed_prompts_file(dst: Path) -> Path:
    """The bundled prompts without the held-out rows: the 13 prompts of the seed's sweep."""
    import yaml

    from mythloop.data import data_path

    data = yaml.safe_load(data_path("fixtures", "prompts.yaml").read_text(encoding="utf-8"))
    keep = {k: data[k] for k in ("version", "seed", "in_distribution", "null_prompts") if k in data}
    dst.write_text(yaml.safe_dump(keep, sort_keys=False), encoding="utf-8")
    return dst


def seed_config(results_dir: Path, prompts_file: Path, rounds: int = 6):
    """SweepConfig of the seed-sized sweep (simulated judge, 1 replicate)."""
    from mythloop.sweep import JudgeOptions, SweepConfig

    return SweepConfig(conditions=["c0", "c3"], rounds=rounds, replicates=1, judge="simulated",
                       judge_options=JudgeOptions(noise=0.2), prompts_file=prompts_file,
                       results_dir=results_dir)


def open_condition_run(config, cond: str, replicate: int, results_dir: Path):
    """The sweep's ConditionRun of COND, opened (store, router), as the flow makes it."""
    from mythloop.sweep import ConditionRun
    from mythloop.sweep.config import load_sweep_prompts
    from mythloop_flows.feedback_loop import _catalog, _embedder

    prompts, base_seed = load_sweep_prompts(config)  # with the --held-out file's, as the flow
    run = ConditionRun(config=config, cond=cond, replicate=replicate, results_dir=results_dir,
                       catalog=_catalog(config.resolved_pool()), prompts=prompts,
                       base_seed=config.seed if config.seed is not None else base_seed,
                       embedder=_embedder(config.embedder))
    run.open()
    return run


def plain_sweep(config, tune: bool = False) -> dict:
    """What flows/feedback_loop.py's `sweep` and `condition_run` do, as plain calls (no
    Prefect), turn by turn; TUNE: each round's turns in one `learn_round`, after C5's
    fine-tune step from the second round (bench/attack_study.py)."""
    from mythloop.analysis import analyze
    from mythloop.fileio import write_json_atomic
    from mythloop.sweep.tuned import tune_for_round
    from mythloop_flows.feedback_loop import _contract, _is_timeout, _prepare_results_dir

    results_dir = _prepare_results_dir(config)
    failed = 0
    for replicate in range(1, config.replicates + 1):
        for cond in config.conditions:
            run = open_condition_run(config, cond, replicate, results_dir)
            contract = _contract()
            done = set(run.completed_rounds())
            try:
                for round_idx in range(config.rounds):
                    if round_idx in done:
                        continue
                    run.prepare_round(round_idx)
                    if tune and run.tunes and round_idx > 0:
                        tune_for_round(run, round_idx)
                    measured = run.measure(round_idx)
                    if tune:
                        for row in run.learn_round(round_idx, measured.catalogs, contract):
                            run.append_turn(row)
                    for prompt in [] if tune else run.learning_order:
                        if prompt.id not in measured.catalogs:  # withheld (--cold-skills)
                            continue
                        catalog = measured.catalogs[prompt.id]
                        try:
                            row = run.learning_turn(prompt, round_idx, catalog, contract)
                        except Exception as exc:  # as the flow: log the turn as failed, go on
                            failed += 1
                            row = run.failed_turn_row(prompt, round_idx, catalog, exc,
                                                      timed_out=_is_timeout(exc), attempts=1)
                        run.append_turn(row)
                    run.mark_round_complete(round_idx)
            finally:
                run.close()
    meta_path = results_dir / "sweep.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["finished_utc"] = datetime.now(UTC).isoformat()
    write_json_atomic(meta_path, meta)
    analyze(results_dir)
    return {"results_dir": str(results_dir), "failed_turns": failed}


def flow_sweep(config) -> dict:
    from mythloop_flows.feedback_loop import sweep

    return sweep(config).model_dump(mode="json")  # (as plain_sweep's dict)


def _metrics(results_dir: str) -> dict:
    """The headline numbers both variants must agree on (same library calls, same seeds)."""
    data = json.loads((Path(results_dir) / "metrics.json").read_text(encoding="utf-8"))
    return data.get("headline") or {k: data[k] for k in sorted(data)[:3]}


@contextlib.contextmanager
def prefect_server(start: bool = True):
    """A temporary Prefect server, heartbeats off; its start-up s (None: PREFECT_API_URL is set)."""
    from prefect import settings

    with settings.temporary_settings(updates={settings.PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        if settings.PREFECT_API_URL.value() or not start:
            yield {"startup_s": None, "server_pid": None}
            return
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker
        from prefect.server.api.server import SubprocessASGIServer

        t0 = time.perf_counter()
        # The same singleton Prefect's client starts when no API URL is set.
        server = SubprocessASGIServer()
        server.start()
        info = {"startup_s": time.perf_counter() - t0, "server_pid": server.server_process.pid}
        try:
            yield info
        finally:
            # send queued logs and events while the server still answers (best effort)
            for worker in (APILogWorker, EventsWorker):
                with contextlib.suppress(Exception):
                    worker.drain_all(timeout=5)
            info["server_peak_rss_mb"] = common.vm_hwm_mb(server.server_process.pid)
            server.stop()


def first_flow_seconds() -> float:
    """Seconds for the first (trivial) flow run against a freshly started server."""
    from prefect import flow

    @flow(name="bench-first-flow")
    def first() -> int:
        return 1

    t0 = time.perf_counter()
    first()
    return time.perf_counter() - t0


def _turn_phase_s(results_dir: Path) -> float:
    """Seconds of the learning turns: per shard and round, measurement to last answer; summed."""
    total = 0.0
    for shard in sorted(d for d in results_dir.iterdir() if (d / "turns.jsonl").exists()):
        for measured in shard.glob("round_*.jsonl"):
            r = measured.stem.split("_")[1]
            answers = [p.stat().st_mtime for p in (shard / "raw").glob(f"r{r}_*.text.md")]
            if answers:
                total += max(answers) - measured.stat().st_mtime
    return total


def latency_stand_in(workdir: Path, prompts_file: Path, rounds: int = 1, delay_s: float = 2.0,
                     levels: tuple[int, ...] = (1, 8)) -> dict:
    """The rounds against the fake gemini CLI at each --concurrency level (server already up)."""
    from mythloop.sweep import JudgeOptions, SweepConfig

    exe = workdir / "gemini"  # the fake gemini CLI (tests/fakes), run by this interpreter
    exe.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_GEMINI} \"$@\"\n", encoding="utf-8")
    exe.chmod(0o755)
    path = os.pathsep.join(p for p in (str(common.REPO), os.environ.get("PYTHONPATH")) if p)
    fake = {"FAKE_MODE": "judge", "FAKE_DELAY": f"{delay_s:g}", "PYTHONPATH": path}
    runs = {}
    with patch.dict(os.environ, fake):
        for n in levels:
            config = SweepConfig(conditions=["c0", "c3"], rounds=rounds, replicates=1,
                                 judge="gemini", judge_options=JudgeOptions(command=str(exe)),
                                 prompts_file=prompts_file, concurrency=n,
                                 results_dir=workdir / f"latency-c{n}")
            t0 = time.perf_counter()
            result = flow_sweep(config)
            wall = time.perf_counter() - t0
            runs[n] = {"wall_s": wall, "turns_s": _turn_phase_s(Path(result["results_dir"])),
                       "failed_turns": result["failed_turns"],
                       "metrics": _metrics(result["results_dir"])}
            common.note("sweep", f"latency stand-in --concurrency {n}: {wall:.1f} s "
                        f"(turns {runs[n]['turns_s']:.1f} s)")
    lo, hi = min(levels), max(levels)
    return {"delay_s": delay_s, "rounds": rounds, "turns": 2 * rounds * 13,
            "levels": list(levels),
            "runs": {str(n): {k: v for k, v in r.items() if k != "metrics"}
                     for n, r in runs.items()},
            "turns_speedup": runs[lo]["turns_s"] / max(runs[hi]["turns_s"], 1e-9),
            "wall_speedup": runs[lo]["wall_s"] / runs[hi]["wall_s"],
            "same_metrics": all(r["metrics"] == runs[lo]["metrics"] for r in runs.values())}


def profile_flow(out: Path, rounds: int, workdir: Path) -> dict:
    """Profile one sweep flow run (after a warm-up plain run); pyinstrument's text to OUT."""
    from pyinstrument import Profiler

    prompts_file = seed_prompts_file(workdir / "prompts-seed13.yaml")
    plain_sweep(seed_config(workdir / "warm", prompts_file, rounds))
    with prefect_server() as _, contextlib.redirect_stdout(io.StringIO()):
        first_flow_seconds()
        profiler = Profiler(interval=0.002)
        profiler.start()
        flow_sweep(seed_config(workdir / "profiled", prompts_file, rounds))
        profiler.stop()
    write_text_atomic(out, profiler.output_text(unicode=False, color=False))
    return {"profile": str(out), "rounds": rounds}


def run(repeats: int = 3, rounds: int = 6, cli_repeats: int = 1, start_server: bool = True,
        workdir: Path | None = None, latency_rounds: int = 1, latency_delay_s: float = 2.0,
        profile: str | None = None) -> dict:
    """All sweep figures; with PROFILE (a file), only a pyinstrument profile of one flow run."""
    common.repo_on_path()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-sweep-")))
        if profile:
            return profile_flow(Path(profile), rounds, workdir)
        prompts_file = seed_prompts_file(workdir / "prompts-seed13.yaml")
        configs = (seed_config(workdir / f"r{i}", prompts_file, rounds) for i in count())

        # Untimed warm-up: model load, skill embeddings into the on-disk cache, catalog.
        t0 = time.perf_counter()
        warm = plain_sweep(next(configs))
        warmup_s = time.perf_counter() - t0
        common.note("sweep", f"warm-up plain run {warmup_s:.1f} s")
        with prefect_server(start_server) as server, contextlib.redirect_stdout(io.StringIO()):
            first_s = first_flow_seconds()
            common.note("sweep", f"server up in {server['startup_s'] or 0:.1f} s, "
                        f"first flow {first_s:.1f} s")
            plain_s, flow_s = [], []
            cpu: dict[str, list[float]] = {"plain_client": [], "flow_client": [],
                                           "flow_server": [], "flow_server_after": []}
            spid = server["server_pid"]
            plain_peak = None
            for _ in range(repeats):
                if spid:  # the server's backlog of the previous flow is not the loop's cost
                    common.wait_until_idle(spid)
                c0, t0 = time.process_time(), time.perf_counter()
                plain = plain_sweep(next(configs))
                plain_s.append(time.perf_counter() - t0)
                cpu["plain_client"].append(time.process_time() - c0)
                plain_peak = plain_peak or common.peak_rss_mb()  # before any flow ran here
                s0 = common.process_cpu_s(spid) if spid else None
                c0, t0 = time.process_time(), time.perf_counter()
                flowed = flow_sweep(next(configs))
                flow_s.append(time.perf_counter() - t0)
                cpu["flow_client"].append(time.process_time() - c0)
                if s0 is not None:
                    cpu["flow_server"].append(common.process_cpu_s(spid) - s0)
                    cpu["flow_server_after"].append(common.wait_until_idle(spid))
                common.note("sweep", f"plain {plain_s[-1]:.1f} s, flow {flow_s[-1]:.1f} s")
            if latency_rounds and spid:
                common.wait_until_idle(spid)
            latency = latency_stand_in(workdir, prompts_file, latency_rounds,
                                       latency_delay_s) if latency_rounds else None
        # the flow's task runs (in-process judge): measure and learn per shard and round, analysis
        shards = [d for d in Path(flowed["results_dir"]).iterdir() if (d / "turns.jsonl").exists()]
        task_runs = 2 * len(shards) * rounds + 1
        same = (_metrics(warm["results_dir"]) == _metrics(plain["results_dir"])
                == _metrics(flowed["results_dir"]))
        cli = []
        for _ in range(cli_repeats):
            common.note("sweep", "mythloop sweep in a fresh process ...")
            args = ["sweep", "--judge", "simulated", "--noise", "0.2", "--rounds", str(rounds),
                    "--replicates", "1", "--prompts", str(prompts_file), "--results-dir",
                    str(workdir / f"cli-{time.time_ns()}")]  # its own temporary server
            state = Path(os.environ.get("MYTHLOOP_STATE_DIR", workdir / "state"))
            cli.append(common.mythloop_child(args, env=common.bench_env(state), timeout=600,
                                             log=workdir / "cli-sweep.log"))
    startup = server["startup_s"]
    cli_wall = common.stats([c["wall_s"] for c in cli])
    peaks = {"bench_process_after_plain": plain_peak,
             "bench_process_after_flow": common.peak_rss_mb(),
             "prefect_server": server.get("server_peak_rss_mb")}
    cli_peak = max((c["peak_tree_rss_mb"] for c in cli), default=None)
    return {"config": {"conditions": ["c0", "c3"], "rounds": rounds, "replicates": 1,
                       "prompts": "in_distribution + null (13); held-out rows left out",
                       "judge": "simulated (noise 0.2)", "repeats": repeats},
            "warmup_plain_s": warmup_s, "prefect_startup_s": startup, "first_flow_s": first_s,
            "plain_s": common.stats(plain_s), "flow_s": common.stats(flow_s),
            "flow_over_plain": common.ratio_stats(flow_s, plain_s),
            "same_metrics": same, "task_runs": task_runs,
            "cpu_s": {name: common.stats(values) for name, values in cpu.items()},
            "failed_turns": {"plain": plain["failed_turns"], "flow": flowed["failed_turns"]},
            "peak_rss_mb": peaks, "cli": {"wall_s": cli_wall, "peak_tree_rss_mb": cli_peak},
            "latency": latency,
            # including start-up: the fresh CLI process when run, else start-up + flow
            "headline": {"wall_with_startup_s": cli_wall["median"] if cli else
                         (startup or 0.0) + first_s + statistics.median(flow_s),
                         "peak_rss_mb": cli_peak or max(v for v in peaks.values()
                                                        if v is not None)}}


if __name__ == "__main__":  # the harness runs it: python bench/sweep.py [--set KEY=VALUE]
    common.part_main("sweep")
