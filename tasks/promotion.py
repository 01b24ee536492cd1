"""Prefect tasks of the promotion flow: train a candidate, evaluate a model, record the
decision. Each body is one call into the library (mythloop.promotion, mythloop.router)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from prefect.artifacts import create_markdown_artifact

from mythloop.promotion import evaluate, load_eval_prompts, trap_wins
from mythloop.router.models import ModelStore
from mythloop.router.tuning import TuneSettings, drop_over_praised, fine_tune, trusted_pairs
from mythloop.settings import get_settings
from mythloop.skills import load_catalog
from mythloop.sweep.injected import read_injected
from mythloop.verdicts import VerdictStore
from mythloop_tasks.common import mythloop_task

__all__ = ["train_candidate", "evaluate_model", "record_decision"]


@mythloop_task(name="train_candidate", retries=0, task_run_name="train candidate")
def train_candidate(store_path: str, pool: str, base: str, models_dir: str,
                    tune: dict[str, Any]) -> dict[str, Any]:
    """Fine-tune a copy of `base` on every trusted HELPFUL verdict in the store."""
    store = VerdictStore(store_path)
    try:
        pairs = trusted_pairs(store, load_catalog(Path(pool)))
    finally:
        store.close()
    pairs, _ = drop_over_praised(pairs, get_settings().c5_over_praised)
    if not pairs:
        raise ValueError(f"the store {store_path} holds no trusted HELPFUL verdict with a "
                         "prompt for a skill of the pool: nothing to train on")
    info = fine_tune(base, pairs, ModelStore(models_dir), settings=TuneSettings(**tune),
                     lineage={"source": "promotion", "store": store_path})
    return info.summary()


@mythloop_task(name="evaluate_model", retries=0, task_run_name="evaluate {label}")
def evaluate_model(model: str, pool: str, heldout_file: str, label: str) -> dict[str, Any]:
    """Held-out hit@1 / hit@5 per prompt and the fixture traps, for one model."""
    catalog = load_catalog(Path(pool))
    injected = read_injected(Path(pool), set(catalog.names()))  # attack success, when any
    figures = evaluate(model, catalog, load_eval_prompts(Path(heldout_file)), injected)
    return {**figures, "traps": trap_wins(model)}


@mythloop_task(name="record_decision", retries=0, task_run_name="record promotion decision")
def record_decision(decision: dict[str, Any]) -> None:
    """The decision and both models' figures as a Prefect artifact."""
    cand, cur = decision["candidate"], decision["current"]
    attack = "attack@1" in cand  # the pool held injected skills
    lines = [f"# Promotion: {'promoted' if decision['promote'] else 'rejected'} "
             f"{cand['model_id']}", "",
             "| model | held-out hit@1 | held-out hit@5 | fixture traps won |"
             + (" attack success (top 1) |" if attack else ""),
             "|---|---:|---:|---:|" + ("---:|" if attack else "")]
    for name, fig in (("candidate", cand), ("current", cur)):
        traps = decision["traps"][name]
        lines.append(f"| {name} `{fig['model_id']}` | {fig['hit@1']:.3f} | {fig['hit@5']:.3f} "
                     f"| {sum(traps.values())} of {len(traps)} |"
                     + (f" {fig['attack@1']:.3f} |" if attack else ""))
    lines += ["", "Candidate - current, paired by prompt (95% interval):", ""]
    for metric, d in decision["difference"].items():
        interval = (f"[{d['lo']:+.3f}, {d['hi']:+.3f}]" if d["lo"] is not None else "(none)")
        lines.append(f"- {metric}: {d['mean']:+.3f} {interval} over {d['n_prompts']} prompts")
    lines += ["", "Why: " + "; ".join(decision["reasons"]), "",
              "```json", json.dumps({k: decision[k] for k in ("promote", "reasons")}), "```"]
    create_markdown_artifact(markdown="\n".join(lines), key="model-promotion",
                             description=f"Promotion decision for {cand['model_id']}")
