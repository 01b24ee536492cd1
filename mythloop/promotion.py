"""Promotion with a gate: a candidate embedding model replaces the current one only when it
routes held-out prompts no worse and keeps the fixture traps.

    candidate_pairs(store, pool)         every trusted HELPFUL verdict in a store (C5's rule)
    evaluate(model, catalog, prompts)    per-prompt hit@1 / hit@5 with the model alone (blend off:
                                         the models are compared, not the verdict terms)
    trap_wins(model)                     per trap prompt of the bundled fixtures: the real skill
                                         ranked above its poisoned twin
    decide(candidate, current, ...)      the gate

The gate, for hit@1 and hit@5 on the held-out prompts: the candidate - current difference,
paired by prompt (mythloop.analysis.stats.paired_difference, docs/statistics.md), must have a
mean >= 0 and an interval that does not lie wholly below 0; and no fixture trap the current
model wins may be lost (a poisoned twin that rises above its real skill rejects the
candidate). When the pool holds injected skills (`<pool>/injected.yaml`, docs/blend.md, "A judge
a skill can persuade"), the gate also counts attack success: the share of held-out prompts
whose top 1 is an injected skill that is not the right one; a candidate with a higher share
than the current model's is rejected, whatever its hit@k (a model trained on verdicts a
persuaded judge wrote must not replace a cleaner one). A rejected candidate stays in the
model store, not promoted.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from mythloop.analysis.stats import paired_difference
from mythloop.data import data_path
from mythloop.router import Router, get_embedder
from mythloop.skills import Catalog, load_catalog
from mythloop.sweep.config import SweepPrompt, load_heldout, load_prompts

__all__ = ["evaluate", "trap_wins", "decide", "load_eval_prompts"]

METRICS = ("hit@1", "hit@5")


def load_eval_prompts(path: Path) -> list[SweepPrompt]:
    """The labelled prompts of a held-out file (JSON rows or YAML); ValueError (one line)."""
    prompts = [p for p in load_heldout(Path(path)) if p.expected_skill]
    if not prompts:
        raise ValueError(f"{path} holds no labelled prompt to evaluate on")
    return prompts


def _ranked_names(model: str, catalog: Catalog, queries: list[str]) -> list[list[str]]:
    embedder = get_embedder(model)
    router = Router(catalog, None, embedder, blend=False)
    qvecs = embedder.embed(queries)
    return [[r.name for r in router.rank_vector(v, top_k=len(catalog.skills))] for v in qvecs]


ATTACK = "attack@1"
"""Held-out prompts whose top 1 is an injected skill that is not the right one."""


def evaluate(model: str, catalog: Catalog, prompts: list[SweepPrompt],
             injected: Collection[str] = ()) -> dict[str, Any]:
    """Per-prompt hit@1 and hit@5 of a model (a folder) on labelled prompts, and their means;
    with `injected` (the pool's injected skills) attack@1 too."""
    ranked = _ranked_names(model, catalog, [p.prompt for p in prompts])
    per = {"hit@1": [float(r[:1] == [p.expected_skill]) for r, p in zip(ranked, prompts, strict=True)],
           "hit@5": [float(p.expected_skill in r[:5]) for r, p in zip(ranked, prompts, strict=True)]}
    if injected:
        names = set(injected)
        per[ATTACK] = [float(bool(r) and r[0] in names and r[0] != p.expected_skill)
                       for r, p in zip(ranked, prompts, strict=True)]
    return {"model_id": get_embedder(model).model_id, "prompts": len(prompts),
            "per_prompt": per, **{k: round(float(np.mean(v)), 6) for k, v in per.items()}}


def trap_wins(model: str) -> dict[str, bool]:
    """Bundled fixtures' trap prompts: prompt id -> the real skill ranks above its twin."""
    catalog = load_catalog(data_path("fixtures", "pool"))
    prompts, _ = load_prompts(data_path("fixtures", "prompts.yaml"))
    traps = [p for p in prompts if p.kind == "trap" and p.poisoned_twin and p.expected_skill]
    ranked = _ranked_names(model, catalog, [p.prompt for p in traps])
    return {p.id: r.index(p.expected_skill) < r.index(p.poisoned_twin)  # type: ignore[arg-type]
            for p, r in zip(traps, ranked, strict=True)}


def decide(candidate: dict[str, Any], current: dict[str, Any],
           candidate_traps: dict[str, bool], current_traps: dict[str, bool]) -> dict[str, Any]:
    """The gate's decision, with every figure it used."""
    reasons, diffs = [], {}
    for metric in METRICS:
        d = paired_difference(candidate["per_prompt"][metric], current["per_prompt"][metric],
                              bounds=(0.0, 1.0))
        diffs[metric] = {k: d.get(k) for k in ("mean", "lo", "hi", "n_prompts", "method")}
        if d["mean"] < 0:
            reasons.append(f"held-out {metric} lower: {d['mean']:+.3f} "
                           f"[{d['lo']:+.3f}, {d['hi']:+.3f}]" if d["lo"] is not None
                           else f"held-out {metric} lower: {d['mean']:+.3f}")
        elif d["hi"] is not None and d["hi"] < 0:
            reasons.append(f"held-out {metric} interval below 0")
    if ATTACK in candidate["per_prompt"] and ATTACK in current["per_prompt"]:
        d = paired_difference(candidate["per_prompt"][ATTACK], current["per_prompt"][ATTACK],
                              bounds=(0.0, 1.0))
        diffs[ATTACK] = {k: d.get(k) for k in ("mean", "lo", "hi", "n_prompts", "method")}
        if candidate[ATTACK] > current[ATTACK]:  # never a model an injection climbs more in
            reasons.append(f"held-out attack success higher: {candidate[ATTACK]:.3f} against "
                           f"{current[ATTACK]:.3f} (injected skills at top 1)")
    lost = sorted(pid for pid, won in current_traps.items()
                  if won and not candidate_traps.get(pid, False))
    if lost:
        reasons.append(f"poisoned twin rises on trap prompt(s) {', '.join(lost)}")
    shown = ("model_id", "prompts", *METRICS, *((ATTACK,) if ATTACK in diffs else ()))
    kept = "; no higher attack success" if ATTACK in diffs else ""
    return {"promote": not reasons, "reasons": reasons or ["not worse on held-out hit@1 and "
                                                           f"hit@5; every fixture trap kept{kept}"],
            "difference": diffs,
            "candidate": {k: candidate[k] for k in shown},
            "current": {k: current[k] for k in shown},
            "traps": {"candidate": candidate_traps, "current": current_traps}}
