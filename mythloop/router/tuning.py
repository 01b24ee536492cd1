"""Fine-tuning the embedding model on the verdicts a condition trusts (condition C5).

    trusted_pairs(store, catalog)       (prompt, skill text) pairs: HELPFUL verdicts of skills
                                        that C4's agreement rule does not hold credibly harmful
    fine_tune(base, pairs, models, ...) a copy of `base` trained with sentence-transformers'
                                        MultipleNegativesRankingLoss (in-batch negatives),
                                        saved content-addressed in the model store

Why that trust rule: a HELPFUL verdict is the judge saying "this prompt is what this skill is
for", exactly a retrieval positive; a flipped verdict on a skill the pool's evidence calls
harmful (P(harmful share > 1/2) >= 0.9 under C4's Beta posterior, docs/blend.md) is the one
most likely wrong, and a poisoned twin judged HELPFUL once before its HARMFUL verdicts agree
drops out of the pairs as soon as they do. Pairs are rebuilt from the store at every round; a
sweep trains the last round's model on the new ones only while every pair it learned is still
trusted, and the base model otherwise (mythloop/sweep/tuned.py), so a pair that stops being
trusted stops teaching.

The training loop is a plain loop over the library's own loss module (no `datasets` /
`accelerate`, which the trainer class needs and the project does not ship): batches hold no
skill twice (a duplicate positive would be an in-batch negative of itself, as
sentence-transformers' NO_DUPLICATES sampler avoids), AdamW, one seed. It checks
`mythloop.procs.STOPPING` between steps, so a Ctrl-C stops a fine-tune within one step, and the
model store's atomic save leaves no half-written model behind.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from mythloop.router.models import ModelInfo, ModelStore
from mythloop.router.plausible import Plausibility
from mythloop.router.ranker import AGREEMENT_CREDIBILITY, full_text, harm_credibility
from mythloop.skills import Catalog, Skill

__all__ = ["TrainingPair", "TuneSettings", "trusted_pairs", "drop_over_praised", "OVER_PRAISED_FLOOR",
           "pairs_fingerprint", "training_key", "learned_pairs",
           "bound_heap", "fine_tune"]


@dataclass(frozen=True)
class TrainingPair:
    """A retrieval positive: a prompt and the text the router embeds for its skill; with
    `negative`, also a hard negative for it (the text of a skill the judge was shown for
    this prompt and did not use; "" for none)."""

    query: str
    skill: str
    text: str
    negative: str = ""


@dataclass(frozen=True)
class TuneSettings:
    """How a copy of the model is trained (recorded in every tuned model's lineage)."""

    epochs: int = 1
    batch_size: int = 32
    learning_rate: float = 5e-5
    max_seq_length: int = 64
    """Tokens per text: prompts and name + description fit; longer texts are cut."""
    scale: float = 20.0
    """MultipleNegativesRankingLoss's inverse temperature (the library's default)."""
    seed: int = 0
    threads: int = 0
    """torch threads while training (0: leave torch's setting)."""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "threads"}


def trusted_pairs(store, catalog: Catalog | Sequence[Skill],
                  credibility: float = AGREEMENT_CREDIBILITY,
                  plausible: Plausibility | None = None) -> list[TrainingPair]:
    """One pair per distinct (prompt, skill) that got a HELPFUL verdict, for skills of the
    catalog that are not credibly harmful now; in the order the verdicts were written.

    With `plausible` (the ranker's gate, over the base model: C5 in a sweep with
    `c5_gate_pairs` on) a pair counts only where the prompt is plausible for the skill on its
    own description, and a skill's helpful count for the credibility test keeps only the
    share of its verdicts that do (as the ranker counts them; docs/blend.md, "Defences")."""
    skills = {s.name: s for s in (catalog.skills if isinstance(catalog, Catalog) else catalog)}
    names = sorted(skills)
    rows = []
    for row in store.verdicts():
        name, query = row["skill_name"], " ".join(str(row.get("query") or "").split())
        if row["verdict"] == "HELPFUL" and query and name in skills:
            rows.append((query, name))
    allowed = [True] * len(rows)
    share = dict.fromkeys(names, 1.0)
    if plausible is not None and plausible.enabled and rows:
        known = [k for k, (_, name) in enumerate(rows) if name in plausible.index]
        ok = plausible.allows([plausible.index[rows[k][1]] for k in known],
                              [rows[k][0] for k in known])
        for k, good in zip(known, ok, strict=True):
            allowed[k] = bool(good)
        for name in names:
            mine = [allowed[k] for k, (_, n) in enumerate(rows) if n == name]
            share[name] = sum(mine) / len(mine) if mine else 1.0
    counters = [store.counters(n) for n in names]
    credible = harm_credibility(
        [c.helpful * share[n] for c, n in zip(counters, names, strict=True)],
        [c.harmful for c in counters])
    distrusted = {n for n, p in zip(names, credible, strict=True) if p >= credibility}
    seen: set[tuple[str, str]] = set()
    pairs = []
    for (query, name), good in zip(rows, allowed, strict=True):
        if not good or name in distrusted or (query, name) in seen:
            continue
        seen.add((query, name))
        pairs.append(TrainingPair(query=query, skill=name, text=full_text(skills[name])))
    return pairs


OVER_PRAISED_FLOOR = 5
"""drop_over_praised never drops a skill praised for this many prompts or fewer (in a small
store most skills have one or two, and a fence over them says nothing)."""


def drop_over_praised(pairs: Sequence[TrainingPair], fence: float,
                      floor: int = OVER_PRAISED_FLOOR) -> tuple[list[TrainingPair], list[str]]:
    """PAIRS without those of an over-praised skill: one whose pairs cover more prompts than
    Tukey's upper fence over the skills with pairs, Q3 + FENCE * (Q3 - Q1) of their prompt
    counts (1.5: Tukey's "outside" values), and more than FLOOR. Returns the kept pairs, in
    their order, and the names dropped (sorted); FENCE 0 keeps every pair.

    Why (docs/blend.md, "Defences", C5): a judge that a description persuades praises that
    skill wherever it is shown, so its praise spreads over every prompt it is plausible for
    (on MetaTool an injected copy of a tool collected 14-31 prompts in one round and 56-141
    in three, where no honest tool had more than 10). Such praise says the least about any
    one prompt, and as training pairs it teaches the model whatever the skill's text adds.
    The skill keeps its ranking evidence (C4's terms still count it, under their own caps);
    it only teaches the tuned model nothing."""
    if fence <= 0 or not pairs:
        return list(pairs), []
    prompts: dict[str, set[str]] = {}
    for pair in pairs:
        prompts.setdefault(pair.skill, set()).add(pair.query)
    counts = sorted(len(v) for v in prompts.values())
    if len(counts) < 2:
        return list(pairs), []
    q1, _, q3 = statistics.quantiles(counts, n=4, method="inclusive")
    bound = max(q3 + fence * (q3 - q1), floor)
    dropped = sorted(n for n, qs in prompts.items() if len(qs) > bound)
    if not dropped:
        return list(pairs), []
    gone = set(dropped)
    return [p for p in pairs if p.skill not in gone], dropped


def learned_pairs(model: ModelInfo) -> list[TrainingPair]:
    """Every pair a saved model was trained on (its pairs.jsonl; for a model trained from
    another tuned one, that one's pairs first); [] when the file is missing or unreadable."""
    try:
        lines = (model.path / "pairs.jsonl").read_text(encoding="utf-8").splitlines()
        rows = [json.loads(line) for line in lines if line.strip()]
        return [TrainingPair(str(r["query"]), str(r["skill"]), str(r["text"]),
                             str(r.get("negative") or "")) for r in rows]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def pairs_fingerprint(pairs: Sequence[TrainingPair]) -> str:
    """sha256 over the pairs, independent of their order."""
    digest = hashlib.sha256()
    for line in sorted(json.dumps([p.query, p.text, *([p.negative] if p.negative else [])])
                       for p in pairs):  # without negatives: the fingerprint pairs had before
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def training_key(base_id: str, fingerprint: str, settings: TuneSettings) -> str:
    """What a fine-tune depends on: the same key, the same training (a resume reuses it)."""
    blob = json.dumps({"base": base_id, "pairs": fingerprint, "settings": settings.to_dict()},
                      sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass
class _Batches:
    """Shuffled batches in which no skill text appears twice, as a positive or a negative
    (a negative that is another pair's positive would teach against a right answer); a
    batch holds pairs with hard negatives or pairs without, never both."""

    pairs: Sequence[TrainingPair]
    size: int
    rng: random.Random

    def epoch(self) -> list[list[TrainingPair]]:
        todo = list(self.pairs)
        self.rng.shuffle(todo)
        batches: list[list[TrainingPair]] = []
        while todo:
            batch: list[TrainingPair] = []
            texts: set[str] = set()
            rest: list[TrainingPair] = []
            for pair in todo:
                fits = not batch or len(batch) < self.size and pair.text not in texts and \
                    (not batch or bool(batch[0].negative) == bool(pair.negative)) and \
                    (not pair.negative or pair.negative not in texts | {pair.text})
                if fits:
                    batch.append(pair)
                    texts.update(filter(None, (pair.text, pair.negative)))
                else:
                    rest.append(pair)
            batches.append(batch)
            todo = rest
        return batches


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt(3) parameters (glibc's malloc.h)


@functools.cache
def bound_heap() -> bool:
    """Serve large allocations from mmap and give freed heap back (glibc only; once per process).

    Training allocates and frees tensors of a few MB per step. glibc raises its mmap threshold
    after each such free, so the next ones come from the heap, whose freed memory it keeps:
    measured here (320 pairs, 10 steps), a fine-tune's process held 2.1 GB with the default
    and 0.9 GB with a fixed 64 KiB threshold (peak 2.4 GB against 1.8 GB); the price is fresh
    pages for those tensors, about 40% more time a step (docs/blend.md, "C5").
    The setting stays for the rest of the process (a sweep's later rounds included).
    Returns whether it took (False off glibc: nothing is changed there).
    """
    try:
        import ctypes  # noqa: PLC0415
        import ctypes.util  # noqa: PLC0415

        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, 64 << 10)) and bool(
            libc.mallopt(_M_TRIM_THRESHOLD, 128 << 10))
    except (OSError, AttributeError):
        return False


def fine_tune(base: str, pairs: Sequence[TrainingPair], models: ModelStore, *,
              settings: TuneSettings | None = None, lineage: dict[str, Any] | None = None,
              on_step: Callable[[int, int, float], None] | None = None,
              learned: Sequence[TrainingPair] = ()) -> ModelInfo:
    """Train a copy of the model at `base` (a folder) on `pairs` and save it in `models`.

    The same base, pairs and settings give back the model already saved (a resumed sweep
    trains nothing twice). `on_step(step, steps, loss)` is called after every step. A stop
    (Ctrl-C, SIGTERM, an exception) leaves nothing in the store. `learned`: the pairs `base`
    (a tuned model) was trained on already; the saved model's pairs.jsonl lists them before
    `pairs`, so it names every pair the model has learned (`learned_pairs`).
    """
    from mythloop.procs import STOPPING  # noqa: PLC0415
    from mythloop.router.embedder import model_id_for  # noqa: PLC0415

    if not pairs:
        raise ValueError("fine_tune needs at least one training pair")
    # a negative that is the pair's own skill text would teach against the right answer
    pairs = [replace(p, negative="") if p.negative == p.text else p for p in pairs]
    settings = settings or TuneSettings()
    base_id = model_id_for(base)
    fingerprint = pairs_fingerprint(pairs)
    key = training_key(base_id, fingerprint, settings)
    found = models.find(training_key=key)
    if found is not None:
        return found
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import torch  # noqa: PLC0415 (heavy)
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415
    from sentence_transformers.sentence_transformer.losses import (  # noqa: PLC0415
        MultipleNegativesRankingLoss,
    )

    bound_heap()
    threads = torch.get_num_threads()
    if settings.threads:
        torch.set_num_threads(settings.threads)
    started = time.perf_counter()
    try:
        torch.manual_seed(settings.seed)
        model = SentenceTransformer(base, device="cpu")  # a copy: never the shared instance
        model.max_seq_length = settings.max_seq_length
        loss_fn = MultipleNegativesRankingLoss(model, scale=settings.scale)
        optimiser = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
        batches = _Batches(pairs, max(2, settings.batch_size), random.Random(settings.seed))
        plan = [batches.epoch() for _ in range(settings.epochs)]
        steps, step, last = sum(len(e) for e in plan), 0, float("nan")
        model.train()
        for epoch in plan:
            for batch in epoch:
                if STOPPING.is_set():
                    raise KeyboardInterrupt("fine-tune stopped (Ctrl-C or SIGTERM)")
                columns = [model.preprocess([p.query for p in batch]),
                           model.preprocess([p.text for p in batch])]
                if batch[0].negative:  # (anchor, positive, negative): MNRL's hard negatives
                    columns.append(model.preprocess([p.negative for p in batch]))
                loss = loss_fn(columns, None)
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                step, last = step + 1, float(loss.detach())
                if on_step is not None:
                    on_step(step, steps, last)
        model.eval()
        seconds = round(time.perf_counter() - started, 3)
        record = {
            **(lineage or {}),
            "base_model": base_id, "base_path": str(base),
            "training_key": key, "pairs": len(pairs), "pairs_fingerprint": fingerprint,
            "skills": len({p.skill for p in pairs}), "settings": settings.to_dict(),
            **({"pairs_learned": len(learned) + len(pairs)} if learned else {}),
            "steps": steps, "final_loss": round(last, 6), "train_seconds": seconds,
            "loss": "MultipleNegativesRankingLoss (in-batch negatives"
                    + (", hard negatives from the catalogs shown)" if any(p.negative for p in pairs)
                       else ")"),
        }
        return models.save(model, record, pairs=[asdict(p) for p in (*learned, *pairs)])
    finally:
        torch.set_num_threads(threads)
