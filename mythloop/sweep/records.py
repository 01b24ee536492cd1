"""The sweep's records: what a measurement writes (round_<r>.jsonl rows), what a learning turn
writes (turns.jsonl rows), and what the measure and learn steps hand the flow.

The JSON field names are those of docs/contracts.md ("Sweep results directory"); writers dump
these models and readers (the resume path, the analysis) validate rows with the same models.
Every row model keeps fields it does not know (`extra="allow"`), so a row written by a newer or
older mythloop reads back and is rewritten without losing a key; fields added later have
defaults, so older rows still load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_serializer

from mythloop.fileio import describe_invalid
from mythloop.vocab import Condition, PromptKind, TurnStatus

__all__ = ["AppliedVerdict", "CatalogEntry", "CatalogIssue", "MeasureResult", "MeasurementRow",
           "ShardOutcome", "SweepOutcome", "SweepRecord", "SweepRecordError", "TurnAnswer",
           "TurnRow", "read_sweep_record"]

SWEEP_FILE = "sweep.json"


class _Row(BaseModel):
    """A JSONL row: unknown keys are kept (and written back) as they are."""

    model_config = ConfigDict(extra="allow")


class CatalogEntry(BaseModel):
    """One skill of the top-k catalog shown to the model in a learning turn."""

    name: str
    description: str | None = ""
    tier: str | None = None


class MeasurementRow(_Row):
    """One ranked skill for one prompt in one round (a line of round_<r>.jsonl)."""

    round: int = 0
    cond: str = ""
    replicate: int = 0
    prompt_id: str
    prompt_kind: PromptKind | None = None
    expected_skill: str | None = None
    poisoned_twin: str | None = None
    rank: int
    skill_name: str
    tier: str | None = None
    score: float
    breakdown: dict[str, float] = Field(default_factory=dict)
    status: str | None = None
    helpful_count: int = 0
    harmful_count: int = 0
    streak: int = 0


class MeasureResult(BaseModel):
    """What `measure_round` hands the flow: the round's catalogs to learn from."""

    rows: int
    catalogs: dict[str, list[CatalogEntry]]
    in_distribution_hit_at_3: float | None = None
    # The headline metrics the terminal's round line shows (None: no such prompts).
    in_distribution_hit_at_5: float | None = None
    trap_win_rate: float | None = None
    heldout_hit_at_1: float | None = None

    def round_line(self) -> str:
        """`in-distribution trap-win 0.95, hit@5 0.90, hit@3 0.90; held-out hit@1 0.40` (what
        was measured, each figure under its split: trap-win is over the trap prompts, which
        are in-distribution)."""
        splits = [(split, [f"{label} {v:.2f}" for label, v in figures if v is not None])
                  for split, figures in (
                      ("in-distribution", (("trap-win", self.trap_win_rate),
                                           ("hit@5", self.in_distribution_hit_at_5),
                                           ("hit@3", self.in_distribution_hit_at_3))),
                      ("held-out", (("hit@1", self.heldout_hit_at_1),)))]
        return "; ".join(f"{split} {', '.join(parts)}" for split, parts in splits if parts)


class TurnAnswer(BaseModel):
    """The model half of a learning turn (`ask_turn`): its reply, before any store write."""

    session_id: str
    text: str = ""
    elapsed_s: float | None = None
    backend: str | None = None
    simulated: bool = False
    model: str | None = None


class AppliedVerdict(_Row):
    """A verdict the turn applied to the store, with the tier of the skill it names."""

    name: str
    verdict: str
    tier: str | None = None


class TurnRow(_Row):
    """One learning turn (a line of turns.jsonl): what was shown, said and applied.

    `attempts` is written only for a turn that failed after its retries (it is left out of
    the row when None, as before records were models).
    """

    round: int
    cond: str = ""
    replicate: int = 0
    prompt_id: str
    prompt_kind: PromptKind | None = None
    expected_skill: str | None = None
    session_id: str | None = None
    status: TurnStatus
    error: str | None = None
    attempts: int | None = None
    elapsed_s: float | None = None
    backend: str | None = None
    simulated: bool = False
    model: str | None = None
    ranked_top5: list[str] = Field(default_factory=list)
    catalog_tiers: dict[str, str | None] = Field(default_factory=dict)
    tags: list[dict[str, Any]] = Field(default_factory=list)
    applied: list[AppliedVerdict] = Field(default_factory=list)
    off_catalog: list[str] = Field(default_factory=list)
    invented: list[str] = Field(default_factory=list)
    rejected: list[dict[str, Any]] = Field(default_factory=list)
    parse_failures: int = 0
    text_len: int = 0
    text_tail: str = ""
    stderr_head: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @model_serializer(mode="wrap")
    def _leave_out_unset_attempts(self, handler) -> dict[str, Any]:
        data = handler(self)
        if data.get("attempts", 0) is None:
            del data["attempts"]
        return data


class CatalogIssue(_Row):
    """An invalid SKILL.md the sweep left out of its pool (sweep.json `catalog_issues`)."""

    file: str
    problem: str


class SweepRecordError(ValueError):
    """A sweep.json that is missing, not JSON, or not a sweep's record (one line)."""


class SweepRecord(_Row):
    """`<results_dir>/sweep.json`: the sweep's config, fingerprint and metadata.

    Every field has a default, so a sweep.json written by an older mythloop (fewer keys,
    `replicate_seeds` as a list) loads; keys this model does not name are kept. `to_json()`
    writes back exactly the keys that were read or given, so a read-modify-write (the
    finish time) leaves the file's shape as it was. A noise study's D/sweep.json (`study`)
    reads as one too; `is_study` tells them apart.
    """

    sweep_id: str | None = None
    fingerprint: str | None = None
    config: dict[str, Any] | None = None
    """The whole SweepConfig dump (a dict: a config from an older mythloop still reads)."""
    conditions: list[Condition] = Field(default_factory=list)
    rounds: int | None = Field(None, ge=0)
    replicates: int | None = Field(None, ge=0)
    judge: str | None = None
    simulated: bool | None = None
    """None: the file does not say (sweeps from before the key)."""
    judge_options: dict[str, Any] = Field(default_factory=dict)
    model: str | None = None
    embedder: str | None = None
    pool: str | None = None
    prompts_file: str | None = None
    prompts: int | None = None
    heldout_file: str | None = None
    catalog_issues: list[CatalogIssue] = Field(default_factory=list)
    seed: int | None = None
    replicate_seeds: dict[str, int] | list[int] = Field(default_factory=dict)
    """Replicate number (a string, as JSON keys are) -> seed; older files: a list, rep 1 first."""
    abstain_threshold: float | None = None
    injected: dict[str, list[str]] = Field(default_factory=dict)
    """The pool's injected skills and the skills each targets (`<pool>/injected.yaml`, read
    when the sweep started; empty for a pool without one)."""
    ranking_settings: dict[str, Any] = Field(default_factory=dict)
    """The MYTHLOOP_* ranking settings it ran with, where not their defaults (part of the
    fingerprint; mythloop.sweep.config.ranking_settings)."""
    started_utc: str | None = None
    finished_utc: str | None = None
    mythloop_version: str | None = None
    python: str | None = None
    study: str | None = None
    """Set (to "noise") only in a noise study's own sweep.json."""
    models: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    """C5: each condition x replicate's tuned embedding models by round ("c5-rep1" -> the
    records of its models.json: model id, path, pairs and their fingerprint, settings)."""
    cold_skills: list[str] = Field(default_factory=list)
    """Skills held back from learning (--cold-skills); the report splits held-out metrics
    into warm and cold skills when any."""
    add_skills_at: int | None = None
    """The round the cold skills joined the pool (--add-skills-at); None: in it throughout."""

    @property
    def is_study(self) -> bool:
        return self.study is not None

    def seeds_by_replicate(self) -> dict[str, int]:
        """`replicate_seeds` as a map whichever form the file holds."""
        seeds = self.replicate_seeds
        if isinstance(seeds, list):
            return {str(i): s for i, s in enumerate(seeds, start=1)}
        return dict(seeds)

    def to_json(self) -> dict[str, Any]:
        """The JSON object to write: the keys read or given (and any unknown ones kept)."""
        return self.model_dump(mode="json", exclude_unset=True)

    @classmethod
    def from_json(cls, data: Any, where: str = SWEEP_FILE) -> SweepRecord:
        """Validate a parsed sweep.json; SweepRecordError (one line) when it is not one."""
        if not isinstance(data, dict):
            raise SweepRecordError(f"{where} holds {type(data).__name__}, not a JSON object")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise SweepRecordError(f"{where} is not a sweep record: {describe_invalid(exc)}"
                                   ) from None


def read_sweep_record(results_dir: Path | str) -> SweepRecord:
    """Read `<results_dir>/sweep.json` (or that file itself) through `SweepRecord`;
    SweepRecordError with one line when it is missing, not JSON, or malformed."""
    path = Path(results_dir)
    if path.name != SWEEP_FILE or path.is_dir():
        path = path / SWEEP_FILE
    if not path.is_file():
        raise SweepRecordError(f"no {SWEEP_FILE} in {path.parent}: not a sweep results dir")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SweepRecordError(f"{path} is not readable JSON ({' '.join(str(exc).split())})"
                               ) from None
    return SweepRecord.from_json(data, str(path))


class ShardOutcome(BaseModel):
    """What one condition x replicate of a sweep hands back: its sandbox and how it went."""

    condition: Condition
    replicate: int
    dir: str
    completed_rounds: list[int] = Field(default_factory=list)
    failed_turns: int = 0


class SweepOutcome(BaseModel):
    """What the `sweep` flow returns (and `mythloop sweep` prints): where the results and the
    report are, each shard's outcome, failed learning turns, and the regressions the night
    raised. A noise study also lists its levels and each level's own outcome."""

    results_dir: str
    report: str
    shards: list[ShardOutcome] = Field(default_factory=list)
    failed_turns: int = 0
    regressions: list[dict[str, Any]] = Field(default_factory=list)
    levels: list[float] | None = None
    level_results: list[SweepOutcome] = Field(default_factory=list)
