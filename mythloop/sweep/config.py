"""The sweep's configuration and its prompts file."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import yaml
from pydantic import BaseModel, Field, field_validator

from mythloop.data import data_path
from mythloop.settings import get_settings
from mythloop.vocab import (
    JUDGES,
    LEARNED_PROMPT_KINDS,
    SIMULATED_JUDGES,
    Condition,
    Judge,
    PromptKind,
)

__all__ = ["JUDGES", "Judge", "SweepConfig", "JudgeOptions", "SweepPrompt", "load_prompts",
           "load_heldout", "load_sweep_prompts", "replicate_seed", "cold_skill_names",
           "skill_hash_fraction", "read_skill_names", "resolve_cold_skills", "ranking_settings"]

# Judge / JUDGES (who plays the model in learning turns) are defined in mythloop.vocab.
# Where shards and turns run, not what they compute: left out of the fingerprint, so a sweep
# started in-process resumes fanned out and back, and at any concurrency. `strict` only decides
# whether invalid skills stop it.
_PLACEMENT = {"shard_deployment", "shard_timeout", "concurrency", "task_per_turn",
              "parallel_shards", "strict", "force"}

# The MYTHLOOP_* settings that change what a sweep ranks and learns (the blend's weights, C4's
# and C5's settings, the embedding model when --embedder is not given): in the fingerprint when
# set to other than their defaults, so a rerun under other settings does not resume, and mix
# with, a sweep that ran under these (sweeps run with the defaults resume as they were).
_RANKING_SETTINGS = ("embedder_model", "w_count", "w_context", "w_harm", "w_related",
                     "related_k", "c4_w_context", "c4_prototype", "c4_w_lexical", "c4_prior",
                     "c4_lexical_learned", "c4_explore_sigma", "c4_plausible_rank",
                     "c4_max_lift", "c5_epochs", "c5_batch_size",
                     "c5_learning_rate", "c5_max_seq_length", "c5_min_pairs",
                     "c5_hard_negatives", "c5_over_praised", "c5_gate_pairs",
                     "c5_continue")


def ranking_settings() -> dict[str, object]:
    """The ranking settings (`_RANKING_SETTINGS`) set to other than their defaults, by
    environment variable name."""
    settings = get_settings()
    fields = type(settings).model_fields
    changed = {}
    for name in _RANKING_SETTINGS:
        value = getattr(settings, name)
        if value != fields[name].default:
            alias = fields[name].validation_alias
            env = getattr(alias, "choices", [alias])[0] if alias is not None else name
            changed[str(env)] = value
    return changed


class JudgeOptions(BaseModel):
    """Options of the backend that plays the model in learning turns."""

    noise: float = Field(0.2, ge=0.0, le=1.0)
    """Simulated judge: probability that a verdict is flipped."""
    omit_rate: float = Field(0.05, ge=0.0, le=1.0)
    """Simulated judge: probability that a tag it should emit is left out."""
    invent_rate: float = Field(0.02, ge=0.0, le=1.0)
    """Simulated judge: probability of an extra tag naming an invented skill."""
    persuade: float = Field(0.0, ge=0.0, le=1.0)
    """Simulated judge, threat model: probability that it follows an instruction to the
    judge found in a catalog skill's description (the skill reported HELPFUL whenever shown;
    mythloop/llm/simulated.py). 0: off, every answer as before the setting existed."""
    persuade_others: bool = False
    """Simulated judge, with `persuade`: a persuaded judge also reports the catalog's other
    skills HARMFUL when the injection asks for it."""
    model: str | None = None
    """Model name for a real backend (each backend has its own default)."""
    command: str | None = None
    """Executable for a CLI backend."""


class SweepConfig(BaseModel):
    """Everything that defines a sweep; two runs with the same config and results dir resume."""

    conditions: list[Condition] = ["c0", "c3"]
    """C0 = blend off (verdicts stored, not used); C3 = blend on; C4 = blend on with the
    agreement rule (demotes a skill only when it is credibly harmful; docs/blend.md)."""
    rounds: int = Field(6, ge=1, le=100)
    """Rounds of measure -> learn. Indexed from 0 here and in the files (round_0.jsonl);
    people read them numbered from 1 (terminal, report, plots, UI task names, --add-skills-at:
    round_idx + 1)."""
    replicates: int = Field(1, ge=1, le=50)
    """Independent repeats of each condition, each with its own seed and prompt order."""
    judge: Judge = "simulated"
    """simulated | oracle (no model, no account) | gemini | claude | codex | openai."""
    judge_options: JudgeOptions = Field(default_factory=JudgeOptions)
    pool: Path | None = None
    """Skill pool folder (default: the bundled fixtures/pool)."""
    prompts_file: Path | None = None
    """Prompts YAML, or a JSON list of {id, text, expected} rows (a benchmark's labelled
    queries, all learned from); default: the bundled fixtures/prompts.yaml."""
    heldout_file: Path | None = None
    """Extra held-out prompts (YAML or JSON, same forms): measured every round, never learned
    from."""
    embedder: str | None = None
    """Sentence-transformers model path or name (default: settings / bundled MiniLM)."""
    measure_top_k: int = Field(10, ge=1)
    learn_top_k: int = Field(5, ge=1)
    turn_timeout: float | None = None
    """Seconds for one learning turn (default: settings.turn_timeout)."""
    results_dir: Path | None = None
    """Where everything is written (default: <state>/results/<UTC stamp>)."""
    seed: int | None = None
    """Base seed (default: the prompts file's seed)."""
    shard_deployment: str | None = None
    """Fan out: run each condition x replicate as a flow run of this deployment
    ("condition-run/condition-run") on a work pool's workers, which must see results_dir at
    the same path. None runs them in-process, one after another."""
    shard_timeout: float | None = Field(None, gt=0)
    """Fan out: seconds the sweep waits for all its shards before it cancels them and fails
    (default: no limit)."""
    strict: bool = False
    """Stop before the first round when the pool holds an invalid SKILL.md (default: leave it
    out, name it on stderr, in sweep.json and in the report's data issues)."""
    force: bool = False
    """Write into a results dir that holds files that are not a sweep's (default: refuse)."""
    concurrency: int | None = Field(None, ge=1, le=256)
    """Learning turns of a round in flight at once, each its own task run (default:
    settings.llm_concurrency, MYTHLOOP_LLM_CONCURRENCY). Tagged turns also wait for a slot of
    the server's global `llm` limit when one exists."""
    task_per_turn: bool = False
    """One task run per learning turn for any judge. By default a simulated or oracle judge
    learns a whole round in one `learn` task; a real model always gets one task per turn."""
    parallel_shards: int = Field(1, ge=1, le=64)
    """Condition x replicate runs (subflows) side by side in this process, each in its own
    sandbox (in-process sweeps only; a fanned-out sweep leaves this to the work pool)."""
    cold_skills: float | None = Field(None, gt=0.0, lt=1.0)
    """Hold back this fraction of the pool's skills, chosen by a stable hash of the name and
    the sweep's seed (`cold_skill_names`): the prompts whose expected skill is one of them
    are never learned from (docs/blend.md, "Cold skills")."""
    cold_skills_file: Path | None = None
    """Hold back the skills this file names (one per line; `#` starts a comment) instead."""
    add_skills_at: int | None = Field(None, ge=1)
    """With cold skills: they join the pool only at this round index (from 0, as the round
    files are; the CLI's `--add-skills-at N` counts from 1 and sets N - 1), and their prompts
    are learned from from then on."""

    @field_validator("conditions")
    @classmethod
    def _unique_conditions(cls, value: list[Condition]) -> list[Condition]:
        if not value:
            raise ValueError("at least one condition is needed")
        return list(dict.fromkeys(value))

    @property
    def simulated(self) -> bool:
        return self.judge in SIMULATED_JUDGES

    @property
    def per_turn_tasks(self) -> bool:
        """Whether each learning turn is its own task run (else one `learn` task per round)."""
        return self.task_per_turn or not self.simulated

    def resolved_concurrency(self) -> int:
        if self.concurrency is not None:
            return self.concurrency
        return max(1, get_settings().llm_concurrency)

    def resolved_pool(self) -> Path:
        return (self.pool or data_path("fixtures", "pool")).expanduser().resolve()

    def resolved_prompts_file(self) -> Path:
        return (self.prompts_file or data_path("fixtures", "prompts.yaml")).expanduser().resolve()

    def resolved_heldout_file(self) -> Path | None:
        return self.heldout_file.expanduser().resolve() if self.heldout_file else None

    def fingerprint(self) -> str:
        """What must match for a rerun on the same results dir to resume it."""
        keep = self.model_dump(mode="json", exclude={"results_dir", "rounds", *_PLACEMENT})
        keep["pool"] = str(self.resolved_pool())
        keep["prompts_file"] = str(self.resolved_prompts_file())
        judge = keep["judge_options"]
        for key, off in (("persuade", 0.0), ("persuade_others", False)):
            if judge.get(key) == off:
                judge.pop(key)  # sweeps from before the threat model resume as they were
        if self.heldout_file is None:
            keep.pop("heldout_file", None)  # sweeps from before the option resume as they were
        for key in ("cold_skills", "cold_skills_file", "add_skills_at"):
            if keep.get(key) is None:
                keep.pop(key, None)  # likewise
        if self.cold_skills_file is not None:
            keep["cold_skills_file"] = str(self.cold_skills_file.expanduser().resolve())
        else:
            keep["heldout_file"] = str(self.resolved_heldout_file())
        settings = ranking_settings()
        if settings:
            keep["ranking_settings"] = sorted(settings.items())
        return hashlib.sha256(repr(sorted(keep.items())).encode()).hexdigest()[:16]


def default_results_dir(root: Path) -> Path:
    return root / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


class SweepPrompt(BaseModel):
    id: str
    prompt: str
    kind: PromptKind
    expected_skill: str | None = None
    poisoned_twin: str | None = None
    paraphrase_of: str | None = None
    source: str | None = Field(None, exclude=True)
    """Where the prompt was read ("FILE row N"), for error messages."""

    @property
    def learned(self) -> bool:
        """Held-out prompts are measured, never learned from."""
        return self.kind in LEARNED_PROMPT_KINDS


_SECTIONS = ("in_distribution", "null_prompts", "heldout")


DEFAULT_SEED = 42


def _read_data(path: Path, what: str = "prompts file") -> object:
    """A prompts file's content: JSON for *.json, YAML otherwise (JSON is YAML too)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {what} {path}: {exc}") from None
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{what} {path} is not valid JSON (line {exc.lineno}): "
                             f"{exc.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"{what} {path} is not valid YAML{where}: {problem}") from None


def _row_list(path: Path, rows: list, kind: PromptKind, what: str) -> list[SweepPrompt]:
    """A benchmark's list of {"id", "text", "expected"} rows (also {id, prompt,
    expected_skill}), each a prompt of `kind`; a bad row is a one-line ValueError naming the
    file and the row."""
    out = []
    for number, row in enumerate(rows, start=1):
        where = f"{what} {path}: row {number}"
        if not isinstance(row, dict):
            raise ValueError(f"{where} must be a map with id, text and expected, not a "
                             f"{type(row).__name__}")
        rid = row.get("id")
        if isinstance(rid, int) and not isinstance(rid, bool):
            rid = str(rid)
        if not isinstance(rid, str) or not rid.strip():
            raise ValueError(f"{where} needs a non-empty string 'id'")
        where = f"{what} {path}: row {number} (id {rid!r})"
        text = row.get("text", row.get("prompt"))
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"{where} needs a non-empty string 'text'")
        expected = row.get("expected", row.get("expected_skill"))
        if expected is not None and (not isinstance(expected, str) or not expected.strip()):
            raise ValueError(f"{where}: 'expected' must be a skill name, not {expected!r}")
        out.append(SweepPrompt(id=rid, prompt=text, kind=kind, expected_skill=expected,
                               source=f"{what} {path} row {number}"))
    return out


def _no_duplicates(prompts: list[SweepPrompt], path: Path, what: str = "prompts file") -> None:
    seen: dict[str, SweepPrompt] = {}
    for prompt in prompts:
        if prompt.id in seen:
            first = seen[prompt.id]
            where = prompt.source or f"{what} {path}"
            raise ValueError(f"{where}: duplicate id {prompt.id!r} (first at "
                             f"{first.source or path})")
        seen[prompt.id] = prompt


def load_prompts(path: Path) -> tuple[list[SweepPrompt], int]:
    """Read a prompts file -> (prompts in file order, the file's seed).

    Two forms: the YAML map of sections (fixtures/prompts.yaml), or a list (JSON or YAML) of
    {"id", "text", "expected"} rows -- a benchmark's labelled queries, every one a normal,
    learned-from prompt, seed 42. Raises ValueError with one line naming the file (and the
    row) and what is wrong with it.
    """
    data = _read_data(path)
    if isinstance(data, list):
        rows_read = _row_list(path, data, "normal", "prompts file")
        if not rows_read:
            raise ValueError(f"prompts file {path} is an empty list: it needs "
                             '{"id", "text", "expected"} rows')
        _no_duplicates(rows_read, path)
        return rows_read, DEFAULT_SEED
    if data is None:
        raise ValueError(f"prompts file {path} is empty: it needs sections "
                         f"{', '.join(_SECTIONS)} of {{id, prompt}} entries")
    if not isinstance(data, dict):
        raise ValueError(f"prompts file {path} holds a {type(data).__name__}, not a map with "
                         f"sections {', '.join(_SECTIONS)}")
    prompts: list[SweepPrompt] = []
    for section in _SECTIONS:
        rows = data.get(section) or []
        if not isinstance(rows, list):
            raise ValueError(f"prompts file {path}: {section!r} must be a list of "
                             f"{{id, prompt}} entries, not a {type(rows).__name__}")
        for number, row in enumerate(rows, start=1):
            prompts.append(_prompt_row(path, section, number, row))
    ids = [p.id for p in prompts]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise ValueError(f"prompts file {path} repeats ids: {', '.join(duplicates)}")
    if not prompts:
        raise ValueError(f"prompts file {path} has no prompts: it needs sections "
                         f"{', '.join(_SECTIONS)} of {{id, prompt}} entries")
    seed = data.get("seed", DEFAULT_SEED)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"prompts file {path}: 'seed' must be an integer, not {seed!r}")
    return prompts, seed


def _prompt_row(path: Path, section: str, number: int, row: object) -> SweepPrompt:
    """One entry of a prompts-file section, or a one-line ValueError saying which is wrong."""
    where = f"prompts file {path}: {section} entry {number}"
    if not isinstance(row, dict):
        raise ValueError(f"{where} must be a map with id and prompt, not a {type(row).__name__}")
    for key in ("id", "prompt"):
        if not isinstance(row.get(key), str) or not row[key].strip():
            raise ValueError(f"{where} needs a non-empty string {key!r}")
    where = f"prompts file {path}: prompt {row['id']!r}"
    for key in ("expected_skill", "trap_for", "paraphrase_of"):
        if row.get(key) is not None and not isinstance(row[key], str):
            raise ValueError(f"{where}: {key!r} must be a skill or prompt name, not {row[key]!r}")
    if section == "null_prompts":
        return SweepPrompt(id=row["id"], prompt=row["prompt"], kind="null")
    if section == "heldout":
        return SweepPrompt(id=row["id"], prompt=row["prompt"], kind="heldout",
                           expected_skill=row.get("expected_skill"),
                           poisoned_twin=row.get("trap_for"),
                           paraphrase_of=row.get("paraphrase_of"))
    kind: PromptKind = "trap" if row.get("trap_for") else "normal"
    return SweepPrompt(id=row["id"], prompt=row["prompt"], kind=kind,
                       expected_skill=row.get("expected_skill"),
                       poisoned_twin=row.get("trap_for"))


def load_heldout(path: Path) -> list[SweepPrompt]:
    """Read a --held-out file: a list of {"id", "text", "expected"} rows (JSON or YAML), or a
    prompts map whose `heldout` section (and only that) is taken. Every prompt is kind
    `heldout`: measured every round, never learned from."""
    data = _read_data(path, "held-out file")
    if isinstance(data, dict):
        rows = data.get("heldout")
        if not isinstance(rows, list) or not rows:
            raise ValueError(f"held-out file {path} has no 'heldout' list: give a list of "
                             '{"id", "text", "expected"} rows or a map with a heldout section')
        prompts = [_prompt_row(path, "heldout", n, row).model_copy(
                       update={"source": f"held-out file {path}: heldout entry {n}"})
                   for n, row in enumerate(rows, start=1)]
    elif isinstance(data, list) and data:
        prompts = _row_list(path, data, "heldout", "held-out file")
    else:
        raise ValueError(f"held-out file {path} holds no prompts: give a list of "
                         '{"id", "text", "expected"} rows')
    _no_duplicates(prompts, path, "held-out file")
    return prompts


def load_sweep_prompts(config: SweepConfig) -> tuple[list[SweepPrompt], int]:
    """The sweep's prompts: the prompts file's, then the --held-out file's; ids unique across
    both. Raises ValueError (one line) on the first bad row."""
    path = config.resolved_prompts_file()
    prompts, seed = load_prompts(path)
    heldout_path = config.resolved_heldout_file()
    if heldout_path is not None:
        prompts = prompts + load_heldout(heldout_path)
        _no_duplicates(prompts, path)
    return prompts, seed


def replicate_seed(base_seed: int, replicate: int) -> int:
    """A stable per-replicate seed, the same for both conditions (paired comparison)."""
    digest = hashlib.sha256(f"{base_seed}:{replicate}".encode()).hexdigest()
    return int(digest[:8], 16)


def skill_hash_fraction(name: str, seed: int) -> float:
    """A skill's place in [0, 1): a stable hash of its name and the sweep's seed (the cold
    skills are those under the --cold-skills fraction)."""
    digest = hashlib.sha256(f"cold-skill:{seed}:{name}".encode()).hexdigest()
    return int(digest[:13], 16) / float(16 ** 13)


def cold_skill_names(names: list[str], fraction: float, seed: int) -> list[str]:
    """The skills whose hash falls under `fraction` (sorted): the same for every condition and
    replicate of a sweep, and for any pool order."""
    return sorted(n for n in names if skill_hash_fraction(n, seed) < fraction)


def read_skill_names(path: Path) -> list[str]:
    """A --cold-skills file: one skill name per line; blank lines and `#` comments skipped.
    Raises ValueError (one line) when it cannot be read or names nothing."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read cold-skills file {path}: {exc}") from None
    names = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    names = list(dict.fromkeys(n for n in names if n))
    if not names:
        raise ValueError(f"cold-skills file {path} names no skill: write one skill name a line")
    return names


def resolve_cold_skills(config: SweepConfig, names: list[str], seed: int) -> list[str]:
    """The sweep's cold skills among the pool's `names` (sorted; [] without the options).
    Raises ValueError (one line) for a file naming a skill the pool lacks, a fraction that
    selects no skill or every skill, or --add-skills-at without cold skills or past the
    last round."""
    if config.cold_skills is not None and config.cold_skills_file is not None:
        raise ValueError("give --cold-skills a fraction or a file, not both")
    if config.cold_skills_file is not None:
        path = config.cold_skills_file.expanduser().resolve()
        wanted = read_skill_names(path)
        unknown = [n for n in wanted if n not in set(names)]
        if unknown:
            raise ValueError(f"cold-skills file {path} names {', '.join(unknown[:5])}"
                             f"{' ...' if len(unknown) > 5 else ''}, not a valid skill of the "
                             "pool: fix the file or --pool")
        cold = sorted(wanted)
    elif config.cold_skills is not None:
        cold = cold_skill_names(names, config.cold_skills, seed)
        if not cold:
            raise ValueError(f"--cold-skills {config.cold_skills:g} selects none of the pool's "
                             f"{len(names)} skills: give a larger fraction")
    else:
        cold = []
    if cold and len(cold) == len(set(names)):
        raise ValueError(f"--cold-skills would hold back all {len(cold)} skills of the pool: "
                         "give a smaller fraction or fewer names")
    if config.add_skills_at is not None:
        if not cold:
            raise ValueError("--add-skills-at needs --cold-skills (the skills it adds)")
        if config.add_skills_at >= config.rounds:
            raise ValueError(f"--add-skills-at {config.add_skills_at + 1} is past the last "
                             f"round ({config.rounds}, rounds numbered from 1): give 2.."
                             f"{config.rounds} or more --rounds")
    return cold
