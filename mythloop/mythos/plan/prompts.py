"""Deterministic prompt text for every Mythos model call (stages, codegen, repair)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mythloop.mythos.plan.stages import load_charter, stage_by_slug
from mythloop.textsafe import clean_text

__all__ = [
    "FAILURE_TAIL_CHARS",
    "system_prompt",
    "json_contract",
    "stage_prompt",
    "rejection_note",
    "codegen_prompt",
    "repair_prompt",
    "prompt_sha256",
]

FAILURE_TAIL_CHARS = 8000  # the repair prompt carries only the end of the error output


def _dump(obj: Any) -> str:
    """Stable JSON text: the same artifact always gives the same prompt (and sha256)."""
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def system_prompt() -> str:
    """The cinematic charter, sent as the system prompt of every call."""
    return load_charter("cinematic-charter.md")


def json_contract() -> str:
    """The output contract appended to every stage prompt."""
    return load_charter("json-contract.md")


def rejection_note(reason: str) -> str:
    """The paragraph appended for the one retry after a rejected artifact."""
    return (
        "PREVIOUS ATTEMPT REJECTED: your last artifact was unusable "
        f"({reason}). The input artifact above holds real material - mine it. Return one complete, "
        "richly populated JSON object with every key of your charter; empty lists and placeholder "
        "text are failures."
    )


def stage_prompt(slug: str, input_artifact: dict, rejection: str | None = None) -> str:
    """Charter + input artifact + JSON contract (+ the rejection reason on the retry)."""
    spec = stage_by_slug(slug)
    parts = [
        load_charter(spec.charter_file),
        "INPUT ARTIFACT JSON:\n" + _dump(input_artifact),
        json_contract(),
    ]
    if rejection:
        parts.append(rejection_note(rejection))
    return "\n\n".join(parts) + "\n"


def _fill(template: str, **values: str) -> str:
    """Replace {name} placeholders literally (the values are full of braces: no str.format)."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def codegen_prompt(dossier: dict) -> str:
    """The code writer's prompt: the codegen template with every stage artifact inlined."""
    return _fill(load_charter("codegen.md"), dossier_json=_dump(dossier)) + "\n"


def repair_prompt(scene_code: str, failure_tail: str, *, header: str = "",
                  scene_name: str = "") -> str:
    """The scoped repair prompt: the shared header (read-only), the one failing scene class
    and the last 8000 chars of that scene's failure output."""
    # the tail is the render's log (the scene's own output): its text stays, its terminal
    # escapes and other control characters do not (the prompt is also kept as a file)
    tail = failure_tail[-4 * FAILURE_TAIL_CHARS:] if failure_tail else "unknown failure"
    tail = clean_text(tail, 4 * FAILURE_TAIL_CHARS)[-FAILURE_TAIL_CHARS:]
    return _fill(load_charter("repair.md"), shared_header=header.rstrip("\n") or "(none)",
                 scene_name=scene_name or "the scene",
                 scene_code=scene_code.rstrip("\n"), failure_tail=tail.rstrip("\n")) + "\n"


def prompt_sha256(prompt: str, system: str | None = None) -> str:
    """sha256 of the prompt text (what replay cassettes record), system prompt excluded by default."""
    digest = hashlib.sha256(prompt.encode("utf-8"))
    if system:
        digest.update(b"\x00" + system.encode("utf-8"))
    return digest.hexdigest()
