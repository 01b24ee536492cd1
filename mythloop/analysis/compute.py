"""Assemble every number of the analysis into one JSON-ready dict (metrics.json)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mythloop.analysis.load import SweepResults
from mythloop.analysis.metrics import (
    GAP_CENSOR_EPS,
    MISS_RANK,
    TIERS,
    VERDICTS,
    attack_metrics,
    attack_units,
    cold_split_metrics,
    cold_split_units,
    is_proportion,
    measurement_metrics,
    measurement_units,
    metric_range,
    pair_details,
    turn_counts,
    turn_metrics,
    turn_units,
)
from mythloop.analysis.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    count_interval,
    difference,
    interval,
    paired_difference,
    power_mde,
    summarize,
)
from mythloop.vocab import BASELINE_CONDITION

__all__ = ["HEADLINE", "POWER_METRICS", "SCHEMA_VERSION", "baseline_condition",
           "compute_metrics", "unit_matrix"]

SCHEMA_VERSION = 1
# (metric key, label) of the headline table, in order.
HEADLINE: tuple[tuple[str, str], ...] = (
    ("in_distribution.hit@1", "hit@1 (in-distribution)"),
    ("in_distribution.hit@3", "hit@3 (in-distribution)"),
    ("in_distribution.hit@5", "hit@5 (in-distribution)"),
    ("in_distribution.mrr", "MRR (in-distribution)"),
    ("trap.trap_win_rate", "trap-win rate"),
    ("trap.gap_all", "score gap gold - poisoned (all pairs)"),
    ("catalog.in_distribution.poisoned_rate", "poisoned skill in top-5 catalog"),
    ("heldout.hit@3", "hit@3 (held-out)"),
    ("null.abstention_rate", "null-prompt abstention"),
)
# The differences the report states its power for (the smallest detectable at 80%).
POWER_METRICS: tuple[tuple[str, str], ...] = (
    ("in_distribution.hit@5", "hit@5 (in-distribution)"),
    ("trap.trap_win_rate", "trap-win rate"),
)
INTERVAL_TEXT = (
    "95% interval with the prompt as the unit: the variance of the mean clustered by prompt, "
    "plus the replicates' shared component (prompts x replicates, crossed); a Wilson score "
    "interval at the effective sample size keeps rates, ranks and their differences inside "
    "their range (t quantile, P - 1 df). Differences are paired by prompt (and by "
    "replicate when both ran the same replicates). With 1 replicate only prompt variation is "
    "covered. A rate counted over turns or verdicts (verdict accuracy, tag parse rate) "
    "takes a Wilson interval on its counts k of n (design effect over replicates); other "
    "numbers that are not a mean over prompts take each replicate as the unit. Identical "
    "ranks (or MRR, nDCG) have no spread, at a bound as inside. See docs/statistics.md."
)

Cells = dict[str, dict[int, dict[int, dict[str, Any]]]]
# cond -> replicate -> round -> metric key -> per-prompt values, one slot per prompt of the
# sweep (results.prompts order; NaN where the prompt has no value): numpy, so the intervals
# of a MetaTool-size sweep (2,363 prompts x rounds x conditions) are column stacks
UnitCells = dict[str, dict[int, dict[int, dict[str, np.ndarray]]]]
# cond -> replicate -> round -> rate key -> (k, n): the rates counted over turns or verdicts
CountCells = dict[str, dict[int, dict[int, dict[str, tuple[int, int]]]]]


def baseline_condition(conditions: list[str]) -> str | None:
    """C0 (blend off) is the baseline every other condition is compared with."""
    if BASELINE_CONDITION in conditions:
        return BASELINE_CONDITION
    return conditions[0] if conditions else None


def _column(per_prompt: dict[str, float], index: dict[str, int]) -> np.ndarray:
    out = np.full(len(index), np.nan)
    for pid, v in per_prompt.items():
        out[index[pid]] = v
    return out


def _cells(results: SweepResults, threshold: float) -> tuple[Cells, UnitCells, CountCells]:
    """cond -> replicate -> round -> flat metrics of that cell, the per-prompt values, and
    the counts of the rates counted over turns."""
    cells: Cells = {}
    units: UnitCells = {}
    counts: CountCells = {}
    index = {pid: i for i, pid in enumerate(results.prompts)}
    cold = frozenset(results.sweep.cold_skills)
    injected = results.sweep.injected
    for (cond, rep), box in sorted(results.sandboxes.items()):
        for round_idx in results.rounds:
            rows = box.rounds.get(round_idx, [])
            turns = box.turns_of_round(round_idx)
            metrics = measurement_metrics(rows, results.prompts, threshold)
            metrics.update(cold_split_metrics(rows, results.prompts, cold))
            metrics.update(attack_metrics(rows, results.prompts, injected))
            metrics.update(turn_metrics(turns, results.prompts))
            cells.setdefault(cond, {}).setdefault(rep, {})[round_idx] = metrics
            per_prompt = measurement_units(rows, results.prompts, threshold)
            per_prompt.update(cold_split_units(rows, results.prompts, cold))
            per_prompt.update(attack_units(rows, results.prompts, injected))
            per_prompt.update(turn_units(turns, results.prompts))
            units.setdefault(cond, {}).setdefault(rep, {})[round_idx] = {
                key: _column(values, index) for key, values in per_prompt.items()}
            counts.setdefault(cond, {}).setdefault(rep, {})[round_idx] = turn_counts(
                turns, results.prompts)
    return cells, units, counts


def _keys(cells: Cells) -> list[str]:
    return sorted(
        {
            k
            for reps in cells.values()
            for rounds in reps.values()
            for m in rounds.values()
            for k in m
        }
    )


def _observed_rounds(cells: Cells) -> list[int]:
    """Rounds where some cell has any metric."""
    return sorted(
        {r for reps in cells.values() for rounds in reps.values() for r, m in rounds.items() if m}
    )


def unit_matrix(by_rep: dict[int, dict[str, float] | None], reps: list[int],
                prompt_ids: list[str]) -> np.ndarray:
    """prompts x replicates matrix of a metric's per-prompt values (NaN where missing), from
    {replicate: {prompt id: value}} (`metrics.measurement_units`)."""
    out = np.full((len(prompt_ids), len(reps)), np.nan)
    for j, rep in enumerate(reps):
        col = by_rep.get(rep) or {}
        for i, pid in enumerate(prompt_ids):
            v = col.get(pid)
            if v is not None:
                out[i, j] = v
    return out


def _stack(units: UnitCells, cond: str, round_idx: int, key: str,
           reps: list[int] | None = None) -> tuple[list[int], np.ndarray | None]:
    """(replicates with values, every prompt x those replicates) of a metric at a round."""
    cols = {rep: rounds.get(round_idx, {}).get(key) for rep, rounds in units[cond].items()}
    have = sorted(rep for rep, col in cols.items() if col is not None
                  and (reps is None or rep in reps))
    if not have:
        return [], None
    return have, np.column_stack([col for rep in have if (col := cols[rep]) is not None])


def _with_replicates(s: dict[str, Any], per_rep: dict[int, Any]) -> dict[str, Any]:
    """The per-replicate means too (the history and compare read them)."""
    present = {rep: v for rep, v in sorted(per_rep.items()) if v is not None}
    s["replicates"] = list(present)
    s["values"] = [round(float(v), 12) for v in present.values()]
    return s


def _level(cells: Cells, units: UnitCells, counts: CountCells, cond: str, round_idx: int,
           key: str) -> dict[str, Any] | None:
    """One condition's metric at a round: over prompts x replicates when the metric is a
    mean over prompts, from its counts when it is a rate counted over turns, else over
    replicates."""
    per_rep = {rep: rounds.get(round_idx, {}).get(key) for rep, rounds in cells[cond].items()}
    if all(v is None for v in per_rep.values()):
        return None
    reps, m = _stack(units, cond, round_idx, key)
    if m is not None and not np.all(np.isnan(m)):
        return _with_replicates(interval(m, metric_range(key), proportion=is_proportion(key)),
                                per_rep)
    counted = {rep: c for rep, rounds in counts.get(cond, {}).items()
               if (c := rounds.get(round_idx, {}).get(key)) is not None}
    if counted:
        return count_interval(counted)
    return summarize(per_rep, metric_range(key), proportion=is_proportion(key))


def _per_round(cells: Cells, units: UnitCells, counts: CountCells, keys: list[str]
               ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cond, reps in cells.items():
        rounds = sorted({r for by_round in reps.values() for r in by_round})
        for round_idx in rounds:
            summaries = {}
            for key in keys:
                s = _level(cells, units, counts, cond, round_idx, key)
                if s is not None:
                    summaries[key] = s
            out.setdefault(cond, {})[str(round_idx)] = summaries
    return out


def _overall(results: SweepResults) -> dict[str, Any]:
    """Turn metrics pooled over all rounds of each replicate, then across replicates: a rate
    from its counts over every replicate (k of n), a count over replicates."""
    out: dict[str, Any] = {}
    for cond in results.conditions:
        turns = {rep: results.sandboxes[(cond, rep)].turns for rep in results.replicates(cond)}
        per_rep = {rep: turn_metrics(t, results.prompts) for rep, t in turns.items()}
        counted = {rep: turn_counts(t, results.prompts) for rep, t in turns.items()}
        keys = sorted({k for m in per_rep.values() for k in m})
        summaries = {}
        for k in keys:
            if any(k in c for c in counted.values()):
                s = count_interval({r: c.get(k) for r, c in counted.items()})
            else:
                s = summarize({r: m.get(k) for r, m in per_rep.items()}, metric_range(k),
                              proportion=is_proportion(k))
            if s:
                summaries[k] = s
        out[cond] = summaries
    return out


def _both(t: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows (prompts) with a value on both sides."""
    return ~np.all(np.isnan(t), axis=1) & ~np.all(np.isnan(b), axis=1)


def _paired(units: UnitCells, cells: Cells, cond_t: str, round_t: int, cond_b: str,
            round_b: int, key: str, *, same_runs: bool = False) -> dict[str, Any] | None:
    """cond_t at round_t minus cond_b at round_b, paired by prompt (and by replicate when
    both have the same replicates; with same_runs, two rounds of one condition, only the
    replicates measured at both count); over replicates when the metric is no mean over
    prompts."""
    t_reps, t = _stack(units, cond_t, round_t, key)
    b_reps, b = _stack(units, cond_b, round_b, key)
    if same_runs and t is not None and b is not None:
        common = sorted(set(t_reps) & set(b_reps))
        t_reps, t = _stack(units, cond_t, round_t, key, common)
        b_reps, b = _stack(units, cond_b, round_b, key, common)
    if t is not None and b is not None and _both(t, b).any():
        return paired_difference(t, b, metric_range(key), paired_replicates=t_reps == b_reps,
                                 proportion=is_proportion(key))
    return difference(
        {rep: m.get(round_t, {}).get(key) for rep, m in cells[cond_t].items()},
        {rep: m.get(round_b, {}).get(key) for rep, m in cells[cond_b].items()},
        metric_range(key), proportion=is_proportion(key))


def _differences(cells: Cells, units: UnitCells, conditions: list[str], keys: list[str]
                 ) -> dict[str, Any]:
    """Each condition minus the baseline, per round."""
    base = baseline_condition(conditions)
    out: dict[str, Any] = {}
    for cond in conditions:
        if cond == base or base is None:
            continue
        per_round: dict[str, Any] = {}
        rounds = sorted({r for by_round in cells[cond].values() for r in by_round})
        for round_idx in rounds:
            entry = {}
            for key in keys:
                d = _paired(units, cells, cond, round_idx, base, round_idx, key)
                if d is not None:
                    entry[key] = d
            per_round[str(round_idx)] = entry
        out[f"{cond}-{base}"] = {"treated": cond, "baseline": base, "per_round": per_round}
    return out


def _deltas(cells: Cells, units: UnitCells, first: int, last: int, keys: list[str]
            ) -> dict[str, Any]:
    """Last round minus first round, paired by prompt and replicate."""
    out: dict[str, Any] = {}
    for cond in cells:
        entry = {}
        for key in keys:
            s = _paired(units, cells, cond, last, cond, first, key, same_runs=True)
            if s is not None:
                entry[key] = s
        out[cond] = entry
    return out


def _power(units: UnitCells, conditions: list[str], last: int) -> dict[str, Any]:
    """Per treated condition and POWER_METRICS: the smallest C - C0 difference at the last
    round a paired test over this run's prompts detects with 80% power (stats.power_mde)."""
    base = baseline_condition(conditions)
    out: dict[str, Any] = {}
    for cond in conditions:
        if cond == base or base is None:
            continue
        entry = {}
        for key, _label in POWER_METRICS:
            t_reps, t = _stack(units, cond, last, key)
            b_reps, b = _stack(units, base, last, key)
            if t is None or b is None or not _both(t, b).any():
                continue
            rows = _both(t, b)
            d = np.nanmean(t[rows], axis=1) - np.nanmean(b[rows], axis=1)
            sd = float(np.std(d, ddof=1)) if d.size > 1 else None
            entry[key] = power_mde(sd, int(d.size), replicates=min(len(t_reps), len(b_reps)),
                                   largest=1.0)
        out[f"{cond}-{base}"] = entry
    return out


def _last_units(units: UnitCells, conditions: list[str], last: int,
                prompt_ids: list[str]) -> dict[str, Any]:
    """Per condition and headline metric, the per-prompt values at the last round (compare
    pairs two sweeps by prompt with them): prompt ids, replicate ids, prompts x replicates."""
    out: dict[str, Any] = {}
    for cond in conditions:
        entry = {}
        for key, _label in HEADLINE:
            reps, m = _stack(units, cond, last, key)
            if m is None:
                continue
            rows = np.flatnonzero(~np.all(np.isnan(m), axis=1))
            entry[key] = {"prompts": [prompt_ids[i] for i in rows], "replicates": reps,
                          "values": [[None if np.isnan(v) else round(float(v), 12) for v in m[i]]
                                     for i in rows]}
        out[cond] = entry
    return out


def _twin_status(rows: list[dict[str, Any]], pid: str, twin: str) -> str:
    """The twin's status in that prompt's ranking, else anywhere in the round, else unseen."""
    for row in rows:
        if row["skill_name"] == twin and row["prompt_id"] == pid:
            return str(row.get("status") or "unknown")
    for row in rows:
        if row["skill_name"] == twin:
            return str(row.get("status") or "unknown")
    return "not ranked"


def _pairs(results: SweepResults, first: int, last: int) -> dict[str, Any]:
    """Per trap pair and condition: gold and twin ranks at the first and last round."""
    out: dict[str, Any] = {}
    for cond in results.conditions:
        reps = results.replicates(cond)
        details = {
            (rep, r): pair_details(rows, results.prompts)
            for rep in reps
            for r in (first, last)
            if (rows := results.sandboxes[(cond, rep)].rounds.get(r))
        }
        # Trap prompts first, then their held-out paraphrases.
        pids = sorted(
            {pid for d in details.values() for pid in d},
            key=lambda pid: (results.prompts[pid].kind != "trap", pid),
        )
        cond_out: dict[str, Any] = {}
        for pid in pids:
            info = results.prompts[pid]
            entry: dict[str, Any] = {
                "kind": info.kind,
                "gold": info.expected_skill,
                "twin": info.poisoned_twin,
            }
            for label, r in (("first", first), ("last", last)):
                got = {rep: details[(rep, r)][pid] for rep in reps if (rep, r) in details}
                entry[label] = {
                    "round": r,
                    "gold_rank": summarize(
                        {k: float(v["gold_rank"]) for k, v in got.items()},
                        metric_range("gold_rank"),
                    ),
                    "twin_rank": summarize(
                        {k: float(v["twin_rank"]) for k, v in got.items()},
                        metric_range("twin_rank"),
                    ),
                    "win_rate": summarize(
                        {k: 1.0 if v["win"] else 0.0 for k, v in got.items()},
                        metric_range("trap_win_rate"),
                    ),
                    "gap": summarize({k: v["gap"] for k, v in got.items()}),
                }
            entry["twin_status_last"] = {
                str(rep): _twin_status(rows, pid, info.poisoned_twin or "")
                for rep in reps
                if (rows := results.sandboxes[(cond, rep)].rounds.get(last))
            }
            cond_out[pid] = entry
        out[cond] = cond_out
    return out


def _verdict_mix(results: SweepResults) -> dict[str, Any]:
    """Verdict counts per tier, pooled over every round and replicate of a condition."""
    out: dict[str, Any] = {}
    for cond in results.conditions:
        turns = [
            t for rep in results.replicates(cond) for t in results.sandboxes[(cond, rep)].turns
        ]
        m = turn_metrics(turns, results.prompts)
        out[cond] = {
            tier: {v: int(m.get(f"verdict_mix.{tier}.{v}") or 0) for v in VERDICTS}
            for tier in TIERS
        }
    return out


def _failures(results: SweepResults) -> list[dict[str, Any]]:
    """Every turn that did not end ok."""
    rows = []
    for (cond, rep), box in sorted(results.sandboxes.items()):
        for turn in box.turns:
            if turn["status"] != "ok":
                rows.append(
                    {
                        "round": turn["round"],
                        "cond": cond,
                        "replicate": rep,
                        "prompt_id": turn["prompt_id"],
                        "status": turn["status"],
                        "error": str(turn.get("error") or ""),
                    }
                )
    return sorted(rows, key=lambda r: (r["round"], r["cond"], r["replicate"], r["prompt_id"]))


def _headline(
    per_round: dict[str, Any],
    diffs: dict[str, Any],
    deltas: dict[str, Any],
    conditions: list[str],
    first: int,
    last: int,
) -> list[dict[str, Any]]:
    """The headline metrics at the first and last round, with differences and deltas."""
    rows = []
    for key, label in HEADLINE:
        row: dict[str, Any] = {"key": key, "label": label, "conditions": {}, "differences": {}}
        for cond in conditions:
            rounds = per_round.get(cond, {})
            row["conditions"][cond] = {
                "first": rounds.get(str(first), {}).get(key),
                "last": rounds.get(str(last), {}).get(key),
                "delta": deltas.get(cond, {}).get(key),
            }
        for name, d in diffs.items():
            row["differences"][name] = {
                "first": d["per_round"].get(str(first), {}).get(key),
                "last": d["per_round"].get(str(last), {}).get(key),
            }
        rows.append(row)
    return rows


def compute_metrics(
    results: SweepResults,
    *,
    abstain_threshold: float,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Every number of the analysis, JSON-ready and deterministic. (resamples and seed are
    accepted for earlier callers; the intervals are analytic.)"""
    del resamples, seed
    cells, units, counts = _cells(results, abstain_threshold)
    keys = _keys(cells)
    observed = _observed_rounds(cells)
    first, last = (observed[0], observed[-1]) if observed else (0, 0)
    conditions = results.conditions
    per_round = _per_round(cells, units, counts, keys)
    diffs = _differences(cells, units, conditions, keys)
    deltas = _deltas(cells, units, first, last, keys)
    return {
        "schema_version": SCHEMA_VERSION,
        "sweep": results.sweep.to_json(),
        "analysis": {
            "abstain_threshold": abstain_threshold,
            "miss_rank": MISS_RANK,
            "gap_censor_eps": GAP_CENSOR_EPS,
            "confidence": 0.95,
            "interval": INTERVAL_TEXT,
        },
        "conditions": conditions,
        "baseline": baseline_condition(conditions),
        "replicates": {c: results.replicates(c) for c in conditions},
        "rounds": results.rounds,
        "first_round": first,
        "last_round": last,
        "prompts": {
            pid: {
                "kind": p.kind,
                "expected_skill": p.expected_skill,
                "poisoned_twin": p.poisoned_twin,
            }
            for pid, p in results.prompts.items()
        },
        "data_issues": [i.as_dict() for i in results.issues],
        "cells": {
            c: {str(rep): {str(r): m for r, m in rounds.items()} for rep, rounds in reps.items()}
            for c, reps in cells.items()
        },
        "per_round": per_round,
        "overall": _overall(results),
        "differences": diffs,
        "deltas": deltas,
        "power": _power(units, conditions, last),
        "last_round_units": _last_units(units, conditions, last, list(results.prompts)),
        "pairs": _pairs(results, first, last),
        "verdict_mix": _verdict_mix(results),
        "failures": _failures(results),
        "headline": _headline(per_round, diffs, deltas, conditions, first, last),
    }
