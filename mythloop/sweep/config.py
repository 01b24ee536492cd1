"""The sweep's configuration and its prompts file."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, field_validator

from mythloop.data import data_path
from mythloop.vocab import JUDGES, SIMULATED_JUDGES, Judge

__all__ = ["JUDGES", "Judge", "SweepConfig", "JudgeOptions", "SweepPrompt", "load_prompts",
           "replicate_seed"]

# Judge / JUDGES (who plays the model in learning turns) are defined in mythloop.vocab.
# Where shards and turns run, not what they compute: left out of the fingerprint, so a sweep
# started in-process resumes fanned out and back, and at any concurrency. `strict` only decides
# whether invalid skills stop it.
_PLACEMENT = {"shard_deployment", "shard_timeout", "concurrency", "task_per_turn",
              "parallel_shards", "strict"}


class JudgeOptions(BaseModel):
    """Options of the backend that plays the model in learning turns."""

    noise: float = Field(0.2, ge=0.0, le=1.0)
    """Simulated judge: probability that a verdict is flipped."""
    omit_rate: float = Field(0.05, ge=0.0, le=1.0)
    """Simulated judge: probability that a tag it should emit is left out."""
    invent_rate: float = Field(0.02, ge=0.0, le=1.0)
    """Simulated judge: probability of an extra tag naming an invented skill."""
    model: str | None = None
    """Model name for a real backend (each backend has its own default)."""
    command: str | None = None
    """Executable for a CLI backend."""


class SweepConfig(BaseModel):
    """Everything that defines a sweep; two runs with the same config and results dir resume."""

    conditions: list[Literal["c0", "c3", "c4"]] = ["c0", "c3"]
    """C0 = blend off (verdicts stored, not used); C3 = blend on; C4 = blend on with the
    agreement rule (demotes a skill only when it is credibly harmful; docs/blend.md)."""
    rounds: int = Field(6, ge=1, le=100)
    """Rounds of measure -> learn, numbered from 0."""
    replicates: int = Field(1, ge=1, le=50)
    """Independent repeats of each condition, each with its own seed and prompt order."""
    judge: Judge = "simulated"
    """simulated | oracle (no model, no account) | gemini | claude | codex | openai."""
    judge_options: JudgeOptions = Field(default_factory=JudgeOptions)
    pool: Path | None = None
    """Skill pool folder (default: the bundled fixtures/pool)."""
    prompts_file: Path | None = None
    """Prompts YAML (default: the bundled fixtures/prompts.yaml)."""
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

    @field_validator("conditions")
    @classmethod
    def _unique_conditions(cls, value: list[str]) -> list[str]:
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
        from mythloop.settings import get_settings

        return max(1, get_settings().llm_concurrency)

    def resolved_pool(self) -> Path:
        return (self.pool or data_path("fixtures", "pool")).expanduser().resolve()

    def resolved_prompts_file(self) -> Path:
        return (self.prompts_file or data_path("fixtures", "prompts.yaml")).expanduser().resolve()

    def fingerprint(self) -> str:
        """What must match for a rerun on the same results dir to resume it."""
        keep = self.model_dump(mode="json", exclude={"results_dir", "rounds", *_PLACEMENT})
        keep["pool"] = str(self.resolved_pool())
        keep["prompts_file"] = str(self.resolved_prompts_file())
        return hashlib.sha256(repr(sorted(keep.items())).encode()).hexdigest()[:16]


def default_results_dir(root: Path) -> Path:
    return root / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


class SweepPrompt(BaseModel):
    id: str
    prompt: str
    kind: Literal["trap", "normal", "null", "heldout"]
    expected_skill: str | None = None
    poisoned_twin: str | None = None
    paraphrase_of: str | None = None

    @property
    def learned(self) -> bool:
        """Held-out prompts are measured, never learned from."""
        return self.kind != "heldout"


_SECTIONS = ("in_distribution", "null_prompts", "heldout")


def load_prompts(path: Path) -> tuple[list[SweepPrompt], int]:
    """Read prompts.yaml -> (prompts in file order, the file's seed).

    Raises ValueError with one line naming the file and what is wrong with it.
    """
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read prompts file {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ValueError(f"prompts file {path} is not valid YAML{where}: {problem}") from None
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
    seed = data.get("seed", 42)
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
    kind = "trap" if row.get("trap_for") else "normal"
    return SweepPrompt(id=row["id"], prompt=row["prompt"], kind=kind,
                       expected_skill=row.get("expected_skill"),
                       poisoned_twin=row.get("trap_for"))


def replicate_seed(base_seed: int, replicate: int) -> int:
    """A stable per-replicate seed, the same for both conditions (paired comparison)."""
    digest = hashlib.sha256(f"{base_seed}:{replicate}".encode()).hexdigest()
    return int(digest[:8], 16)
