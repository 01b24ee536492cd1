"""The feedback-loop sweep on Prefect: conditions x replicates x rounds of measure -> learn.

    sweep(config)                       flow "sweep"
      condition_run(c0, rep 1) ...      subflow per condition x replicate ("c3-rep2")
        measure_round                   task per round -> <cond>-rep<k>/round_<r>.jsonl
        learning_turn x prompts         task per learned prompt (tag `llm`, retries)
      analyze                           task: metrics.json, report.md, plots, artifacts

Rerunning the same sweep on the same results dir resumes: rounds recorded as
complete are skipped, a round cut short is restored from its snapshot and run again.
"""

from __future__ import annotations

import functools
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

from prefect import flow, get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact

import mythloop
from mythloop.settings import get_settings
from mythloop.sweep import ConditionRun, SweepConfig, load_prompts
from mythloop.sweep.config import default_results_dir
from mythloop.sweep.files import write_json_atomic
from tasks.analysis import analyze_results, artifact_key
from tasks.sweep import learning_turn, measure_round


@functools.lru_cache(maxsize=8)
def _catalog(pool: Path):
    from mythloop.skills import load_catalog

    catalog = load_catalog(pool)
    if not catalog.skills:
        raise ValueError(f"no valid skills under {pool}; check --pool")
    return catalog


def _embedder(model: str | None):
    from mythloop.router import get_embedder

    return get_embedder(model)  # one load per process and model


def _contract() -> str:
    from mythloop.verdicts import render_self_eval_contract

    return render_self_eval_contract()


def _say(message: str) -> None:
    """A console line for the person watching, as well as the Prefect log."""
    print(message, flush=True)
    try:
        get_run_logger().info(message)
    except Exception:  # outside a run context
        pass


@flow(name="condition-run", log_prints=False)
def condition_run(config: SweepConfig, cond: str, replicate: int, results_dir: str,
                  progress_artifact_id: str | None = None, progress_base: int = 0,
                  progress_total: int = 0) -> dict:
    """One condition x replicate in its own sandbox: rounds of measure -> learn."""
    prompts, base_seed = load_prompts(config.resolved_prompts_file())
    run = ConditionRun(config=config, cond=cond, replicate=replicate,
                       results_dir=Path(results_dir), catalog=_catalog(config.resolved_pool()),
                       prompts=prompts, base_seed=config.seed if config.seed is not None
                       else base_seed, embedder=_embedder(config.embedder))
    run.open()
    contract = _contract()
    timeout = config.turn_timeout or get_settings().turn_timeout
    turn = learning_turn.with_options(timeout_seconds=timeout + 30)
    done = set(run.completed_rounds())
    failed_turns = 0
    try:
        for round_idx in range(config.rounds):
            if round_idx in done:
                _say(f"[sweep] {run.name} round {round_idx}: already complete, skipped")
                continue
            run.prepare_round(round_idx)
            measured = measure_round(run, round_idx)
            for prompt in run.learning_order:
                catalog = measured["catalogs"][prompt.id]
                state = turn(run, prompt, round_idx, catalog, contract, return_state=True)
                if state.is_completed():
                    row = state.result()
                else:
                    failed_turns += 1
                    error = _state_error(state)
                    row = run.failed_turn_row(
                        prompt, round_idx, catalog, error,
                        timed_out=_is_timeout(error), attempts=(state.state_details.run_count
                                                                if state.state_details else 1) or 1)
                    _say(f"[sweep] {run.name} round {round_idx} {prompt.id}: turn failed "
                         f"({row['error'][:160]}); the round goes on")
                run.append_turn(row)
            run.mark_round_complete(round_idx)
            hit3 = measured.get("in_distribution_hit_at_3")
            _say(f"[sweep] {run.name} round {round_idx}/{config.rounds - 1}: "
                 f"in-distribution hit@3 {hit3:.2f}" if hit3 is not None else
                 f"[sweep] {run.name} round {round_idx} measured")
            if progress_artifact_id:
                update_progress_artifact(progress_artifact_id,
                                         100.0 * (progress_base + round_idx + 1) / progress_total)
    finally:
        run.close()
    return {"condition": cond, "replicate": replicate, "dir": str(run.dir),
            "completed_rounds": run.completed_rounds(), "failed_turns": failed_turns}


def _state_error(state) -> BaseException | str:
    try:
        state.result(raise_on_failure=True)
    except BaseException as exc:  # the failed state's own exception
        return exc
    return state.message or "unknown failure"


def _is_timeout(error: BaseException | str) -> bool:
    from mythloop.llm import BackendTimeout

    return isinstance(error, BackendTimeout | TimeoutError) or "timed out" in str(error).lower()


def _prepare_results_dir(config: SweepConfig) -> Path:
    results_dir = (config.results_dir or default_results_dir(
        get_settings().resolved_results_dir)).expanduser().resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    meta_path = results_dir / "sweep.json"
    previous = {}
    if meta_path.exists():
        previous = json.loads(meta_path.read_text(encoding="utf-8"))
        if previous.get("fingerprint") not in (None, config.fingerprint()):
            raise ValueError(
                f"{results_dir} holds a different sweep (other conditions, judge, pool or seed); "
                "choose another --results-dir or delete it")
    prompts, file_seed = load_prompts(config.resolved_prompts_file())
    seed = config.seed if config.seed is not None else file_seed
    from mythloop.sweep.config import replicate_seed

    embedder = config.embedder or get_settings().embedder_model or "all-MiniLM-L6-v2 (bundled)"
    write_json_atomic(meta_path, {
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
        "seed": seed,
        "replicate_seeds": {str(k): replicate_seed(seed, k)
                            for k in range(1, config.replicates + 1)},
        "started_utc": previous.get("started_utc") or datetime.now(UTC).isoformat(),
        "finished_utc": None,
        "mythloop_version": mythloop.__version__,
        "python": sys.version.split()[0],
    })
    return results_dir


@flow(name="sweep", flow_run_name="sweep-{config.judge}")
def sweep(config: SweepConfig = SweepConfig()) -> dict:  # noqa: B008 (pydantic default)
    """Run conditions x replicates x rounds of measure -> learn, then the analysis."""
    results_dir = _prepare_results_dir(config)
    _say(f"[sweep] results -> {results_dir}")
    total = len(config.conditions) * config.replicates * config.rounds
    progress_id = create_progress_artifact(
        progress=0.0, key=artifact_key(config.judge, "progress"),
        description=f"Sweep progress ({results_dir.name})")
    shards = []
    base = 0
    for replicate in range(1, config.replicates + 1):
        for cond in config.conditions:
            shards.append(condition_run.with_options(flow_run_name=f"{cond}-rep{replicate}")(
                config, cond, replicate, str(results_dir), str(progress_id), base, total))
            base += config.rounds
    return finish_sweep(config, results_dir, shards)


def finish_sweep(config: SweepConfig, results_dir: Path, shards: list[dict]) -> dict:
    """Analyse the results dir once every shard is in, and say where the report is."""
    meta_path = results_dir / "sweep.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["finished_utc"] = datetime.now(UTC).isoformat()
    write_json_atomic(meta_path, meta)
    # Artifact keys stay the same night after night, so the UI shows one history per judge.
    analyze_results(str(results_dir), config.judge)
    report = Path(results_dir) / "report.md"
    _say(f"[sweep] report: {report}")
    return {"results_dir": str(results_dir), "report": str(report), "shards": shards,
            "failed_turns": sum(s["failed_turns"] for s in shards)}
