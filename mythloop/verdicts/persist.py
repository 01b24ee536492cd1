"""Apply parsed skill-used tags of one turn to the verdict store.

Only skills in the catalog shown that turn may receive a verdict; a name
outside it is reported (off_catalog, and invented when no such skill exists at
all) and never applied -- the published run applied them anyway. Names are only
ever compared with known names: nothing here builds a path from model text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from mythloop.verdicts.status import VERDICTS
from mythloop.verdicts.store import VerdictIn, VerdictStore

__all__ = ["PersistResult", "persist_verdicts", "reason_problem", "MIN_REASON_CHARS"]

MIN_REASON_CHARS = 8
_PLACEHOLDERS = frozenset({
    "n/a", "na", "none", "null", "nil", "nothing", "...", "…", "reason", "a reason", "the reason",
    "todo", "tbd", "tba", "placeholder", "no reason", "not applicable", "unknown", "see above",
    "same as above", "as above", "same", "etc", "lorem ipsum", "your reason here",
    "one sentence with concrete evidence", "concrete evidence", "evidence", "reason here",
    "why, with evidence", "why with evidence",
})


class _Embeds(Protocol):
    model_id: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class PersistResult:
    """What happened to each tag of a turn."""

    applied: list[dict] = field(default_factory=list)
    off_catalog: list[str] = field(default_factory=list)
    invented: list[str] = field(default_factory=list)
    rejected: list[dict] = field(default_factory=list)


def reason_problem(reason: str) -> str | None:
    """Why a reason is unusable (too short or a placeholder), or None when it is fine."""
    text = " ".join((reason or "").split())
    if len(text) < MIN_REASON_CHARS:
        return f"reason shorter than {MIN_REASON_CHARS} characters"
    bare = re.sub(r"^[\s\W_]+|[\s\W_]+$", "", text.lower())
    if not re.search(r"[A-Za-z0-9]", text) or text.lower() in _PLACEHOLDERS or bare in _PLACEHOLDERS:
        return "placeholder reason"
    if re.match(r"(todo|tbd|fixme|xxx)\s*([:!.-]|$)", text.lower()):
        return "placeholder reason (to-do marker)"
    if re.fullmatch(r"<[^>]*>|\[[^\]]*\]|\{[^}]*\}", text):
        return "placeholder reason (template brackets)"
    return None


def persist_verdicts(
    store: VerdictStore,
    catalog_shown: Iterable[str],
    tags: Iterable[dict],
    *,
    session_id: str,
    host: str,
    query: str,
    embedder: _Embeds | None,
    known_skills: set[str],
) -> PersistResult:
    """Validate a turn's tags and write the good ones in one store transaction."""
    shown = set(catalog_shown)
    result = PersistResult()
    accepted: list[dict] = []
    for tag in tags:
        name = str(tag.get("name", "")).strip()
        verdict = str(tag.get("verdict", "")).strip().upper()
        reason = " ".join(str(tag.get("reason", "")).split())
        if name not in shown:
            result.off_catalog.append(name)
            if name not in known_skills:
                result.invented.append(name)
            continue
        problem = None if verdict in VERDICTS else f"unknown verdict {verdict!r}"
        problem = problem or reason_problem(reason)
        if problem:
            result.rejected.append({"name": name, "reason": problem})
            continue
        accepted.append({"name": name, "verdict": verdict, "reason": reason})
    if not accepted:
        return result
    reason_vecs, query_vec, model_id = _embed(embedder, [a["reason"] for a in accepted], query)
    items = [
        VerdictIn(session_id, a["name"], host, a["verdict"], a["reason"], query,
                  None if reason_vecs is None else reason_vecs[i], query_vec, model_id)
        for i, a in enumerate(accepted)
    ]
    for a, outcome in zip(accepted, store.record_verdicts(items), strict=True):
        # A retried turn writes the same session again: the store keeps the first write and
        # the turn still reports the verdict as applied, marked as already recorded.
        result.applied.append({
            **a, "status_before": outcome.before.status, "status": outcome.after.status,
            "helpful": outcome.after.helpful, "harmful": outcome.after.harmful,
            "streak": outcome.after.streak, "already_recorded": not outcome.inserted,
        })
    return result


def _embed(embedder: _Embeds | None, reasons: list[str], query: str):
    """Reason vectors and the query vector in one model call (None without an embedder)."""
    if embedder is None:
        return None, None, None
    vecs = embedder.embed([*reasons, query] if query else reasons)
    query_vec = vecs[-1] if query else None
    return vecs[: len(reasons)], query_vec, embedder.model_id
