"""Feedback-loop sweeps: configuration, sandboxes, measurement and learning turns (no Prefect)."""

from typing import TYPE_CHECKING

from mythloop.sweep.config import JudgeOptions, SweepConfig, SweepPrompt, load_prompts

if TYPE_CHECKING:
    from mythloop.sweep.condition import (
        ConditionRun,
        learning_prompt,
        render_catalog,
        session_id_for,
    )

__all__ = [
    "ConditionRun", "JudgeOptions", "SweepConfig", "SweepPrompt", "learning_prompt",
    "load_prompts", "render_catalog", "session_id_for",
]

_CONDITION = frozenset({"ConditionRun", "learning_prompt", "render_catalog", "session_id_for"})


def __getattr__(name: str):
    """The sandbox side (`ConditionRun`, ...) loads on first use, so `from mythloop.sweep import
    SweepConfig` (the CLI's input checks) stays free of numpy, the router and the backends."""
    if name in _CONDITION:
        from mythloop.sweep import condition  # noqa: PLC0415 (see the docstring)

        return getattr(condition, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
