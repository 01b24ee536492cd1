"""Feedback-loop sweeps: configuration, sandboxes, measurement and learning turns (no Prefect)."""

from mythloop.sweep.condition import ConditionRun, learning_prompt, render_catalog, session_id_for
from mythloop.sweep.config import JudgeOptions, SweepConfig, SweepPrompt, load_prompts

__all__ = [
    "ConditionRun", "JudgeOptions", "SweepConfig", "SweepPrompt", "learning_prompt",
    "load_prompts", "render_catalog", "session_id_for",
]
