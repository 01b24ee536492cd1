"""The feedback-loop sweep on Prefect: conditions x replicates x rounds of measure -> learn.

    sweep(config)                       flow "sweep"
      condition_run(c0, rep 1) ...      subflow per condition x replicate ("c3-rep2"), one
                                        after another or `parallel_shards` side by side
        measure_round                   task per round -> <cond>-rep<k>/round_<r>.jsonl
        learning_turn x prompts         real model: a task per learned prompt (retries,
                                        timeout, tag `llm`), `concurrency` at once; the
                                        answers are applied to the store in prompt order
        learn                           simulated / oracle judge: one task per round that
                                        runs the round's turns in the library
      analyze                           task: metrics.json, report.md, plots, artifacts

Within a round the catalogs are frozen at measurement, so its turns are independent; only
the store writes are ordered (prompt order), which keeps a seed's metrics the same at any
concurrency.

With config.shard_deployment set, each condition x replicate is instead a flow run of that
deployment, taken by a work pool's workers (docs/scaling.md); the sweep waits for all of them,
reads their sandboxes from the shared results dir, and analyses once.

Rerunning the same sweep on the same results dir resumes: rounds recorded as
complete are skipped, a round cut short is restored from its snapshot and run again.

With several noise levels (simulated judge) the same flow is a noise study:

    sweep(config, noise_levels=[0, 0.2, 0.4])     flow "sweep" (the outer run)
      sweep-simulated-noise-0.00 ...             subflow "sweep" per level, one after another,
                                                 each an ordinary sweep in D/noise-<level>/
      analyze noise study                        task: D/report.md, D/metrics.json,
                                                 D/noise_curve.png, artifacts

Each level resumes like any sweep (finished rounds are skipped), so rerunning the same
command after an interruption picks up where it stopped.
"""

from __future__ import annotations

import functools
import shutil
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from prefect import flow, get_client
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.client.schemas.filters import (
    FlowRunFilter,
    FlowRunFilterId,
)
from prefect.deployments import run_deployment
from prefect.events.filters import (
    EventFilter,
    EventNameFilter,
    EventOccurredFilter,
    EventOrder,
    EventResourceFilter,
)
from prefect.exceptions import ObjectNotFound
from prefect.futures import PrefectFuture, wait
from prefect.settings import get_current_settings
from prefect.states import Cancelled, Cancelling, Crashed
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

import mythloop
from mythloop.fileio import write_json_atomic
from mythloop.llm import LLM_TAG, BackendTimeout, is_retriable
from mythloop.llm.runner import cli_owner, kill_owned_clis
from mythloop.procs import STOPPING, stop_stays_a_stop
from mythloop.router import get_embedder
from mythloop.settings import get_settings
from mythloop.skills import load_catalog
from mythloop.sweep import ConditionRun, SweepConfig
from mythloop.sweep.config import (
    default_results_dir,
    load_sweep_prompts,
    ranking_settings,
    replicate_seed,
)
from mythloop.sweep.failing import SweepFailing, failing_reason
from mythloop.sweep.inputs import check_inputs, judge_label
from mythloop.sweep.records import (
    CatalogEntry,
    ShardOutcome,
    SweepOutcome,
    SweepRecord,
    read_sweep_record,
)
from mythloop.sweep.shards import rounds_done, shard_plan, shard_summary
from mythloop.sweep.study import (
    finish_study,
    level_config,
    normalise_levels,
    prepare_study_dir,
    sweep_key,
)
from mythloop.sweep.tuned import collect_models
from mythloop.verdicts import render_self_eval_contract
from mythloop.vocab import Condition
from mythloop_tasks.analysis import analyze_results, analyze_study_results, artifact_key
from mythloop_tasks.common import TaskPool, mythloop_task, say
from mythloop_tasks.hooks import record_sweep_failure
from mythloop_tasks.nightly import record_night
from mythloop_tasks.sweep import fine_tune_round, learn_round, learning_turn, measure_round

_SHARD_POLL_S = 2.0  # how often a fanned-out sweep asks the API about its shards
_SHARD_LOST_BEATS = 2  # heartbeats a running shard may miss (plus 10 s) before it is lost
_SHARD_RESUBMITS = 2  # times one lost shard is submitted again before the sweep gives up


@functools.lru_cache(maxsize=8)
def _catalog(pool: Path):
    catalog = load_catalog(pool)
    if not catalog.skills:
        raise ValueError(f"no valid skills under {pool}; check --pool")
    return catalog


def _embedder(model: str | None):
    return get_embedder(model)  # one load per process and model


def _contract() -> str:
    return render_self_eval_contract()


@flow(name="condition-run", log_prints=False)
def condition_run(config: SweepConfig, cond: Condition, replicate: int, results_dir: str,
                  progress_artifact_id: str | None = None, progress_base: int = 0,
                  progress_total: int = 0) -> dict:
    """One condition x replicate in its own sandbox: rounds of measure -> learn."""
    prompts, base_seed = load_sweep_prompts(config)
    run = ConditionRun(config=config, cond=cond, replicate=replicate,
                       results_dir=Path(results_dir), catalog=_catalog(config.resolved_pool()),
                       prompts=prompts, base_seed=config.seed if config.seed is not None
                       else base_seed, embedder=_embedder(config.embedder))
    run.open()
    contract = _contract()
    # Only a real model call takes a slot of the global `llm` limit: a simulated judge's turn
    # carries no tag (each tagged task run costs a concurrency-lease round trip to the API).
    # The turn's timeout is the backend's own deadline (run.turn_timeout: the CLI's process
    # group is killed, the HTTP call cut), which raises a retriable BackendTimeout. No Prefect
    # timeout on top: turns run in worker threads, where Prefect cannot interrupt a blocking
    # call and warns about it on every task run.
    turn = learning_turn.with_options(tags=set() if config.simulated else {LLM_TAG})
    done = set(run.completed_rounds())
    # A Ctrl-C that cuts Prefect's engine starting a task run comes out of it as a ValueError;
    # it stays the stop it is, so this run is recorded Crashed, not Failed.
    with stop_stays_a_stop():
        return _run_rounds(config, run, turn, contract, done, progress_artifact_id,
                           progress_base, progress_total)


def _run_rounds(config: SweepConfig, run: ConditionRun, turn, contract: str, done: set[int],
                progress_artifact_id: str | None, progress_base: int,
                progress_total: int) -> dict:
    """condition_run's rounds: measure, learn, persist, each round once."""
    cond, replicate = run.cond, run.replicate
    failed_turns = 0
    try:
        for round_idx in range(config.rounds):
            if STOPPING.is_set():  # Ctrl-C / SIGTERM: a shard in a worker thread stops here
                raise KeyboardInterrupt(f"{run.name}: stopped before round {round_idx + 1}")
            if round_idx in done:
                say(f"[sweep] {run.name} round {round_idx + 1} of {config.rounds}: already complete, "
                    "skipped")
                continue
            run.prepare_round(round_idx)
            if run.tunes and round_idx > 0:  # C5: rank this round with a model tuned so far
                fine_tune_round(quote(run), round_idx)  # type: ignore[call-overload]
            measured = measure_round(quote(run), round_idx)  # type: ignore[call-overload]
            if config.per_turn_tasks:
                rows = _learn_turn_by_turn(run, turn, round_idx, measured.catalogs,
                                           contract, config.resolved_concurrency())
            else:  # in-process judge: the whole learn step is one task run in the library
                rows = learn_round(quote(run), round_idx,  # type: ignore[call-overload]
                                   measured.catalogs, contract)
                for row in rows:
                    run.append_turn(row)
            failed_turns += sum(not row.ok for row in rows)
            failing = failing_reason(rows)
            if failing:  # the round stays incomplete: the rerun after the fix redoes it
                reason, count, total = failing
                raise SweepFailing(f"{count} of {total} learning turns of {run.name} round "
                                   f"{round_idx + 1} failed for the same reason: {reason}")
            run.mark_round_complete(round_idx)
            line = measured.round_line()  # in-distribution trap-win, hit@5, hit@3; held-out hit@1
            where = f"round {round_idx + 1} of {config.rounds}"  # as report and plots say
            say(f"[sweep] {run.name} {where}: {line}" if line
                else f"[sweep] {run.name} {where} measured")
            if progress_artifact_id:
                update_progress_artifact(UUID(progress_artifact_id),
                                         100.0 * (progress_base + round_idx + 1) / progress_total)
    finally:
        run.close()
    return {"condition": cond, "replicate": replicate, "dir": str(run.dir),
            "completed_rounds": run.completed_rounds(), "failed_turns": failed_turns}


def _learn_turn_by_turn(run: ConditionRun, turn, round_idx: int,
                        catalogs: dict[str, list[CatalogEntry]], contract: str,
                        concurrency: int) -> list:
    """A round's learning turns as task runs, at most `concurrency` at once (tagged ones also
    wait for a slot of the server's `llm` limit). Whatever order they finish in, their answers
    are applied to the store and logged in prompt order. Returns the turns' rows."""
    order = [prompt for prompt in run.learning_order if prompt.id in catalogs]  # not withheld
    rows: list = []
    owner = object()  # marks this round's CLI calls (the worker threads copy the context)
    token = cli_owner.set(owner)
    # Its own pool, whatever runner the flow was started with (in-process or a deployment).
    runner: ThreadPoolTaskRunner[Any]
    with ThreadPoolTaskRunner(max_workers=concurrency) as runner:
        try:
            futures: list[Any] = [runner.submit(turn, {"run": quote(run), "prompt": prompt,
                                            "round_idx": round_idx,
                                            "catalog": catalogs[prompt.id],
                                            "contract": contract})
                       for prompt in order]  # started in prompt order
        finally:
            cli_owner.reset(token)
        try:
            rows = _apply_in_order(run, turn, round_idx, catalogs, order, futures)
        except BaseException:
            # Ctrl-C or a crash: start no queued turn and end the calls in flight now (their
            # CLIs run in their own sessions, out of reach of the terminal's Ctrl-C), rather
            # than wait for each to reach its deadline. The round is redone on resume.
            for future in futures:
                future.wrapped_future.cancel()
            kill_owned_clis(owner)
            raise
    return rows


def _apply_in_order(run: ConditionRun, turn, round_idx: int,
                    catalogs: dict[str, list[CatalogEntry]], order: list, futures: list) -> list:
    """Wait for each turn in prompt order; apply its answer to the store and log its row.
    Returns the rows in prompt order."""
    rows = []
    for prompt, future in zip(order, futures, strict=True):
        catalog = catalogs[prompt.id]
        future.wait()
        state = future.state
        row = None
        error: BaseException | str
        if state.is_completed():
            try:
                row = run.record_turn(prompt, round_idx, catalog, state.result())
            except Exception as exc:  # noqa: BLE001 (a failed turn: logged, round goes on)
                error, attempts = exc, 1
        else:
            error = _state_error(state)
            attempts = _attempts(error, turn)
        if row is None:
            row = run.failed_turn_row(prompt, round_idx, catalog, error,
                                      timed_out=_is_timeout(error), attempts=attempts)
            say(f"[sweep] {run.name} round {round_idx + 1} {prompt.id}: turn failed "
                 f"({(row.error or '')[:160]}); the round goes on")
        run.append_turn(row)
        rows.append(row)
    return rows


def _state_error(state) -> BaseException | str:
    try:
        state.result(raise_on_failure=True)
    except BaseException as exc:  # the failed state's own exception
        return exc
    return state.message or "unknown failure"


def _attempts(error: BaseException | str, task) -> int:
    """How often a failed turn ran: retriable errors used every retry, others failed at once."""
    return task.retries + 1 if isinstance(error, BaseException) and is_retriable(error) else 1


def _is_timeout(error: BaseException | str) -> bool:
    return isinstance(error, BackendTimeout | TimeoutError) or "timed out" in str(error).lower()


def _resolved_results_dir(config: SweepConfig) -> Path:
    return (config.results_dir or default_results_dir(
        get_settings().resolved_results_dir)).expanduser().resolve()


def _prepare_results_dir(config: SweepConfig, results_dir: Path | None = None) -> Path:
    """Check the inputs, then create the results dir and write sweep.json.

    Nothing is written when a check fails (InputError, a ValueError with one line).
    """
    checked = check_inputs(config)
    results_dir = results_dir or _resolved_results_dir(config)
    results_dir.mkdir(parents=True, exist_ok=True)
    meta_path = results_dir / "sweep.json"
    previous = {}
    if meta_path.exists():  # keys this version does not write are kept
        previous = read_sweep_record(meta_path).to_json()
    prompts, file_seed = checked.prompts, checked.file_seed
    seed = config.seed if config.seed is not None else file_seed
    embedder = config.embedder or get_settings().embedder_model or "all-MiniLM-L6-v2 (bundled)"
    write_json_atomic(meta_path, SweepRecord.from_json({
        **previous,
        "sweep_id": results_dir.name,
        "fingerprint": config.fingerprint(),
        "config": config.model_dump(mode="json"),
        "conditions": config.conditions, "rounds": config.rounds,
        "replicates": config.replicates, "judge": config.judge,
        "simulated": config.simulated,
        "judge_options": config.judge_options.model_dump(mode="json"),
        "model": config.judge_options.model or (f"{config.judge} judge" if config.simulated
                                                else None),
        "embedder": embedder, "pool": str(config.resolved_pool()),
        "prompts_file": str(config.resolved_prompts_file()), "prompts": len(prompts),
        "heldout_file": (str(config.resolved_heldout_file()) if config.heldout_file else None),
        **({"cold_skills": list(checked.cold_skills), "add_skills_at": config.add_skills_at}
           if checked.cold_skills else {}),
        # Skills whose description carries an instruction to the judge (the attack metrics).
        **({"injected": checked.injected} if checked.injected else {}),
        # Invalid SKILL.md files left out of the pool (the report lists them as data issues).
        "catalog_issues": checked.catalog_issues(),
        **({"ranking_settings": changed} if (changed := ranking_settings()) else {}),
        "seed": seed,
        "replicate_seeds": {str(k): replicate_seed(seed, k)
                            for k in range(1, config.replicates + 1)},
        "started_utc": previous.get("started_utc") or datetime.now(UTC).isoformat(),
        "finished_utc": None,
        "mythloop_version": mythloop.__version__,
        "python": sys.version.split()[0],
    }).to_json())
    return results_dir


def _remove_if_unused(results_dir: Path) -> None:
    """Delete a results dir this sweep created when it failed before any round was written."""
    if not any(results_dir.glob("*/round_*.jsonl")):
        shutil.rmtree(results_dir, ignore_errors=True)


@flow(name="sweep", flow_run_name="sweep-{config.judge}", on_failure=[record_sweep_failure])
def sweep(config: SweepConfig = SweepConfig(),  # noqa: B008 (pydantic default)
          noise_levels: list[float] | None = None) -> SweepOutcome:
    """Run conditions x replicates x rounds of measure -> learn, then the analysis.

    With several `noise_levels` (simulated judge) this is a noise study instead: one
    ordinary sweep per level in <results dir>/noise-<level>/, then the study's report
    (run_noise_study). One level is the same as setting judge_options.noise.
    """
    if noise_levels:
        levels = normalise_levels(noise_levels)
        if len(levels) > 1:
            return run_noise_study(config, levels)
        config = config.model_copy(update={
            "judge_options": config.judge_options.model_copy(update={"noise": levels[0]})})
    results_dir = _resolved_results_dir(config)
    created = not results_dir.exists()
    results_dir = _prepare_results_dir(config, results_dir)
    say(f"[sweep] results -> {results_dir}")
    say(f"[sweep] judge: {judge_label(config)}")
    try:
        with stop_stays_a_stop():  # (as in condition_run)
            return _run_sweep(config, results_dir)
    except BaseException:
        if created:  # a sweep that never ran a round leaves no empty results dir behind
            _remove_if_unused(results_dir)
        raise


def run_noise_study(config: SweepConfig, levels: list[float]) -> SweepOutcome:
    """Run every level's sweep in turn (inside the calling flow), then the study analysis."""
    root = prepare_study_dir(config, config.results_dir or default_results_dir(
        get_settings().resolved_results_dir), levels)
    say(f"[study] noise levels {', '.join(f'{x:g}' for x in levels)} -> {root}")
    runs = []
    for noise in levels:
        cfg = level_config(config, root, noise)
        runs.append(sweep.with_options(
            flow_run_name=f"sweep-{config.judge}-noise-{noise:.2f}")(cfg))
    finish_study(root)
    analyze_study_results(str(root), config.judge)
    report = Path(root) / "report.md"
    say(f"[study] report: {report}")
    return SweepOutcome(results_dir=str(root), report=str(report), levels=levels,
                        level_results=runs, shards=[s for r in runs for s in r.shards],
                        failed_turns=sum(r.failed_turns for r in runs))


def _run_sweep(config: SweepConfig, results_dir: Path) -> SweepOutcome:
    total = len(config.conditions) * config.replicates * config.rounds
    progress_id = create_progress_artifact(
        progress=0.0, key=artifact_key(_sweep_key(config), "progress"),
        description=f"Sweep progress ({results_dir.name})")
    if config.shard_deployment:  # each shard a flow run of that deployment, on the pool's workers
        return finish_sweep(config, results_dir, _fan_out(config, results_dir, progress_id))
    jobs = [(cond, replicate, i * config.rounds) for i, (replicate, cond) in enumerate(
        (r, c) for r in range(1, config.replicates + 1) for c in config.conditions)]

    def shard(cond: Condition, replicate: int, base: int) -> dict:
        return condition_run.with_options(flow_run_name=f"{cond}-rep{replicate}")(
            config, cond, replicate, str(results_dir), str(progress_id), base, total)

    if config.parallel_shards <= 1 or len(jobs) == 1:
        return finish_sweep(config, results_dir, [shard(*job) for job in jobs])
    # Side by side: each shard a task run (`shard-c3-rep2`) on Prefect's task runner, its
    # condition-run subflow inside, each in its own sandbox as when run one by one. Ctrl-C
    # or SIGTERM: no queued shard starts.
    _catalog(config.resolved_pool())  # load the shared, read-only parts once, up front
    _embedder(config.embedder)
    with TaskPool(config.parallel_shards) as pool:
        futures = [pool.submit(shard_task.with_options(task_run_name=f"shard-{cond}-rep{rep}"),
                               {"config": config, "cond": cond, "replicate": rep,
                                "results_dir": str(results_dir),
                                "progress_artifact_id": str(progress_id),
                                "progress_base": base, "progress_total": total})
                   for cond, rep, base in jobs]
        try:
            wait(cast("list[PrefectFuture[Any]]", futures))
        except BaseException:
            # The stop reaches this thread, not the shards under way in the runner's: no
            # queued shard starts, and those under way are recorded Crashed at once (as a
            # shard run one by one is); the CLI ends the process.
            pool.stop_under_way("Execution was aborted by an interrupt signal (the sweep "
                                "was stopped).")
            raise
        shards = [future.result() for future in futures]
    return finish_sweep(config, results_dir, shards)


@mythloop_task(name="shard", retries=0)
def shard_task(config: SweepConfig, cond: Condition, replicate: int, results_dir: str,
               progress_artifact_id: str, progress_base: int, progress_total: int) -> dict:
    """One condition x replicate side by side with others: its condition-run subflow."""
    return condition_run.with_options(flow_run_name=f"{cond}-rep{replicate}")(
        config, cond, replicate, results_dir, progress_artifact_id, progress_base,
        progress_total)


def _sweep_key(config: SweepConfig) -> str:
    return sweep_key(config.judge, config.judge_options.noise, config.judge_options.persuade)


def _fan_out(config: SweepConfig, results_dir: Path, progress_id) -> list[dict]:
    """Submit every shard as a flow run of config.shard_deployment, wait for all, gather them."""
    # Shards load the config on another host: absolute paths where the user gave any,
    # the bundled defaults (resolved there) where not, and no fan-out of their own.
    shard_config = config.model_copy(update={
        "results_dir": results_dir, "shard_deployment": None, "shard_timeout": None,
        "pool": config.resolved_pool() if config.pool else None,
        "prompts_file": config.resolved_prompts_file() if config.prompts_file else None,
        "heldout_file": config.resolved_heldout_file(),
    }).model_dump(mode="json")
    plan = {f"{cond}-rep{replicate}": (cond, replicate) for cond, replicate in shard_plan(config)}

    def submit(name: str):
        """A flow run of the shard deployment named NAME (again, when its first was lost: the
        shard resumes from its progress.json, redoing only the rounds not recorded complete)."""
        cond, replicate = plan[name]
        try:
            return run_deployment(
                str(config.shard_deployment), timeout=0, flow_run_name=name, tags=["shard"],
                parameters={"config": shard_config, "cond": cond, "replicate": replicate,
                            "results_dir": str(results_dir)})
        except ObjectNotFound:
            raise ValueError(f"no deployment {config.shard_deployment!r} on this Prefect API; "
                             "deploy it first (docs/scaling.md)") from None

    runs = {name: submit(name) for name in plan}
    say(f"[sweep] {len(runs)} shards submitted to {config.shard_deployment}")
    ended = _wait_for_shards(runs, config, results_dir, progress_id, submit)
    failed = [f"{name} (flow run {run.id}: {run.state.name}: {(run.state.message or '')[:200]})"
              for name, run in ended.items() if not run.state.is_completed()]
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(runs)} shards did not complete: "
                           + "; ".join(failed) + ". Completed shards are kept: rerun the sweep "
                           "with the same results dir to resume")
    return [shard_summary(results_dir, cond, rep, config.rounds)
            for cond, rep in shard_plan(config)]


def _wait_for_shards(runs: dict, config: SweepConfig, results_dir: Path, progress_id,
                     submit=None) -> dict:
    """Poll the shards' flow runs until all are final; past shard_timeout, cancel and fail.

    A running shard whose process stopped sending flow-run heartbeats (its host or worker
    killed with it) is marked Crashed and submitted again under its name, at most
    _SHARD_RESUBMITS times; the new run resumes from the shard's progress.json."""
    deadline = time.monotonic() + config.shard_timeout if config.shard_timeout else None
    total = len(runs) * config.rounds
    seen: set[str] = set()
    last_done = -1
    resubmits: dict[str, int] = {}
    watch = _LostShards(submit)
    with get_client(sync_client=True) as client:
        while True:
            found = {run.id: run for run in client.read_flow_runs(flow_run_filter=FlowRunFilter(
                id=FlowRunFilterId(any_=[run.id for run in runs.values()])))}
            runs = {name: found.get(run.id, run) for name, run in runs.items()}
            for name, lost_for in watch.lost(client, runs).items():
                if resubmits.get(name, 0) >= _SHARD_RESUBMITS:
                    message = (f"no heartbeat for {lost_for:.0f} s: its process is gone; "
                               f"submitted {_SHARD_RESUBMITS + 1} times, not again")
                    client.set_flow_run_state(runs[name].id, Crashed(message=message),
                                              force=True)
                    continue
                resubmits[name] = resubmits.get(name, 0) + 1
                old = runs[name]
                client.set_flow_run_state(old.id, Crashed(
                    message=f"no heartbeat for {lost_for:.0f} s: its process is gone; "
                            "the sweep submitted the shard again"), force=True)
                runs[name] = submit(name)  # watch.lost() is {} when there is no submit
                say(f"[sweep] shard {name}: lost (flow run {old.id}, no heartbeat for "
                    f"{lost_for:.0f} s), submitted again as flow run {runs[name].id}; it "
                    "resumes from its progress.json")
            final = {name for name, run in runs.items() if run.state and run.state.is_final()}
            for name in sorted(final - seen):
                say(f"[sweep] shard {name}: {runs[name].state.name}")
            seen = final
            done = rounds_done(results_dir, list(runs))
            if done != last_done:
                update_progress_artifact(progress_id, 100.0 * min(done, total) / total)
                last_done = done
            if len(final) == len(runs):
                return runs
            if deadline and time.monotonic() > deadline:
                waiting = {name: run for name, run in runs.items() if name not in final}
                for run in waiting.values():
                    idle = run.state is None or run.state.is_scheduled() or run.state.is_pending()
                    client.set_flow_run_state(run.id, Cancelled() if idle else Cancelling(),
                                              force=True)
                pools = sorted({run.work_pool_name or "?" for run in waiting.values()})
                raise TimeoutError(
                    f"shards still unfinished after {config.shard_timeout:.0f} s, cancelled: "
                    + ", ".join(f"{n} ({r.state.name if r.state else 'no state'})"
                                for n, r in waiting.items())
                    + f". Scheduled ones were never taken: is a worker polling work pool "
                    f"{', '.join(pools)}?")
            time.sleep(_SHARD_POLL_S)


class _LostShards:
    """Which Running shards have gone quiet: no `prefect.flow-run.heartbeat` event (sent by
    the shard's own process every PREFECT_FLOWS_HEARTBEAT_FREQUENCY seconds, 30 at the least)
    for _SHARD_LOST_BEATS heartbeats plus a margin, counted from the later of its last
    heartbeat and its Running state. The parent reads this Prefect setting from its own
    environment: set it the same on the workers and where the parent runs (docs/scaling.md).
    A worker killed alone leaves its shard's process, and so its heartbeats, alive."""

    def __init__(self, submit) -> None:
        beat = get_current_settings().flows.heartbeat_frequency if submit else None
        self.quiet_s = _SHARD_LOST_BEATS * max(beat, 30) + 10.0 if beat else None
        self.next_check = 0.0

    def lost(self, client, runs: dict) -> dict[str, float]:
        """name -> seconds quiet, for each running shard quiet longer than quiet_s."""
        running = {name: run for name, run in runs.items()
                   if run.state is not None and run.state.is_running()}
        if self.quiet_s is None or not running or time.monotonic() < self.next_check:
            return {}
        self.next_check = time.monotonic() + self.quiet_s / 6
        now = datetime.now(UTC)
        page = client.read_events(EventFilter(
            occurred=EventOccurredFilter(since=now - timedelta(seconds=3 * self.quiet_s)),
            event=EventNameFilter(name=["prefect.flow-run.heartbeat"]),
            resource=EventResourceFilter(id=[f"prefect.flow-run.{run.id}"
                                             for run in running.values()]),
            order=EventOrder.DESC), limit=50)
        last: dict[str, datetime] = {}
        for event in page.events:
            rid = event.resource.id
            last[rid] = max(last.get(rid, event.occurred), event.occurred)
        quiet = {}
        for name, run in running.items():
            since = [t for t in (run.state.timestamp, last.get(f"prefect.flow-run.{run.id}"))
                     if t is not None]
            seconds = (now - max(since)).total_seconds() if since else 0.0
            if seconds > self.quiet_s:
                quiet[name] = seconds
        return quiet


def finish_sweep(config: SweepConfig, results_dir: Path, shards: list[dict]) -> SweepOutcome:
    """Analyse the results dir once every shard is in, and say where the report is."""
    meta_path = results_dir / "sweep.json"
    meta = read_sweep_record(meta_path)
    update: dict[str, Any] = {"finished_utc": datetime.now(UTC).isoformat()}
    models = collect_models(results_dir)  # C5's tuned models, by condition x replicate
    if models:
        update["models"] = models
    write_json_atomic(meta_path, meta.model_copy(update=update).to_json())
    # Artifact keys stay the same night after night, so the UI shows one history per judge
    # and noise level.
    analyze_results(str(results_dir), _sweep_key(config))
    report = Path(results_dir) / "report.md"
    say(f"[sweep] report: {report}")
    night = _record_night(results_dir, _sweep_key(config))
    outcomes = [ShardOutcome.model_validate(s) for s in shards]
    return SweepOutcome(results_dir=str(results_dir), report=str(report), shards=outcomes,
                        failed_turns=sum(s.failed_turns for s in outcomes),
                        regressions=night.get("regressions", []))


def _record_night(results_dir: Path, sweep_key: str) -> dict:
    """History, comparison with the last comparable night, regression events, trend plot.
    A failure here is reported and leaves the finished sweep Completed."""
    state = record_night(str(results_dir), sweep_key, return_state=True)
    if not state.is_completed():
        say(f"[sweep] history not updated: {state.message}")
        return {}
    return state.result()
