"""Collateral of an attack: two sweeps of the same prompts and pool, one without the attack
(`--judge-persuade 0`) and one with it, compared per condition and round.

Collateral is the right skills' held-out hit@1 of the attacked sweep minus the clean one's,
paired by prompt (and by replicate when both ran the same replicate seeds), with the
report's prompt-level interval (stats.paired_difference); attack success is shown for both
sides. `mythloop compare CLEAN ATTACKED` adds it when either sweep's pool held injected
skills (mythloop/analysis/compare.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mythloop.analysis.compute import UnitCells, _cells, _stack
from mythloop.analysis.core import _threshold
from mythloop.analysis.load import SweepResults
from mythloop.analysis.metrics import metric_range
from mythloop.analysis.stats import interval, paired_difference

__all__ = ["ATTACK_KEYS", "COLLATERAL_KEY", "collateral"]

COLLATERAL_KEY = "heldout.hit@1"
ATTACK_KEYS = ("attack.heldout.top1_rate", "attack.heldout.top5_rate")


def _aligned(units: UnitCells, results: SweepResults, cond: str, round_idx: int, key: str,
             pids: list[str]) -> tuple[list[int], np.ndarray | None]:
    """(replicates, prompts x replicates) of a metric with its rows in the order of `pids`."""
    if cond not in units:
        return [], None
    reps, m = _stack(units, cond, round_idx, key)
    if m is None:
        return reps, None
    index = {pid: i for i, pid in enumerate(results.prompts)}
    return reps, m[[index[p] for p in pids]]


def collateral(clean: SweepResults, attacked: SweepResults) -> list[dict[str, Any]]:
    """Per condition both ran and round both measured: held-out hit@1 on each side, attacked
    minus clean (paired), and attack success on each side. Raises ValueError (one line) when
    the two sweeps ran different prompts."""
    if set(clean.prompts) != set(attacked.prompts):
        raise ValueError("collateral needs two sweeps of the same prompts")
    units_c = _cells(clean, _threshold(clean.sweep, None))[1]
    units_a = _cells(attacked, _threshold(attacked.sweep, None))[1]
    pids = list(clean.prompts)
    seeds_c, seeds_a = clean.sweep.seeds_by_replicate(), attacked.sweep.seeds_by_replicate()
    rows = []
    for cond in [c for c in attacked.conditions if c in clean.conditions]:
        for round_idx in sorted(set(clean.rounds) & set(attacked.rounds)):
            row: dict[str, Any] = {"cond": cond, "round": round_idx}
            reps_c, c = _aligned(units_c, clean, cond, round_idx, COLLATERAL_KEY, pids)
            reps_a, a = _aligned(units_a, attacked, cond, round_idx, COLLATERAL_KEY, pids)
            if c is None or a is None:
                continue
            bounds = metric_range(COLLATERAL_KEY)
            same = reps_c == reps_a and all(seeds_c.get(str(r)) == seeds_a.get(str(r)) for r in reps_c)
            row["clean"] = interval(c, bounds)
            row["attacked"] = interval(a, bounds)
            try:
                row["collateral"] = paired_difference(a, c, bounds, paired_replicates=same)
            except ValueError:
                row["collateral"] = None
            for key in ATTACK_KEYS:
                for side, units, results in (("clean", units_c, clean),
                                             ("attacked", units_a, attacked)):
                    _, m = _aligned(units, results, cond, round_idx, key, pids)
                    ok = m is not None and not np.all(np.isnan(m))
                    row[f"{side} {key}"] = interval(m, metric_range(key)) if ok else None
            rows.append(row)
    return rows
