"""`mythloop sweep`: run the feedback-loop sweep flow from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer

from mythloop.sweep.config import JudgeOptions, SweepConfig
from mythloop.vocab import CONDITION_HELP, CONDITIONS, JUDGES
from mythloop_app.commands.runtime import flow_runtime, resume_command, ui_hint

# The options' defaults are the config models' (one place to change them).
_CONFIG = SweepConfig()
_JUDGE = JudgeOptions()

_CONDITION_CHOICES = ", ".join(f"{c} ({what})" for c, what in CONDITION_HELP.items())


def sweep(
    ctx: typer.Context,
    conditions: list[str] = typer.Option(
        list(_CONFIG.conditions), "--conditions", "-c",
        help=f"Conditions to run: {_CONDITION_CHOICES}. "
             "`--conditions c0 c3`, `--conditions c0,c3` or repeat the option."),
    rounds: int = typer.Option(_CONFIG.rounds, min=1, help="Rounds of measure -> learn (R0..R{n-1})."),
    replicates: int = typer.Option(_CONFIG.replicates, min=1, help="Replicates per condition, each with its own "
                                                   "seed and prompt order."),
    judge: str = typer.Option(_CONFIG.judge, help="Who plays the model in learning turns: "
                              + " | ".join(JUDGES) + ". simulated/oracle need no account."),
    noise: float = typer.Option(_JUDGE.noise, min=0.0, max=1.0,
                                help="Simulated judge: probability a verdict is flipped. "
                                     "Several levels (`--noise 0 0.2 0.4`) run a noise study: "
                                     "one sweep per level under the results dir, and a noise "
                                     "curve in its report."),
    omit_rate: float = typer.Option(_JUDGE.omit_rate, min=0.0, max=1.0,
                                    help="Simulated judge: probability a tag is left out."),
    invent_rate: float = typer.Option(_JUDGE.invent_rate, min=0.0, max=1.0,
                                      help="Simulated judge: rate of invented skill names."),
    judge_persuade: float = typer.Option(
        _JUDGE.persuade, "--judge-persuade", min=0.0, max=1.0, metavar="P",
        help="Simulated judge, threat model: probability it follows an instruction to the "
             "judge in a catalog skill's description (that skill reported HELPFUL whenever "
             "shown; docs/blend.md, \"A judge a skill can persuade\"). Default 0: off."),
    model: str | None = typer.Option(None, help="Model for a real judge backend."),
    pool: Path | None = typer.Option(None, help="Skill pool folder (default: bundled pool)."),
    prompts: Path | None = typer.Option(None, "--prompts",
                                        help="Prompts YAML (default: bundled prompts.yaml), or "
                                             'a JSON list of {"id", "text", "expected"} rows '
                                             "(a benchmark's labelled queries, all learned "
                                             "from)."),
    held_out: Path | None = typer.Option(
        None, "--held-out",
        help="Extra held-out prompts (JSON rows as --prompts, or YAML): measured every round, "
             "never learned from."),
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
    strict: bool = typer.Option(_CONFIG.strict, "--strict",
                                help="Stop when the pool holds an invalid SKILL.md (default: "
                                     "leave it out and name it on stderr, in sweep.json and in "
                                     "the report's data issues)."),
    force: bool = typer.Option(_CONFIG.force, "--force",
                               help="Write into a --results-dir that holds files that are not "
                                    "a sweep's (default: refuse it)."),
    concurrency: int | None = typer.Option(
        None, min=1, max=256,
        help="Learning turns of a round in flight at once, each its own task run (default: "
             "MYTHLOOP_LLM_CONCURRENCY, 4). Real-model turns also wait for a slot of the "
             "server's global `llm` limit when one exists. The results do not depend on it."),
    task_per_turn: bool = typer.Option(
        _CONFIG.task_per_turn, "--task-per-turn",
        help="One task run per learning turn for any judge (simulated and oracle judges "
             "otherwise learn a round in one `learn` task)."),
    parallel_shards: int = typer.Option(
        _CONFIG.parallel_shards, min=1, max=64,
        help="Condition x replicate runs side by side in this process, each in its own sandbox."),
    cold_skills: str | None = typer.Option(
        None, "--cold-skills", metavar="FRACTION|FILE",
        help="Hold back skills: a fraction (0 < F < 1) chosen by a stable hash of the name and "
             "the seed, or a file naming them one a line. Their prompts are never learned "
             "from; the report splits held-out metrics into warm and cold skills."),
    add_skills_at: int | None = typer.Option(
        None, "--add-skills-at", metavar="ROUND",
        help="With --cold-skills: add those skills to the pool only at this round (numbered "
             "from 0, as round_<r>.jsonl), learning from their prompts from then on."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs."),
) -> None:
    """Run sweep conditions x replicates x rounds of measure -> learn, then the analysis.

    Writes per-round JSONL, turn logs, raw model texts, metrics.json, report.md and plots
    into the results dir, and prints where the report is.
    """
    if results_dir is not None:  # the folder given: answered before the sweep modules load
        from mythloop.checks import dir_problem

        problem = dir_problem(results_dir, "results dir")
        if problem:  # e.g. under /proc, or under a file
            _fail(f"{problem}; pass another --results-dir")
    levels, names = _split_extras(noise, ctx.args)
    chosen = _conditions(conditions, names)
    if len(levels) > 1 and judge != "simulated":
        _fail(f"several --noise levels need --judge simulated (judge {judge!r} has no noise "
              "setting)")
    if judge not in JUDGES:
        _fail(f"unknown judge {judge!r}: choose one of {', '.join(JUDGES)} (--judge)")
    if judge_persuade > 0 and judge != "simulated":
        _fail(f"--judge-persuade needs --judge simulated (judge {judge!r} is not simulated)")
    cold_fraction, cold_file = _cold_skills(cold_skills, add_skills_at)
    if shard_deployment is None:  # sharded, the workers' machines call the model
        from mythloop.llm.preflight import backend_problem

        problem = backend_problem(judge)  # a CLI on PATH that answers, an endpoint that does
        if problem:
            _fail(f"judge {judge!r} cannot work here: {problem} (--judge simulated needs no "
                  "model)")
    from pydantic import ValidationError

    from mythloop.settings import get_settings
    from mythloop.sweep.config import default_results_dir
    from mythloop.sweep.inputs import check_inputs, judge_label, one_line

    # Chosen here, not in the flow, so the Ctrl-C line can name it for the rerun.
    results_dir = results_dir or default_results_dir(get_settings().resolved_results_dir)

    try:
        config = SweepConfig(
            conditions=chosen, rounds=rounds, replicates=replicates, judge=judge,
            judge_options=JudgeOptions(noise=noise if len(levels) == 1 else levels[0],
                                       omit_rate=omit_rate, invent_rate=invent_rate,
                                       persuade=judge_persuade, model=model),
            pool=pool, prompts_file=prompts, heldout_file=held_out, embedder=embedder, turn_timeout=turn_timeout,
            seed=seed, results_dir=results_dir.resolve(),
            shard_deployment=shard_deployment, strict=strict, force=force,
            concurrency=concurrency, task_per_turn=task_per_turn,
            parallel_shards=parallel_shards, cold_skills=cold_fraction,
            cold_skills_file=cold_file, add_skills_at=add_skills_at)
    except ValidationError as exc:
        from mythloop.checks import plain_errors

        _fail(plain_errors(exc, {"prompts_file": "--prompts", "heldout_file": "--held-out"}))
    # Pool, prompts and results dir are checked here, before a Prefect server starts.
    try:
        if len(levels) > 1:  # a noise study: D holds the study, each level its own sweep
            from mythloop.sweep.study import check_study_dir

            checked = check_inputs(config.model_copy(update={"results_dir": None}))
            check_study_dir(config)
        else:
            checked = check_inputs(config)
    except ValueError as exc:
        _fail(one_line(exc))
    from mythloop.checks import dir_problem

    problem = dir_problem(results_dir.resolve(), "results dir")
    if problem:  # e.g. under /proc, or under a file: one line now, not tracebacks later
        _fail(f"{problem}; pass another --results-dir")
    for issue in checked.catalog.issues:
        typer.echo(f"warning: invalid skill left out of the pool: {one_line(issue)}", err=True)
    for warning in checked.catalog.warnings:
        typer.echo(f"warning: skill kept: {one_line(warning)}", err=True)
    resume = resume_command(add={"--results-dir": str(config.results_dir)})
    from mythloop.llm.errors import BackendError
    from mythloop.sweep.failing import SweepFailing

    # A failed turn is said by its `turn failed` line, a stop by the one line below.
    with flow_runtime(verbose=verbose, resume=resume, explained=(SweepFailing, BackendError)):
        from mythloop_flows.feedback_loop import sweep as sweep_flow

        try:
            result = sweep_flow(config, noise_levels=levels if len(levels) > 1 else None)
        except ValueError as exc:
            from mythloop.procs import STOPPING

            if STOPPING.is_set():  # Prefect's engine, cut by the Ctrl-C ("Task run is not
                raise KeyboardInterrupt from None  # set"): the stop's one line says it
            _fail(one_line(exc))
        except SweepFailing as exc:  # the flow run ended Failed; no night was recorded
            typer.echo(f"error: the sweep stopped: {one_line(exc)}; fix that, then rerun the "
                       f"same command to resume: {resume}", err=True)
            raise typer.Exit(1) from None
    typer.echo(f"results: {result.results_dir}")
    typer.echo(f"report:  {result.report}")
    if result.failed_turns:
        typer.echo(f"note: {result.failed_turns} learning turns failed; see the report's "
                   "Failures section")
    if checked.catalog.issues:
        typer.echo(f"note: {len(checked.catalog.issues)} invalid SKILL.md left out of the pool; "
                   "listed in sweep.json and the report's Data issues (--strict stops on them)")
    typer.echo(f"judge:   {judge_label(config, levels if len(levels) > 1 else None)}")
    typer.echo(ui_hint())


def _fail(message: str) -> NoReturn:
    """One clear error line on stderr, exit code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _cold_skills(value: str | None, add_at: int | None) -> tuple[float | None, Path | None]:
    """--cold-skills as (fraction, None) or (None, file); --add-skills-at checked too."""
    if add_at is not None and add_at < 1:
        _fail(f"--add-skills-at {add_at} is not a later round: give a round >= 1 (rounds are "
              "numbered from 0)")
    if value is None:
        if add_at is not None:
            _fail("--add-skills-at needs --cold-skills (the skills it adds)")
        return None, None
    try:
        fraction = float(value)
    except ValueError:
        return None, Path(value)
    if not 0.0 < fraction < 1.0:
        _fail(f"--cold-skills {value} is outside 0..1 (exclusive): give a fraction such as "
              "0.2, or a file naming the skills one a line")
    return fraction, None


def _split_extras(noise: float, extra: list[str]) -> tuple[list[float], list[str]]:
    """`--noise 0 0.2 0.4` leaves 0.2 and 0.4 among the extra args: numbers are noise
    levels, the rest condition names. Returns (distinct sorted levels, other args)."""
    levels, names = [noise], []
    for item in extra:
        try:
            value = float(item)
        except ValueError:
            names.append(item)
            continue
        if not 0.0 <= value <= 1.0:
            _fail(f"noise level {item} is outside 0..1 (--noise)")
        levels.append(value)
    from mythloop.sweep.study import normalise_levels

    return normalise_levels(levels), names


def _conditions(given: list[str], extra: list[str]) -> list[str]:
    """Accept `--conditions c0 c3` (the seed's form) as well as c0,c3 and repeats."""
    names: list[str] = []
    for item in [*given, *extra]:
        names.extend(part for part in item.replace(",", " ").split() if part)
    names = [n.lower() for n in names]
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        _fail(f"unknown condition(s) {', '.join(unknown)}: use {', '.join(CONDITIONS[:-1])} "
              f"and/or {CONDITIONS[-1]} (--conditions)")
    return list(dict.fromkeys(names))


def register(app: typer.Typer) -> None:
    app.command("sweep", context_settings={"allow_extra_args": True,
                                           "ignore_unknown_options": False})(sweep)
