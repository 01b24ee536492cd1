"""Condition C5 in a sweep: before each round after the first, fine-tune the embedding model on
the verdicts the condition trusts, and rank the round with it: the last round's tuned model on
the trusted pairs it has not learned (`c5_continue`, on), or a copy of the base model on all of
them (the first tuned round, `c5_continue` off, or a pair the last model learned lost the trust).

One model per condition x replicate and round: the pairs come from that replicate's own store,
the training seed from its own seed, so nothing is shared between replicates or with C0
(which keeps the base model). A tuned model is saved in the state's model store
(mythloop/router/models.py) and recorded in `<cond>-rep<k>/models.json`; the sweep copies
those records into sweep.json when it finishes. A resumed sweep rebuilds the same pairs from
the store's snapshot of the round's start, so it finds the model already trained and reuses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mythloop.fileio import read_records, write_json_atomic
from mythloop.router.embedder import default_model, get_embedder, model_id_for, release_model
from mythloop.router.models import ModelInfo, ModelStore
from mythloop.router.ranker import full_text
from mythloop.router.tuning import (
    TrainingPair,
    TuneSettings,
    drop_over_praised,
    fine_tune,
    learned_pairs,
    trusted_pairs,
)
from mythloop.settings import get_settings
from mythloop.sweep.records import TurnRow

if TYPE_CHECKING:
    from mythloop.sweep.condition import ConditionRun

__all__ = ["tune_settings", "base_model", "tune_for_round", "read_models", "collect_models",
           "with_hard_negatives", "round_pairs"]


def tune_settings(seed: int = 0) -> TuneSettings:
    """The fine-tune settings (MYTHLOOP_C5_*), with the replicate's seed."""
    s = get_settings()
    return TuneSettings(epochs=s.c5_epochs, batch_size=s.c5_batch_size,
                        learning_rate=s.c5_learning_rate, max_seq_length=s.c5_max_seq_length,
                        seed=seed)


def base_model(run: ConditionRun) -> str:
    """The model a C5 run starts from: the sweep's embedder (a local folder)."""
    return run.config.embedder or get_settings().embedder_model or default_model()


def with_hard_negatives(run: ConditionRun, pairs: list[TrainingPair],
                        before_round: int) -> list[TrainingPair]:
    """PAIRS, each with a hard negative where the run's own turns (rounds before
    BEFORE_ROUND) have one: the highest-ranked skill of a catalog shown for the pair's prompt
    that the judge did not use (no tag) and that is no trusted positive of that prompt; the
    latest turn that praised the pair's skill decides. A pair without one keeps none."""
    texts = {s.name: full_text(s) for s in run.catalog.skills}
    prompts = {p.id: " ".join(p.prompt.split()) for p in run.prompts}
    positives: dict[str, set[str]] = {}
    for pair in pairs:
        positives.setdefault(pair.query, set()).add(pair.skill)
    negative: dict[tuple[str, str], str] = {}
    for row in read_records(run.turns_path, TurnRow):
        query = prompts.get(row.prompt_id)
        if not row.ok or row.round >= before_round or query is None:
            continue
        tagged = {str(tag.get("name")) for tag in row.tags}
        unused = [n for n in row.ranked_top5 if n not in tagged and n in texts
                  and n not in positives.get(query, ())]
        for tag in row.tags:
            if tag.get("verdict") == "HELPFUL":
                negative[(query, str(tag.get("name")))] = texts[unused[0]] if unused else ""
    return [TrainingPair(p.query, p.skill, p.text, negative.get((p.query, p.skill), ""))
            for p in pairs]


def read_models(run_dir: Path) -> dict[str, Any]:
    """`models.json` of a condition's sandbox: round (a string) -> record; {} when none."""
    try:
        data = json.loads((run_dir / "models.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def round_pairs(run: ConditionRun, round_idx: int) -> tuple[list[TrainingPair], list[str]]:
    """The training pairs of round `round_idx`'s fine-tune, from the store as it is now, and
    the skills the over-praise rule left out. The gate on the pairs is `c5_gate_pairs` (off
    by default: docs/blend.md, "Defences"); C4's terms inside C5 keep theirs either way."""
    settings = get_settings()
    gate = (run.router.plausibility if run.router is not None and settings.c5_gate_pairs
            else None)
    pairs = trusted_pairs(run.store, run.catalog, plausible=gate)
    pairs, over_praised = drop_over_praised(pairs, settings.c5_over_praised)
    if settings.c5_hard_negatives:
        pairs = with_hard_negatives(run, pairs, round_idx)
    return pairs, over_praised


def _pair_key(pair: TrainingPair) -> tuple[str, str, str, str]:
    return (pair.query, pair.skill, pair.text, "" if pair.negative == pair.text else pair.negative)


def _last_model(run: ConditionRun, round_idx: int, models: ModelStore) -> ModelInfo | None:
    """The tuned model the run ranked its last round before `round_idx` with (models.json),
    if it is still in the store; None for the base model or none."""
    done = read_models(run.dir)
    earlier = sorted((int(k), v) for k, v in done.items()
                     if k.isdigit() and int(k) < round_idx and isinstance(v, dict))
    if not earlier:
        return None
    return models.get(str(earlier[-1][1].get("model_id") or ""))


def _start(run: ConditionRun, round_idx: int, pairs: list[TrainingPair], models: ModelStore,
           record: dict[str, Any]) -> tuple[ModelInfo | None, list[TrainingPair],
                                            list[TrainingPair]]:
    """Where round `round_idx`'s fine-tune starts: (the tuned model it continues, None for
    the base model; pairs to train on; pairs that model learned already). With
    `c5_continue`, the last round's tuned model and the trusted pairs it has not learned,
    where every pair it learned is still trusted (a pair that lost the trust, say a twin the
    pool now holds harmful, must stop teaching, and only a model trained from the base
    unlearns it); otherwise the base model and every pair."""
    last = _last_model(run, round_idx, models) if get_settings().c5_continue else None
    if last is None:
        return None, pairs, []
    learned = learned_pairs(last)
    keys = {_pair_key(p) for p in pairs}
    lost = sum(_pair_key(p) not in keys for p in learned)
    if not learned or lost:
        record["restarted"] = (f"{lost} pair(s) {last.id} learned no longer trusted: trained "
                               "from the base model" if lost else f"{last.id} lists no pairs")
        return None, pairs, []
    known = {_pair_key(p) for p in learned}
    record["continued_from"] = last.id
    return last, [p for p in pairs if _pair_key(p) not in known], learned


def tune_for_round(run: ConditionRun, round_idx: int, models: ModelStore | None = None,
                   on_step=None) -> dict[str, Any]:
    """Fine-tune for round `round_idx` (>= 1) from the store as it is now (the round's start)
    and switch the run to the model. Returns the round's record (also in models.json)."""
    assert run.store is not None, "open() first"
    models = models or ModelStore(get_settings().models_dir)
    base = base_model(run)
    pairs, over_praised = round_pairs(run, round_idx)
    previous = run.embedder.model_id if run.embedder is not None else None
    record: dict[str, Any] = {"round": round_idx, "pairs": len(pairs),
                              "base_model": model_id_for(base)}
    if over_praised:
        record["over_praised"] = over_praised
    last, todo, learned = _start(run, round_idx, pairs, models, record)
    if last is not None:
        record["pairs_new"] = len(todo)
    if len(todo) < get_settings().c5_min_pairs:
        if last is not None and last.id != previous:  # a resumed run ranks with the base model
            run.use_embedder(get_embedder(str(last.path)))
        record.update(model_id=last.id if last is not None else previous or record["base_model"],
                      trained=False,
                      why=(f"{len(todo)} new trusted pairs" if last is not None
                           else f"{len(pairs)} trusted pairs") + ", under c5_min_pairs")
    else:
        start = str(last.path) if last is not None else base
        info = fine_tune(start, todo, models, settings=tune_settings(run.seed), on_step=on_step,
                         learned=learned,
                         lineage={"source": "sweep", "sweep_id": run.results_dir.name,
                                  "results_dir": str(run.results_dir), "condition": run.cond,
                                  "replicate": run.replicate, "round": round_idx})
        embedder = get_embedder(str(info.path))
        run.use_embedder(embedder)
        if previous and previous not in (embedder.model_id, record["base_model"]):
            release_model(previous)  # the last round's tuned model: not needed again here
        # The round's own keys win over the lineage's (a model found by its training key may
        # have been made by another sweep with the same pairs and seed: its lineage says so).
        record = {**info.summary(), **record, "trained": True}
    done = read_models(run.dir)
    done[str(round_idx)] = record
    write_json_atomic(run.models_path, dict(sorted(done.items(), key=lambda kv: int(kv[0]))))
    return record


def collect_models(results_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every condition sandbox's model records: "<cond>-rep<k>" -> records by round."""
    out = {}
    for path in sorted(Path(results_dir).glob("*-rep*/models.json")):
        records = read_models(path.parent)
        if records:
            out[path.parent.name] = [records[k] for k in sorted(records, key=int)]
    return out
