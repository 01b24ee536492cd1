"""Prefect tasks of the feedback-loop sweep: one measurement per round, one task per learning turn."""

from __future__ import annotations

from mythloop.sweep import ConditionRun, SweepPrompt
from tasks.common import mythloop_task


@mythloop_task(name="measure_round", retries=0,
               task_run_name="measure {run.name} round {round_idx}")
def measure_round(run: ConditionRun, round_idx: int) -> dict:
    """Rank every prompt (top-10), write round_<r>.jsonl, return the catalogs to learn from."""
    return run.measure(round_idx)


@mythloop_task(name="learning_turn", llm=True,
               task_run_name="learn {prompt.id} ({run.name} round {round_idx})")
def learning_turn(run: ConditionRun, prompt: SweepPrompt, round_idx: int, catalog: list[dict],
                  contract: str) -> dict:
    """Show the model the top-5 catalog, parse its verdict tags, persist them; return the turn row."""
    return run.learning_turn(prompt, round_idx, catalog, contract)
