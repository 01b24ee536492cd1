"""Feedback-loop sweeps: configuration, sandboxes, measurement and learning turns (no Prefect).

The names below load on first use, so `from mythloop.sweep import SweepConfig` (the CLI's
defaults and input checks) imports without numpy, the router, the backends and the
measurement and learning code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mythloop.sweep.condition import (
        ConditionRun,
        learning_prompt,
        render_catalog,
        session_id_for,
    )
    from mythloop.sweep.config import JudgeOptions, SweepConfig, SweepPrompt, load_prompts

__all__ = [
    "ConditionRun", "JudgeOptions", "SweepConfig", "SweepPrompt", "learning_prompt",
    "load_prompts", "render_catalog", "session_id_for",
]

_HOME = {"ConditionRun": "condition", "learning_prompt": "condition",
         "render_catalog": "condition", "session_id_for": "condition",
         "JudgeOptions": "config", "SweepConfig": "config", "SweepPrompt": "config",
         "load_prompts": "config"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
