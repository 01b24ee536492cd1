"""The promotion flow: train a candidate embedding model from every trusted verdict in a store,
evaluate it against the current model on a held-out file, promote it only through the gate
(mythloop.promotion). Run nightly or on demand (`mythloop models promote`).

    promote-model                     flow
      train_candidate                 task: fine-tune a copy of the base model
      evaluate_model x 2              task: candidate and current, held-out and fixture traps
      record_decision                 task: the decision and both models' figures (artifact)
"""

from __future__ import annotations

from typing import Any

from prefect import flow

from mythloop.promotion import decide
from mythloop.router.embedder import default_model
from mythloop.router.models import ModelStore
from mythloop.settings import get_settings
from mythloop.sweep.tuned import tune_settings
from mythloop_tasks.common import say
from mythloop_tasks.promotion import evaluate_model, record_decision, train_candidate


@flow(name="promote-model", flow_run_name="promote-model")
def promote_model(store_path: str, heldout_file: str, pool: str,
                  tune: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train, evaluate, and promote the candidate only when the gate passes; a rejected
    candidate stays in the model store. Returns the decision."""
    settings = get_settings()
    models = ModelStore(settings.models_dir)
    base = settings.embedder_model or default_model()
    current = models.current()
    tune = tune if tune is not None else {**tune_settings(0).to_dict()}
    candidate = train_candidate(store_path, pool, base, str(models.root), tune)
    say(f"[promote] candidate {candidate['model_id']} trained on {candidate['pairs']} pairs")
    cand = evaluate_model(candidate["path"], pool, heldout_file, "candidate")
    cur = evaluate_model(str(current.path) if current else base, pool, heldout_file, "current")
    decision = decide(cand, cur, cand["traps"], cur["traps"])
    decision["candidate"]["path"] = candidate["path"]
    if decision["promote"]:
        models.promote(candidate["model_id"], {k: decision[k] for k in
                                               ("reasons", "difference", "candidate", "current")})
    record_decision(decision)
    verb = "promoted" if decision["promote"] else "rejected (kept, not promoted)"
    say(f"[promote] {candidate['model_id']} {verb}: {'; '.join(decision['reasons'])}")
    return decision
