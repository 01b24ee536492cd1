"""The closed vocabularies users choose from, each defined once.

The CLI (its choices and help), the pydantic config / request models (and so the Prefect UI's
"Run" forms, where a Literal renders as a choice list) and the code that acts on them all read
these. Every judge and film backend is a registered model backend (tests/test_backend_registry.py).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["Judge", "JUDGES", "SIMULATED_JUDGES", "FilmBackend", "FILM_BACKENDS", "Quality",
           "QUALITIES", "Condition", "CONDITIONS", "CONDITION_HELP", "BASELINE_CONDITION",
           "BLEND_CONDITIONS", "AGREEMENT_CONDITIONS", "EXPLORING_CONDITIONS", "TUNING_CONDITIONS",
           "RenderKind", "RENDER_KINDS",
           "TurnStatus", "TURN_STATUSES", "PromptKind", "PROMPT_KINDS", "LEARNED_PROMPT_KINDS"]

Judge = Literal["simulated", "oracle", "gemini", "claude", "codex", "openai"]
"""Who plays the model in a sweep's learning turns."""
JUDGES: tuple[str, ...] = get_args(Judge)
SIMULATED_JUDGES = frozenset({"simulated", "oracle"})
"""The judges that are simulations (their outputs are labelled as such)."""

FilmBackend = Literal["offline", "replay", "claude", "gemini", "codex", "openai"]
"""The film's model backends."""
FILM_BACKENDS: tuple[str, ...] = get_args(FilmBackend)

Quality = Literal["l", "m", "h", "p", "k"]
"""Manim render quality: l=480p15, m=720p30, h=1080p60, p=1440p60, k=4K."""
QUALITIES: tuple[str, ...] = get_args(Quality)

Condition = Literal["c0", "c3", "c4", "c5"]
"""A sweep condition: how the router uses the verdicts it stores."""
CONDITIONS: tuple[Condition, ...] = get_args(Condition)
CONDITION_HELP: dict[Condition, str] = {
    "c0": "blend off (verdicts stored, not used)",
    "c3": "blend on",
    "c4": "blend on, demotes only credibly harmful skills; docs/blend.md",
    "c5": "c4, ranked with an embedding model fine-tuned on trusted verdicts between rounds",
}
"""What each condition does, in a few words (the CLI's help and error lines)."""
BASELINE_CONDITION: Condition = "c0"
"""The condition every other one is compared with (the blend off)."""
BLEND_CONDITIONS: frozenset[Condition] = frozenset({"c3", "c4", "c5"})
"""Conditions whose ranking blends the verdicts in."""
AGREEMENT_CONDITIONS: frozenset[Condition] = frozenset({"c4", "c5"})
"""Conditions that apply the agreement rule (docs/blend.md)."""
EXPLORING_CONDITIONS: frozenset[Condition] = frozenset({"c4", "c5"})
"""Conditions whose learning catalog keeps an exploration slot (docs/blend.md, "Cold
skills"); C0 and C3 show the ranking's top k as the seed did."""
TUNING_CONDITIONS: frozenset[Condition] = frozenset({"c5"})
"""Conditions that fine-tune their own copy of the embedding model between rounds
(docs/blend.md, "C5")."""

RenderKind = Literal["ok", "scene_error", "timeout", "resource_limit", "missing_tool",
                     "interrupted", "layout"]
"""How a scene's render ended. `interrupted`: Ctrl-C or SIGTERM stopped it, not the scene;
`layout`: it rendered, but the layout check found text off the frame or overlapping (the film
flow's verdict after the probe, never the sandbox's)."""
RENDER_KINDS: tuple[RenderKind, ...] = get_args(RenderKind)

TurnStatus = Literal["ok", "failed", "timeout"]
"""How a sweep's learning turn ended (turns.jsonl `status`)."""
TURN_STATUSES: tuple[TurnStatus, ...] = get_args(TurnStatus)

PromptKind = Literal["trap", "normal", "null", "heldout"]
"""A sweep prompt's role: a trap (its poisoned twin ranks high), a normal labelled prompt, a
null prompt (no skill fits) or a held-out prompt (measured, never learned from)."""
PROMPT_KINDS: tuple[PromptKind, ...] = get_args(PromptKind)
LEARNED_PROMPT_KINDS: frozenset[PromptKind] = frozenset({"trap", "normal", "null"})
"""Prompt kinds the learning turns use (held-out prompts are only measured)."""

