"""`mythloop sweep`: run the feedback-loop sweep flow from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer
from typer.core import TyperCommand

from mythloop.sweep.config import JudgeOptions, SweepConfig
from mythloop.vocab import CONDITION_HELP, CONDITIONS, JUDGES
from mythloop_app.commands.runtime import flow_runtime, resume_command, ui_hint
from mythloop_app.params import in_dir, in_file, model_ref, out_dir, seconds

# The options' defaults are the config models' (one place to change them).
_CONFIG = SweepConfig()
_JUDGE = JudgeOptions()

_POOL_FIX = "pass a folder of <name>/SKILL.md to --pool (or leave it out for the bundled pool)"
_PROMPTS_FIX = "pass --prompts FILE, a prompts YAML or a JSON list of rows"
_CONDITION_CHOICES = ", ".join(f"{c} ({what})" for c, what in CONDITION_HELP.items())


def sweep(
    conditions: list[str] = typer.Option(
        list(_CONFIG.conditions), "--conditions", "-c", metavar="CONDITIONS",
        help=f"Conditions to run: {_CONDITION_CHOICES}. Takes a list: "
             "`--conditions c0 c3`, `--conditions c0,c3` or repeat the option."),
    rounds: int = typer.Option(_CONFIG.rounds, min=1, help="Rounds of measure -> learn, numbered 1..N as the terminal, the report "
                                     "and the UI show them (round 1 measures before any learning)."),
    replicates: int = typer.Option(_CONFIG.replicates, min=1, help="Replicates per condition, each with its own "
                                                   "seed and prompt order."),
    judge: str = typer.Option(_CONFIG.judge, help="Who plays the model in learning turns: "
                              + " | ".join(JUDGES) + ". simulated/oracle need no account."),
    noise: list[float] = typer.Option([_JUDGE.noise], min=0.0, max=1.0, metavar="LEVELS",
                                      help="Simulated judge: probability a verdict is flipped. "
                                           "Takes a list: several levels (`--noise 0 0.2 0.4`) "
                                           "run a noise study: one sweep per level under the "
                                           "results dir, and a noise curve in its report."),
    omit_rate: float = typer.Option(_JUDGE.omit_rate, min=0.0, max=1.0,
                                    help="Simulated judge: probability a tag is left out."),
    invent_rate: float = typer.Option(_JUDGE.invent_rate, min=0.0, max=1.0,
                                      help="Simulated judge: rate of invented skill names."),
    judge_persuade: float = typer.Option(
        _JUDGE.persuade, "--judge-persuade", min=0.0, max=1.0, metavar="P",
        help="Simulated judge, threat model: probability it follows an instruction to the "
             "judge in a catalog skill's description (that skill reported HELPFUL whenever "
             "shown; docs/blend.md, \"A judge a skill can persuade\"). Default 0: off."),
    judge_persuade_others: bool = typer.Option(
        False, "--judge-persuade-others",
        help="With --judge-persuade: a persuaded judge also reports every other skill of that "
             "catalog HARMFUL where the injection asks for it (the variant that breaks C4)."),
    model: str | None = typer.Option(None, help="Model for a real judge backend."),
    pool: Path | None = typer.Option(None, parser=in_dir("skill pool", _POOL_FIX),
                                     metavar="DIR",
                                     help="Skill pool folder (default: bundled pool)."),
    prompts: Path | None = typer.Option(None, "--prompts", metavar="FILE",
                                        parser=in_file("prompts file", _PROMPTS_FIX),
                                        help="Prompts YAML (default: bundled prompts.yaml), or "
                                             'a JSON list of {"id", "text", "expected"} rows '
                                             "(a benchmark's labelled queries, all learned "
                                             "from)."),
    held_out: Path | None = typer.Option(
        None, "--held-out", metavar="FILE", parser=in_file("held-out prompts file",
                                                           _PROMPTS_FIX.replace("--prompts",
                                                                                "--held-out")),
        help="Extra held-out prompts (JSON rows as --prompts, or YAML): measured every round, "
             "never learned from."),
    embedder: str | None = typer.Option(None, parser=model_ref, metavar="DIR|NAME",
                                        help="Sentence-transformers model folder or name."),
    turn_timeout: float | None = typer.Option(None, parser=seconds("turn timeout"),
                                              metavar="SECONDS",
                                              help="Seconds per learning turn."),
    seed: int | None = typer.Option(None, help="Base seed (default: the prompts file's)."),
    results_dir: Path | None = typer.Option(
        None, parser=out_dir("results dir", "pass another --results-dir"), metavar="DIR", help="Where results go (default: .mythloop/results/<UTC stamp>). "
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
        help="With --cold-skills: add those skills to the pool only at this round, 2..N "
             "(numbered from 1 as the terminal, the report and the UI number rounds: 2 adds "
             "them after one round of learning; its file is round_1.jsonl), learning from "
             "their prompts from then on."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs."),
) -> None:
    """Run sweep conditions x replicates x rounds of measure -> learn, then the analysis.

    Writes per-round JSONL, turn logs, raw model texts, metrics.json, report.md and plots
    into the results dir, and prints where the report is.
    """
    from mythloop.sweep.study import normalise_levels

    levels = normalise_levels(noise)
    chosen = _conditions(conditions)
    if len(levels) > 1 and judge != "simulated":
        _fail(f"several --noise levels need --judge simulated (judge {judge!r} has no noise "
              "setting)")
    if judge not in JUDGES:
        _fail(f"unknown judge {judge!r}: choose one of {', '.join(JUDGES)} (--judge)")
    if judge_persuade > 0 and judge != "simulated":
        _fail(f"--judge-persuade needs --judge simulated (judge {judge!r} is not simulated)")
    if judge_persuade_others and not judge_persuade > 0:
        _fail("--judge-persuade-others needs --judge-persuade P with P above 0 (a judge that is "
              "never persuaded condemns nothing)")
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
            judge_options=JudgeOptions(noise=noise[0] if len(levels) == 1 else levels[0],
                                       omit_rate=omit_rate, invent_rate=invent_rate,
                                       persuade=judge_persuade,
                                       persuade_others=judge_persuade_others, model=model),
            pool=pool, prompts_file=prompts, heldout_file=held_out, embedder=embedder, turn_timeout=turn_timeout,
            seed=seed, results_dir=results_dir.resolve(),
            shard_deployment=shard_deployment, strict=strict, force=force,
            concurrency=concurrency, task_per_turn=task_per_turn,
            parallel_shards=parallel_shards, cold_skills=cold_fraction,
            cold_skills_file=cold_file,
            # the config counts rounds from 0, as the round files do
            add_skills_at=None if add_skills_at is None else add_skills_at - 1)
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
    if add_at is not None and add_at < 2:
        _fail(f"--add-skills-at {add_at} is not a later round: give a round >= 2 (rounds are "
              "numbered from 1; round 1 measures before any learning"
              + ("; a sweep started with --add-skills-at 1 when rounds were numbered from 0 "
                 "resumes with --add-skills-at 2)" if add_at == 1 else ")"))
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


def _conditions(given: list[str]) -> list[str]:
    """Accept `--conditions c0 c3` (the seed's form) as well as c0,c3 and repeats."""
    names: list[str] = []
    for item in given:
        names.extend(part for part in item.replace(",", " ").split() if part)
    names = [n.lower() for n in names]
    unknown = [n for n in names if n not in CONDITIONS]
    if unknown:
        _fail(f"unknown condition(s) {', '.join(unknown)}: use {', '.join(CONDITIONS[:-1])} "
              f"and/or {CONDITIONS[-1]} (--conditions)")
    return list(dict.fromkeys(names))


class _ListOptions(TyperCommand):
    """`--conditions c0 c3` and `--noise 0 0.2 0.4`: the words after a list option (up to
    the next option) are its values, as if the option were repeated. Any other word that no
    option asked for is refused (`sweep c4`, `--rounds 2 4`), never read as a condition or a
    noise level."""

    LISTS = {"--conditions": str, "-c": str, "--noise": float}

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        takes_value = {opt for param in self.params if not getattr(param, "is_flag", True)
                       for opt in getattr(param, "opts", [])}
        out: list[str] = []
        i = 0
        while i < len(args):
            word = args[i]
            out.append(word)
            i += 1
            if word == "--":
                out += args[i:]
                break
            if word in self.LISTS and i < len(args):
                out.append(args[i])  # its first value, whatever it is
                i += 1
                while i < len(args) and self._value_of(word, args[i]):
                    out += [word, args[i]]
                    i += 1
            elif word in takes_value and i < len(args):
                out.append(args[i])
                i += 1
        return super().parse_args(ctx, out)

    def _value_of(self, option: str, word: str) -> bool:
        if self.LISTS[option] is float:
            try:
                float(word)
            except ValueError:
                return False
            return True
        return not word.startswith("-")


def register(app: typer.Typer) -> None:
    app.command("sweep", cls=_ListOptions)(sweep)
