"""Read a sweep results directory (see docs/contracts.md, "Sweep results directory").

Tolerant by design: an empty or missing round file, a missing turn log and
malformed JSONL lines are recorded as `DataIssue`s and reported, never raised.
Only a directory that is not a sweep at all raises `AnalysisError`.

Rows are validated with the models the sweep writes them with (mythloop.sweep.records:
MeasurementRow, TurnRow; strictly, so a number is no string and a bool no number); a row
that fails is one data issue naming its line. The metrics read the rows' JSON objects as
they are on disk, less the fields no metric reads (`UNREAD_FIELDS`: a ranked skill's score
breakdown, a turn's reply tail), with their keys and strings shared between rows: at
benchmark size (199 skills, 2,363 prompts, 3 conditions x 4 rounds) the rows as parsed were
~0.9 GB, most of a sweep's peak memory, and are ~0.15 GB held this way.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from mythloop.fileio import describe_invalid
from mythloop.sweep.records import (
    MeasurementRow,
    SweepRecord,
    SweepRecordError,
    TurnRow,
    read_sweep_record,
)

__all__ = [
    "AnalysisError",
    "DataIssue",
    "PromptInfo",
    "Sandbox",
    "SweepResults",
    "UNREAD_FIELDS",
    "load_results",
]

_SANDBOX_RE = re.compile(r"^(?P<cond>[a-z0-9]+)-rep(?P<rep>[0-9]+)$")
_ROUND_RE = re.compile(r"^round_(?P<round>[0-9]+)\.jsonl$")

UNREAD_FIELDS: dict[type[BaseModel], frozenset[str]] = {
    MeasurementRow: frozenset({"breakdown"}),
    TurnRow: frozenset({"text_tail", "stderr_head"}),
}
"""Row fields no metric reads: validated with the row, then left out of the rows held."""


class AnalysisError(Exception):
    """The directory cannot be analysed at all (not a sweep results dir)."""


@dataclass(frozen=True)
class DataIssue:
    """Something in the results dir that was skipped or is incomplete."""

    file: str
    problem: str
    line: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "problem": self.problem}


@dataclass(frozen=True)
class PromptInfo:
    """What the rows say about one prompt (the same prompts file serves every sandbox)."""

    prompt_id: str
    kind: str
    expected_skill: str | None
    poisoned_twin: str | None


@dataclass
class Sandbox:
    """One condition x replicate: its measurement rows per round and its turn log."""

    cond: str
    replicate: int
    rounds: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    turns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.cond}-rep{self.replicate}"

    def turns_of_round(self, round_idx: int) -> list[dict[str, Any]]:
        return [t for t in self.turns if t["round"] == round_idx]


@dataclass
class SweepResults:
    """Everything read from one results dir."""

    root: Path
    sweep: SweepRecord
    sandboxes: dict[tuple[str, int], Sandbox]
    prompts: dict[str, PromptInfo]
    rounds: list[int]
    issues: list[DataIssue]

    @property
    def conditions(self) -> list[str]:
        """Conditions in sweep.json order, then any others found on disk."""
        declared = [str(c) for c in self.sweep.conditions]
        found = sorted({cond for cond, _ in self.sandboxes})
        return [c for c in declared if c in found] + [c for c in found if c not in declared]

    def replicates(self, cond: str) -> list[int]:
        return sorted(rep for c, rep in self.sandboxes if c == cond)


def _read_sweep_json(root: Path) -> SweepRecord:
    """Load sweep.json through its model or raise one clear AnalysisError."""
    if not root.is_dir():
        raise AnalysisError(f"{root} is not a directory: pass the results dir a sweep wrote")
    if not (root / "sweep.json").is_file():
        raise AnalysisError(
            f"no sweep.json in {root}: not a sweep results dir "
            "(run `mythloop sweep --results-dir DIR` first, then analyze that DIR)"
        )
    try:
        return read_sweep_record(root)
    except SweepRecordError as exc:
        raise AnalysisError(f"{exc}: rerun the sweep") from None


def _invalid(obj: Any, model: type[BaseModel]) -> str | None:
    """Why a parsed line is not a valid MODEL row, or None when it is one."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    try:
        model.model_validate(obj, strict=True)
    except ValidationError as exc:
        return describe_invalid(exc)
    return None


def _read_jsonl(
    path: Path, root: Path, model: type[BaseModel], issues: list[DataIssue]
) -> list[dict[str, Any]]:
    """Parse a JSONL file, skipping (and recording) malformed lines."""
    rel = path.relative_to(root).as_posix()
    unread = UNREAD_FIELDS.get(model, frozenset())
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        issues.append(DataIssue(rel, f"unreadable: {exc}"))
        return []
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            issues.append(DataIssue(rel, f"malformed JSON: {exc.msg}", number))
            continue
        problem = _invalid(obj, model)
        if problem:
            issues.append(DataIssue(rel, f"malformed row: {problem}", number))
            continue
        rows.append({sys.intern(k): _shared(v) for k, v in obj.items() if k not in unread})
    return rows


def _shared(value: Any) -> Any:
    """VALUE with its strings (and the keys of its dicts) interned: the same skill names,
    prompt ids, kinds and keys recur in every row, and are then held once."""
    kind = type(value)  # JSON's types exactly (json.loads makes no subclasses)
    if kind is str:
        return sys.intern(value)
    if kind is list:
        return [_shared(v) for v in value]
    if kind is dict:
        return {sys.intern(k): _shared(v) for k, v in value.items()}
    return value


def _load_sandbox(path: Path, root: Path, cond: str, rep: int, issues: list[DataIssue]) -> Sandbox:
    """Read one `<cond>-rep<k>/` folder."""
    box = Sandbox(cond=cond, replicate=rep)
    for file in sorted(path.iterdir()):
        match = _ROUND_RE.match(file.name)
        if match and file.is_file():
            rows = _read_jsonl(file, root, MeasurementRow, issues)
            if not rows:
                issues.append(DataIssue(file.relative_to(root).as_posix(), "no measurement rows"))
            box.rounds[int(match["round"])] = rows
    turns_path = path / "turns.jsonl"
    if turns_path.is_file():
        box.turns = _read_jsonl(turns_path, root, TurnRow, issues)
    else:
        issues.append(DataIssue(turns_path.relative_to(root).as_posix(), "missing turn log"))
    return box


def _collect_prompts(boxes: list[Sandbox]) -> dict[str, PromptInfo]:
    """Every prompt seen in any row or turn; the first description seen wins."""
    prompts: dict[str, PromptInfo] = {}
    sources: list[dict[str, Any]] = []
    for box in boxes:
        for round_idx in sorted(box.rounds):
            sources.extend(box.rounds[round_idx])
        sources.extend(box.turns)
    for row in sources:
        pid = row["prompt_id"]
        if pid in prompts or not isinstance(row.get("prompt_kind"), str):
            continue
        expected = row.get("expected_skill")
        twin = row.get("poisoned_twin")
        prompts[pid] = PromptInfo(
            prompt_id=pid,
            kind=row["prompt_kind"],
            expected_skill=expected if isinstance(expected, str) and expected else None,
            poisoned_twin=twin if isinstance(twin, str) and twin else None,
        )
    # A heldout paraphrase is only a trap pair when some row names its twin.
    for row in sources:
        info = prompts.get(row["prompt_id"])
        twin = row.get("poisoned_twin")
        if info and info.poisoned_twin is None and isinstance(twin, str) and twin:
            prompts[info.prompt_id] = PromptInfo(
                info.prompt_id, info.kind, info.expected_skill, twin
            )
    return dict(sorted(prompts.items()))


def _expected_rounds(sweep: SweepRecord, boxes: list[Sandbox]) -> list[int]:
    """Rounds sweep.json promises, plus any found on disk."""
    found = {r for box in boxes for r in box.rounds}
    found |= {t["round"] for box in boxes for t in box.turns}
    if sweep.rounds:
        found |= set(range(sweep.rounds))
    return sorted(found)


def _catalog_issues(sweep: SweepRecord) -> list[DataIssue]:
    """Invalid SKILL.md files the sweep left out of its pool (sweep.json `catalog_issues`)."""
    return [
        DataIssue(row.file, f"invalid skill left out of the pool: {row.problem}")
        for row in sweep.catalog_issues
        if row.file and row.problem
    ]


def load_results(results_dir: str | Path) -> SweepResults:
    """Read sweep.json, every sandbox's round files and turn log."""
    root = Path(results_dir).expanduser().resolve()
    sweep = _read_sweep_json(root)
    issues: list[DataIssue] = []
    sandboxes: dict[tuple[str, int], Sandbox] = {}
    for path in sorted(root.iterdir()):
        match = _SANDBOX_RE.match(path.name)
        if match and path.is_dir():
            cond, rep = match["cond"], int(match["rep"])
            sandboxes[(cond, rep)] = _load_sandbox(path, root, cond, rep, issues)
    if not sandboxes:
        raise AnalysisError(
            f"{root} has sweep.json but no <cond>-rep<k>/ folders: the sweep wrote no results yet"
        )
    boxes = [sandboxes[key] for key in sorted(sandboxes)]
    rounds = _expected_rounds(sweep, boxes)
    # A round some sandbox logged turns for, but this one did not, lost its turns.
    turn_rounds = {t["round"] for box in boxes for t in box.turns}
    for box in boxes:
        for round_idx in rounds:
            if round_idx not in box.rounds:
                issues.append(
                    DataIssue(f"{box.label}/round_{round_idx}.jsonl", "missing round file")
                )
            if round_idx in turn_rounds and not box.turns_of_round(round_idx):
                issues.append(
                    DataIssue(f"{box.label}/turns.jsonl", f"no turns for round {round_idx}")
                )
    issues.extend(_catalog_issues(sweep))
    return SweepResults(
        root=root,
        sweep=sweep,
        sandboxes=sandboxes,
        prompts=_collect_prompts(boxes),
        rounds=rounds,
        issues=sorted(issues, key=lambda i: (i.file, i.line or 0, i.problem)),
    )
