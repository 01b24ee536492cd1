"""The sweep's records: what a measurement writes (round_<r>.jsonl rows), what a learning turn
writes (turns.jsonl rows), and what the measure and learn steps hand the flow.

The JSON field names are those of docs/contracts.md ("Sweep results directory"); writers dump
these models and readers (the resume path, the analysis) validate rows with the same models.
Every row model keeps fields it does not know (`extra="allow"`), so a row written by a newer or
older mythloop reads back and is rewritten without losing a key; fields added later have
defaults, so older rows still load.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer

__all__ = ["AppliedVerdict", "CatalogEntry", "MeasureResult", "MeasurementRow", "TurnAnswer",
           "TurnRow"]


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
    prompt_kind: str | None = None
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
    prompt_kind: str | None = None
    expected_skill: str | None = None
    session_id: str | None = None
    status: str
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
