"""Assemble every number of the analysis into one JSON-ready dict (metrics.json)."""

from __future__ import annotations

from typing import Any

from mythloop.analysis.load import SweepResults
from mythloop.analysis.metrics import (
    GAP_CENSOR_EPS,
    MISS_RANK,
    TIERS,
    VERDICTS,
    cold_split_metrics,
    measurement_metrics,
    pair_details,
    turn_metrics,
)
from mythloop.analysis.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, difference, summarize
from mythloop.vocab import BASELINE_CONDITION

__all__ = ["HEADLINE", "SCHEMA_VERSION", "baseline_condition", "compute_metrics"]

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

Cells = dict[str, dict[int, dict[int, dict[str, Any]]]]


def baseline_condition(conditions: list[str]) -> str | None:
    """C0 (blend off) is the baseline every other condition is compared with."""
    if BASELINE_CONDITION in conditions:
        return BASELINE_CONDITION
    return conditions[0] if conditions else None


def _cells(results: SweepResults, threshold: float) -> Cells:
    """cond -> replicate -> round -> flat metrics of that cell."""
    cells: Cells = {}
    cold = frozenset(results.sweep.cold_skills)
    for (cond, rep), box in sorted(results.sandboxes.items()):
        for round_idx in results.rounds:
            metrics = measurement_metrics(box.rounds.get(round_idx, []), results.prompts, threshold)
            metrics.update(cold_split_metrics(box.rounds.get(round_idx, []), results.prompts, cold))
            metrics.update(turn_metrics(box.turns_of_round(round_idx), results.prompts))
            cells.setdefault(cond, {}).setdefault(rep, {})[round_idx] = metrics
    return cells


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


def _per_round(cells: Cells, keys: list[str], opts: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for cond, reps in cells.items():
        rounds = sorted({r for by_round in reps.values() for r in by_round})
        for round_idx in rounds:
            summaries = {}
            for key in keys:
                s = summarize({rep: reps[rep].get(round_idx, {}).get(key) for rep in reps}, **opts)
                if s is not None:
                    summaries[key] = s
            out.setdefault(cond, {})[str(round_idx)] = summaries
    return out


def _overall(results: SweepResults, opts: dict[str, int]) -> dict[str, Any]:
    """Turn metrics pooled over all rounds of each replicate, then across replicates."""
    out: dict[str, Any] = {}
    for cond in results.conditions:
        per_rep = {
            rep: turn_metrics(results.sandboxes[(cond, rep)].turns, results.prompts)
            for rep in results.replicates(cond)
        }
        keys = sorted({k for m in per_rep.values() for k in m})
        out[cond] = {
            k: s
            for k in keys
            if (s := summarize({r: m.get(k) for r, m in per_rep.items()}, **opts))
        }
    return out


def _differences(
    cells: Cells, conditions: list[str], keys: list[str], opts: dict[str, int]
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
                d = difference(
                    {rep: m.get(round_idx, {}).get(key) for rep, m in cells[cond].items()},
                    {rep: m.get(round_idx, {}).get(key) for rep, m in cells[base].items()},
                    **opts,
                )
                if d is not None:
                    entry[key] = d
            per_round[str(round_idx)] = entry
        out[f"{cond}-{base}"] = {"treated": cond, "baseline": base, "per_round": per_round}
    return out


def _deltas(
    cells: Cells, first: int, last: int, keys: list[str], opts: dict[str, int]
) -> dict[str, Any]:
    """Last round minus first round, per replicate, then across replicates."""
    out: dict[str, Any] = {}
    for cond, reps in cells.items():
        entry = {}
        for key in keys:
            per_rep = {}
            for rep, rounds in reps.items():
                a, b = rounds.get(first, {}).get(key), rounds.get(last, {}).get(key)
                per_rep[rep] = None if a is None or b is None else b - a
            s = summarize(per_rep, **opts)
            if s is not None:
                entry[key] = s
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


def _pairs(results: SweepResults, first: int, last: int, opts: dict[str, int]) -> dict[str, Any]:
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
                        {k: float(v["gold_rank"]) for k, v in got.items()}, **opts
                    ),
                    "twin_rank": summarize(
                        {k: float(v["twin_rank"]) for k, v in got.items()}, **opts
                    ),
                    "win_rate": summarize(
                        {k: 1.0 if v["win"] else 0.0 for k, v in got.items()}, **opts
                    ),
                    "gap": summarize({k: v["gap"] for k, v in got.items()}, **opts),
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
    """Every number of the analysis, JSON-ready and deterministic."""
    opts = {"resamples": resamples, "seed": seed}
    cells = _cells(results, abstain_threshold)
    keys = _keys(cells)
    observed = _observed_rounds(cells)
    first, last = (observed[0], observed[-1]) if observed else (0, 0)
    conditions = results.conditions
    per_round = _per_round(cells, keys, opts)
    diffs = _differences(cells, conditions, keys, opts)
    deltas = _deltas(cells, first, last, keys, opts)
    return {
        "schema_version": SCHEMA_VERSION,
        "sweep": results.sweep.to_json(),
        "analysis": {
            "abstain_threshold": abstain_threshold,
            "miss_rank": MISS_RANK,
            "gap_censor_eps": GAP_CENSOR_EPS,
            "bootstrap_resamples": resamples,
            "bootstrap_seed": seed,
            "interval": "95% interval over replicates: none below 3, Student t from 3 to 9 "
                        "(paired differences; Welch when unpaired), percentile bootstrap from 10",
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
        "overall": _overall(results, opts),
        "differences": diffs,
        "deltas": deltas,
        "pairs": _pairs(results, first, last, opts),
        "verdict_mix": _verdict_mix(results),
        "failures": _failures(results),
        "headline": _headline(per_round, diffs, deltas, conditions, first, last),
    }
