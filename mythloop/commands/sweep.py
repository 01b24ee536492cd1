"""`mythloop sweep`: run the feedback-loop sweep flow from the command line."""

from __future__ import annotations

from pathlib import Path

import typer

from mythloop.commands.runtime import flow_runtime, ui_hint

CONDITIONS = ("c0", "c3")
JUDGES = ("simulated", "oracle", "gemini", "claude", "codex", "openai")


def sweep(
    ctx: typer.Context,
    conditions: list[str] = typer.Option(
        ["c0", "c3"], "--conditions", "-c",
        help="Conditions to run: c0 (blend off) and/or c3 (blend on). "
             "`--conditions c0 c3`, `--conditions c0,c3` or repeat the option."),
    rounds: int = typer.Option(6, min=1, help="Rounds of measure -> learn (R0..R{n-1})."),
    replicates: int = typer.Option(1, min=1, help="Replicates per condition, each with its own "
                                                   "seed and prompt order."),
    judge: str = typer.Option("simulated", help="Who plays the model in learning turns: "
                              + " | ".join(JUDGES) + ". simulated/oracle need no account."),
    noise: float = typer.Option(0.2, min=0.0, max=1.0,
                                help="Simulated judge: probability a verdict is flipped."),
    omit_rate: float = typer.Option(0.05, min=0.0, max=1.0,
                                    help="Simulated judge: probability a tag is left out."),
    invent_rate: float = typer.Option(0.02, min=0.0, max=1.0,
                                      help="Simulated judge: rate of invented skill names."),
    model: str | None = typer.Option(None, help="Model for a real judge backend."),
    pool: Path | None = typer.Option(None, help="Skill pool folder (default: bundled pool)."),
    prompts: Path | None = typer.Option(None, "--prompts",
                                        help="Prompts YAML (default: bundled prompts.yaml)."),
    embedder: str | None = typer.Option(None, help="Sentence-transformers model path or name."),
    turn_timeout: float | None = typer.Option(None, help="Seconds per learning turn."),
    seed: int | None = typer.Option(None, help="Base seed (default: the prompts file's)."),
    results_dir: Path | None = typer.Option(
        None, help="Where results go (default: .mythloop/results/<UTC stamp>). "
                   "Rerunning on the same dir resumes."),
    shard_deployment: str | None = typer.Option(
        None, help="Fan out: run each condition x replicate as a flow run of this deployment "
                   "(e.g. condition-run/condition-run) on a work pool's workers; see "
                   "docs/scaling.md. Default: in this process."),
    concurrency: int | None = typer.Option(
        None, min=1, max=256,
        help="Learning turns of a round in flight at once, each its own task run (default: "
             "MYTHLOOP_LLM_CONCURRENCY, 4). Real-model turns also wait for a slot of the "
             "server's global `llm` limit when one exists. The results do not depend on it."),
    task_per_turn: bool = typer.Option(
        False, "--task-per-turn",
        help="One task run per learning turn for any judge (simulated and oracle judges "
             "otherwise learn a round in one `learn` task)."),
    parallel_shards: int = typer.Option(
        1, min=1, max=64,
        help="Condition x replicate runs side by side in this process, each in its own sandbox."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs."),
) -> None:
    """Run sweep conditions x replicates x rounds of measure -> learn, then the analysis.

    Writes per-round JSONL, turn logs, raw model texts, metrics.json, report.md and plots
    into the results dir, and prints where the report is.
    """
    chosen = _conditions(conditions, ctx.args)
    if judge not in JUDGES:
        raise typer.BadParameter(f"unknown judge {judge!r}; choose one of {', '.join(JUDGES)}",
                                 param_hint="--judge")
    from mythloop.sweep import JudgeOptions, SweepConfig

    config = SweepConfig(
        conditions=chosen, rounds=rounds, replicates=replicates, judge=judge,
        judge_options=JudgeOptions(noise=noise, omit_rate=omit_rate, invent_rate=invent_rate,
                                   model=model),
        pool=pool, prompts_file=prompts, embedder=embedder, turn_timeout=turn_timeout,
        seed=seed, results_dir=results_dir.resolve() if results_dir else None,
        shard_deployment=shard_deployment, concurrency=concurrency,
        task_per_turn=task_per_turn, parallel_shards=parallel_shards)
    for path, what in ((config.resolved_pool(), "--pool"),
                       (config.resolved_prompts_file(), "--prompts")):
        if not path.exists():
            typer.echo(f"error: {what} {path} does not exist", err=True)
            raise typer.Exit(2)
    with flow_runtime(verbose=verbose):
        from flows.feedback_loop import sweep as sweep_flow

        try:
            result = sweep_flow(config)
        except ValueError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    typer.echo(f"results: {result['results_dir']}")
    typer.echo(f"report:  {result['report']}")
    if result["failed_turns"]:
        typer.echo(f"note: {result['failed_turns']} learning turns failed; see the report's "
                   "Failures section")
    typer.echo(ui_hint())


def _conditions(given: list[str], extra: list[str]) -> list[str]:
    """Accept `--conditions c0 c3` (the seed's form) as well as c0,c3 and repeats."""
    names: list[str] = []
    for item in [*given, *extra]:
        names.extend(part for part in item.replace(",", " ").split() if part)
    names = [n.lower() for n in names]
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        raise typer.BadParameter(f"unknown condition(s) {', '.join(unknown)}; use c0 and/or c3",
                                 param_hint="--conditions")
    return list(dict.fromkeys(names))


def register(app: typer.Typer) -> None:
    app.command("sweep", context_settings={"allow_extra_args": True,
                                           "ignore_unknown_options": False})(sweep)
