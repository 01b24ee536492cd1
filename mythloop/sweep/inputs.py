"""Check a sweep's inputs before anything runs: pool, prompts file and results dir.

`check_inputs(config)` reads the pool and the prompts file and looks at the results dir, with
no Prefect, no embedding model and no writes, and raises `InputError` (a ValueError whose
message is one line: what is wrong and what to do). The CLI calls it before a Prefect server
starts; the sweep flow calls it again before it writes anything, so a sweep started from the
Prefect UI fails the same way and leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mythloop.skills.catalog import Catalog, load_catalog
from mythloop.sweep.config import (
    SweepConfig,
    SweepPrompt,
    load_sweep_prompts,
    ranking_settings,
    resolve_cold_skills,
)
from mythloop.sweep.injected import read_injected
from mythloop.sweep.records import SweepRecord, SweepRecordError, read_sweep_record

__all__ = ["CheckedInputs", "InputError", "check_inputs", "judge_label", "one_line"]


class InputError(ValueError):
    """A sweep input that cannot work; the message is one line."""


def one_line(text: object) -> str:
    """The message with its whitespace (newlines included) collapsed."""
    return " ".join(str(text).split())


@dataclass(frozen=True)
class CheckedInputs:
    """What check_inputs read: the valid skills (and the invalid ones), the prompts, the seed."""

    catalog: Catalog
    prompts: list[SweepPrompt]
    file_seed: int
    cold_skills: tuple[str, ...] = ()
    """The skills held back (--cold-skills), sorted."""
    injected: dict[str, list[str]] | None = None
    """The pool's injected skills and their targets (`<pool>/injected.yaml`), or None."""

    def catalog_issues(self) -> list[dict[str, str]]:
        """The invalid SKILL.md files left out of the pool, as sweep.json records them."""
        return [{"file": str(i.path), "problem": i.reason} for i in self.catalog.issues]


def check_inputs(config: SweepConfig) -> CheckedInputs:
    """Validate the sweep's pool, prompts file and results dir; raise InputError on the first
    problem. Invalid SKILL.md files among valid ones are an error only with config.strict."""
    path = config.resolved_prompts_file()
    _check_prompts_file(path, "prompts file", "--prompts FILE (a YAML file like "
                        "fixtures/prompts.yaml)")
    heldout = config.resolved_heldout_file()
    if heldout is not None:
        _check_prompts_file(heldout, "held-out file", '--held-out FILE (a JSON list of {"id", '
                            '"text", "expected"} rows, or YAML)')
    catalog = _check_pool(config)
    try:
        prompts, file_seed = load_sweep_prompts(config)
    except ValueError as exc:
        raise InputError(one_line(exc)) from None
    _check_prompts_against_pool(prompts, catalog, path, config.resolved_pool())
    cold = _check_cold_skills(config, catalog, file_seed)
    try:
        injected = read_injected(config.resolved_pool(), set(catalog.names()))
    except ValueError as exc:
        raise InputError(one_line(exc)) from None
    _check_results_dir(config)
    return CheckedInputs(catalog, prompts, file_seed, tuple(cold), injected or None)


def _check_cold_skills(config: SweepConfig, catalog: Catalog, file_seed: int) -> list[str]:
    """--cold-skills / --add-skills-at against the pool (config.resolve_cold_skills)."""
    path = config.cold_skills_file
    if path is not None and not path.expanduser().is_file():
        raise InputError(f"cold-skills file {path.expanduser().resolve()} does not exist: pass "
                         "--cold-skills FRACTION (0 < F < 1) or a file naming one skill a line")
    seed = config.seed if config.seed is not None else file_seed
    try:
        return resolve_cold_skills(config, catalog.names(), seed)
    except ValueError as exc:
        raise InputError(one_line(exc)) from None


MAX_PROMPTS_BYTES = 16 * 1024 * 1024
"""The largest prompts (or held-out) file a sweep reads: the bundled one is ~20 KB and a
benchmark's labelled queries a few MB; a bigger file is refused before it is parsed."""


def _check_prompts_file(path: Path, what: str, how: str) -> None:
    """A prompts file that exists, is a file, can be read and is at most MAX_PROMPTS_BYTES,
    read in chunks (a FIFO or a file growing under us is capped too, whatever stat says)."""
    if path.is_dir():
        raise InputError(f"{what} {path} is a folder, not a file: pass {how}")
    if not path.exists():
        raise InputError(f"{what} {path} does not exist: pass {how}")
    size = 0
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 20):
                size += len(chunk)
                if size > MAX_PROMPTS_BYTES:
                    raise InputError(f"{what} {path} is larger than "
                                     f"{MAX_PROMPTS_BYTES // (1 << 20)} MB, too big for a "
                                     f"prompts file: pass {how}")
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {(exc.strerror or str(exc)).lower()}; "
                         f"pass {how}") from None


def _check_pool(config: SweepConfig) -> Catalog:
    pool = config.resolved_pool()
    if not pool.is_dir():
        what = "is a file, not a folder" if pool.exists() else "does not exist"
        raise InputError(f"skill pool {pool} {what}: pass --pool DIR holding "
                         "<name>/SKILL.md folders")
    catalog = load_catalog(pool)
    issues = catalog.issues
    if not catalog.skills:
        if issues:
            detail = (f"all {len(issues)} SKILL.md files are invalid (first: "
                      f"{one_line(issues[0])})")
        else:
            detail = "it holds no <name>/SKILL.md file"
        raise InputError(f"no valid skill in pool {pool}: {detail}; fix them or pass "
                         "another --pool")
    if config.strict and issues:
        listed = "; ".join(one_line(issue) for issue in issues)
        raise InputError(f"{len(issues)} invalid SKILL.md in pool {pool} (--strict): {listed}; "
                         "fix them or run without --strict to leave them out")
    return catalog


def _check_prompts_against_pool(prompts: list[SweepPrompt], catalog: Catalog, path: Path,
                                pool: Path) -> None:
    """Every skill a prompt names must be a valid skill of the pool (else it scores a miss)."""
    names = set(catalog.names())
    ids = {p.id for p in prompts}
    for prompt in prompts:
        for field, skill in (("expected_skill", prompt.expected_skill),
                             ("trap_for", prompt.poisoned_twin)):
            if skill and skill not in names:
                invalid = next((i for i in catalog.issues if i.path.parent.name == skill), None)
                why = (f"its SKILL.md is invalid ({one_line(invalid.reason)})" if invalid
                       else "no such skill")
                where = prompt.source or str(path)
                raise InputError(
                    f"prompt {prompt.id!r} in {where} has {field} {skill!r}, which is not a "
                    f"valid skill of pool {pool} ({why}); fix the prompts file or --pool")
        if prompt.paraphrase_of and prompt.paraphrase_of not in ids:
            raise InputError(f"prompt {prompt.id!r} in {path} is a paraphrase_of "
                             f"{prompt.paraphrase_of!r}, which is not a prompt of that file")


def _check_add_skills_at(results_dir: Path, meta: SweepRecord, config: SweepConfig) -> None:
    """A sweep that differs only by one in --add-skills-at: the option counted rounds from 0
    before it counted them from 1, so the resume command printed by a sweep from then asks
    for the round before. Say which number resumes it."""
    index = meta.add_skills_at
    if index is None or config.add_skills_at is None or config.add_skills_at + 1 != index:
        return
    if config.model_copy(update={"add_skills_at": index}).fingerprint() != meta.fingerprint:
        return
    raise InputError(
        f"{results_dir} holds this sweep with its cold skills added at round {index + 1} "
        f"(`--add-skills-at {index + 1}`; `--add-skills-at {index}` before rounds were "
        f"numbered from 1): rerun with --add-skills-at {index + 1} to resume it")


def _check_results_dir(config: SweepConfig) -> None:
    """A given results dir must be a folder that is empty, new, or this same sweep's."""
    if config.results_dir is None:
        return  # a new <UTC stamp> folder
    results_dir = config.results_dir.expanduser().resolve()
    if results_dir.exists() and not results_dir.is_dir():
        raise InputError(f"results dir {results_dir} is a file: pass a folder to --results-dir")
    meta_path = results_dir / "sweep.json"
    if not meta_path.exists():
        other = sorted(p.name for p in results_dir.iterdir()) if results_dir.is_dir() else []
        if other and not config.force:
            shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3
                                            else "")
            raise InputError(f"results dir {results_dir} holds files that are not a sweep's "
                             f"({shown}); choose an empty or new --results-dir, or pass "
                             "--force to write into it")
        return
    try:
        meta = read_sweep_record(meta_path)
    except SweepRecordError as exc:
        raise InputError(f"{one_line(exc)}: choose another --results-dir") from None
    if not meta.fingerprint:
        raise InputError(f"{results_dir} holds a sweep.json that mythloop's sweep did not write "
                         "(no fingerprint); choose another --results-dir")
    if meta.fingerprint != config.fingerprint():
        _check_add_skills_at(results_dir, meta, config)
        ran, now = meta.ranking_settings, ranking_settings()
        recorded = "ranking_settings" in meta.model_fields_set or not now  # (older sweeps)
        if ran != now and recorded:
            said = ", ".join(f"{name} was {_shown(ran.get(name))}, is {_shown(now.get(name))} "
                             "now" for name in sorted(set(ran) | set(now))
                             if ran.get(name) != now.get(name))
            raise InputError(
                f"{results_dir} holds a sweep that ran under other ranking settings ({said}); "
                "set them as they were to resume it, or choose another --results-dir")
        raise InputError(
            f"{results_dir} holds a different sweep (other conditions, judge, pool, prompts, "
            "seed or MYTHLOOP_* ranking settings); choose another --results-dir, or rerun with "
            "that sweep's settings to resume it")


def _shown(value: object) -> str:
    return "the default" if value is None else str(value)


def judge_label(config: SweepConfig, levels: list[float] | None = None) -> str:
    """Which judge played the model, said plainly (simulated and oracle are not models);
    `levels`: a noise study's levels, named instead of the config's one noise."""
    options = config.judge_options
    if config.judge == "simulated":
        noise = (f"noise levels {', '.join(f'{x:g}' for x in levels)}" if levels
                 else f"noise {options.noise:g}")
        attack = (f"; persuaded by an injected description with probability "
                  f"{options.persuade:g}{' (others reported harmful)' if options.persuade_others else ''}"
                  if options.persuade > 0 else "")
        return (f"simulated (no model: verdicts from a simulated judge; {noise}, "
                f"omit {options.omit_rate:g}, invent {options.invent_rate:g}{attack})")
    if config.judge == "oracle":
        return ("oracle (no model: verdicts from an oracle that knows each prompt's expected "
                "skill)")
    return f"{config.judge} (a real model: {options.model or 'the backend default'})"
