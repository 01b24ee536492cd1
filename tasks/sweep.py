"""Prefect tasks of the feedback-loop sweep: one measurement per round, then the learning turns.

A real model gets one `learning_turn` task per turn (its own retries, timeout, `llm` slot and
UI row); the turns of a round run side by side and the flow applies their answers in prompt
order. An in-process judge (simulated, oracle) learns a whole round in one `learn` task.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from prefect.artifacts import create_table_artifact

from mythloop.settings import get_settings
from mythloop.sweep import ConditionRun, SweepPrompt
from mythloop.sweep.records import CatalogEntry, MeasureResult, TurnAnswer, TurnRow
from mythloop.sweep.tuned import tune_for_round
from mythloop_tasks.common import mythloop_task, say


def round_name(template: str) -> Callable[..., str]:
    """A task run's name from its parameters with `{round}` the round numbered from 1, as the
    terminal, the report and the plots number it (`round_idx` counts from 0, as the round
    files do: round 1 writes round_0.jsonl). A name is only shown: no cache or resume reads
    it (the sweep resumes from its files)."""
    def name(parameters: dict[str, Any]) -> str:
        return template.format(round=int(parameters["round_idx"]) + 1, **parameters)
    return name


@mythloop_task(name="measure_round", retries=0,
               task_run_name=round_name("measure {run.name} round {round}"))
def measure_round(run: ConditionRun, round_idx: int) -> MeasureResult:
    """Rank every prompt (top-10), write round_<r>.jsonl, return the catalogs to learn from."""
    return run.measure(round_idx)


@mythloop_task(name="learning_turn", llm=True,
               task_run_name=round_name("learn {prompt.id} ({run.name} round {round})"))
def learning_turn(run: ConditionRun, prompt: SweepPrompt, round_idx: int,
                  catalog: list[CatalogEntry], contract: str) -> TurnAnswer:
    """Show the model the top-5 catalog and keep its reply; the flow then parses the verdict
    tags and persists them (`ConditionRun.record_turn`), in prompt order."""
    return run.ask_turn(prompt, round_idx, catalog, contract)


@mythloop_task(name="learn", task_run_name=round_name("learn {run.name} round {round}"))
def learn_round(run: ConditionRun, round_idx: int, catalogs: dict[str, list[CatalogEntry]],
                contract: str) -> list[TurnRow]:
    """Every learning turn of a round in the library (in-process judges): the turn rows."""
    settings = get_settings()

    def note(row: TurnRow) -> None:
        say(f"[sweep] {run.name} round {round_idx + 1} {row.prompt_id}: turn failed "
            f"({(row.error or '')[:160]}); the round goes on")

    return run.learn_round(round_idx, catalogs, contract, retries=settings.task_retries,
                           retry_delay_s=settings.retry_delay_seconds, on_failure=note)


@mythloop_task(name="fine_tune", retries=0,
               task_run_name=round_name("fine-tune {run.name} for round {round}"))
def fine_tune_round(run: ConditionRun, round_idx: int) -> dict:
    """C5: fine-tune a copy of the embedding model on the trusted verdicts so far and rank
    round `round_idx` with it; the model's lineage becomes an artifact."""
    record = tune_for_round(run, round_idx)
    if record.get("trained"):
        settings = record.get("settings") or {}
        trained_on = (f"the {record['pairs_new']} new of {record['pairs']} trusted pairs, "
                      f"continuing {record['continued_from']}" if "continued_from" in record
                      else f"{record['pairs']} trusted pairs")
        say(f"[sweep] {run.name} round {round_idx + 1}: fine-tuned {record['model_id']} on "
            f"{trained_on} ({record.get('train_seconds', 0):.0f} s, "
            f"{settings.get('epochs')} epoch(s))")
        rows = [{"key": k, "value": json.dumps(v) if isinstance(v, dict | list) else str(v)}
                for k, v in record.items()]
        create_table_artifact(
            table=rows, key=_model_artifact_key(run.name),
            description=f"Tuned embedding model of {run.name} for round {round_idx + 1} "
                        f"(sweep {run.results_dir.name}): lineage")
    else:
        say(f"[sweep] {run.name} round {round_idx + 1}: kept {record['model_id']} "
            f"({record.get('why')})")
    return record


def _model_artifact_key(name: str) -> str:
    return re.sub(r"-{2,}", "-", re.sub(r"[^a-z0-9]+", "-", f"tuned-model-{name}".lower()))
