"""Compare two sweeps (or a sweep and a night of the history): per condition and headline
metric at the last round, A, B, B - A with its 95% interval, and a verdict.

The interval is the report's own (`stats.paired_difference`): the two sweeps ran the same
prompts, so B - A is paired by prompt, and also by replicate when both ran the same
replicates with the same replicate seeds. A side without per-prompt values (a history row
written before they were kept) falls back to the replicates as the unit (`stats.difference`).
The verdict is the report's rule (`conclusion.claim`): *better* / *worse* when the whole
interval lies on one side of 0, *no clear change* otherwise; a zero-width interval is never a
claim, and nothing is claimed without an interval. Configuration differences are listed
before any figure; sweeps of different prompt sets are not compared at all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mythloop.analysis.attack import collateral
from mythloop.analysis.compute import HEADLINE, compute_metrics
from mythloop.analysis.conclusion import MIN_REPLICATES, claim
from mythloop.analysis.core import _threshold
from mythloop.analysis.history import Night, series_of, sweep_fields, sweep_record
from mythloop.analysis.load import AnalysisError, load_results
from mythloop.analysis.metrics import metric_range
from mythloop.analysis.report import fmt
from mythloop.analysis.stats import difference, interval, paired_difference, summarize
from mythloop.sweep.records import SweepRecordError

__all__ = ["CompareError", "Comparison", "Side", "compare", "render_markdown", "side_from_dir",
           "side_from_night", "table_rows"]

# Named before any figure when they differ (prompt_set refuses the comparison).
CONFIG_FIELDS = ("pool", "prompts_file", "judge", "noise", "persuade", "model", "embedder",
                 "rounds", "replicates", "conditions", "seed")
LABELS = dict(HEADLINE)


class CompareError(ValueError):
    """Two sweeps that cannot be compared, or a side that cannot be read (one line)."""


@dataclass
class Side:
    """One sweep as compare sees it: its configuration and per-replicate last-round values."""

    label: str
    fields: dict[str, Any]
    last_round: int
    values: dict[str, dict[str, dict[int, float]]]  # cond -> metric -> replicate -> value
    night: str = ""
    # cond -> metric -> {"prompts": [...], "replicates": [...], "values": prompts x replicates}
    units: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    results_dir: str = ""
    injected: dict[str, Any] = field(default_factory=dict)
    """The sweep's injected skills (sweep.json), when its pool held any."""
    persuade: float = 0.0
    """The simulated judge's probability of following an injection."""

    @property
    def series(self) -> str:
        return series_of(self.fields)


def read_metrics(results_dir: Path) -> dict[str, Any]:
    """metrics.json when the analysis wrote one, else the metrics computed now (nothing
    written)."""
    path = results_dir / "metrics.json"
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            pass  # recomputed below
    try:
        results = load_results(results_dir)
    except AnalysisError as exc:
        raise CompareError(str(exc)) from None
    return compute_metrics(results, abstain_threshold=_threshold(results.sweep, None))


def side_from_metrics(metrics: dict[str, Any], label: str, results_dir: str = "") -> Side:
    last = str(metrics.get("last_round", 0))
    values: dict[str, dict[str, dict[int, float]]] = {}
    for cond, reps in (metrics.get("cells") or {}).items():
        for rep, rounds in reps.items():
            cell = rounds.get(last) or {}
            for key in LABELS:
                if cell.get(key) is not None:
                    values.setdefault(cond, {}).setdefault(key, {})[int(rep)] = float(cell[key])
    try:
        sweep, fields = sweep_record(metrics), sweep_fields(metrics)
    except SweepRecordError as exc:
        raise CompareError(f"{results_dir or label}: {exc}") from None
    return Side(label=label, fields=fields, last_round=int(last), values=values,
                night=sweep.finished_utc or "", results_dir=results_dir,
                units=metrics.get("last_round_units") or {}, injected=dict(sweep.injected),
                persuade=float(sweep.judge_options.get("persuade") or 0.0))


def side_from_dir(results_dir: Path) -> Side:
    root = Path(results_dir).expanduser().resolve()
    return side_from_metrics(read_metrics(root), str(root), str(root))


def side_from_night(night: Night) -> Side:
    values: dict[str, dict[str, dict[int, float]]] = {}
    units: dict[str, dict[str, dict[str, Any]]] = {}
    for row in night.rows:
        values.setdefault(row["cond"], {})[row["metric"]] = {
            int(rep): float(v) for rep, v in zip(row["replicate_ids"], row["values"], strict=True)}
        if row.get("units"):
            units.setdefault(row["cond"], {})[row["metric"]] = row["units"]
    fields = {k: night.fields.get(k) for k in ("prompt_set", *CONFIG_FIELDS, "replicate_seeds")}
    return Side(label=f"night of {night.night} ({night.results_dir})", fields=fields,
                last_round=int(night.fields.get("last_round", 0)), values=values,
                night=night.night, results_dir=night.results_dir, units=units)


@dataclass
class Comparison:
    a: Side
    b: Side
    config_differences: list[dict[str, Any]]
    paired: bool
    rows: list[dict[str, Any]] = field(default_factory=list)
    attack: list[dict[str, Any]] = field(default_factory=list)
    """Per condition and round: collateral (B - A held-out hit@1) and attack success on each
    side (mythloop.analysis.attack), when either sweep's pool held injected skills."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "a": {"label": self.a.label, "night": self.a.night, "last_round": self.a.last_round,
                  "results_dir": self.a.results_dir},
            "b": {"label": self.b.label, "night": self.b.night, "last_round": self.b.last_round,
                  "results_dir": self.b.results_dir},
            "config_differences": self.config_differences,
            "pairing": "paired by prompt and replicate (same replicate seeds)" if self.paired
            else "paired by prompt (different replicates or replicate seeds)",
            "min_replicates": MIN_REPLICATES,
            "rows": self.rows,
            **({"attack": self.attack} if self.attack else {}),
        }

    @property
    def regressions(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["verdict"] == "worse"]


def _matrix(u: dict[str, Any]) -> np.ndarray:
    return np.array([[np.nan if v is None else float(v) for v in row] for row in u["values"]],
                    dtype=float).reshape(len(u["prompts"]), len(u["replicates"]))


def _summary(key: str, values: dict[int, float], u: dict[str, Any] | None
             ) -> dict[str, Any] | None:
    if u and u.get("prompts"):
        return interval(_matrix(u), metric_range(key))
    return summarize(values, metric_range(key))


def _difference(key: str, va: dict[int, float], vb: dict[int, float], ua: dict[str, Any] | None,
                ub: dict[str, Any] | None, paired: bool) -> dict[str, Any] | None:
    """B - A, paired by prompt when both sides kept their per-prompt values."""
    if ua and ub and ua.get("prompts") and ub.get("prompts"):
        pids = sorted(set(ua["prompts"]) & set(ub["prompts"]))
        if pids:
            ma, mb = _matrix(ua), _matrix(ub)
            ia = [ua["prompts"].index(p) for p in pids]
            ib = [ub["prompts"].index(p) for p in pids]
            same = paired and ua["replicates"] == ub["replicates"]
            return paired_difference(mb[ib], ma[ia], metric_range(key), paired_replicates=same)
    # Unpaired: key A's replicates apart so `difference` never pairs them.
    base = va if paired else {-rep: v for rep, v in va.items()}
    return difference(vb, base, metric_range(key))


def verdict(key: str, d: dict[str, Any] | None) -> tuple[str, str]:
    """(verdict, note) for a difference B - A."""
    if not d:
        return "no clear change", "missing on one side"
    if d.get("lo") is None:
        return "not claimed", str(d.get("why") or "no interval")
    if float(d["lo"]) == float(d["hi"]):  # never a claim, whatever the mean
        return "no clear change", ("" if float(d["mean"]) == 0 else
                                   "same shift on every prompt, zero-width interval: "
                                   "not a claim")
    said = claim(key, d)
    return {"improves": ("better", ""), "hurts": ("worse", "")}.get(said or "",
                                                                    ("no clear change", ""))


def compare(a: Side, b: Side) -> Comparison:
    """B against A. Raises CompareError for different prompt sets or nothing in common."""
    if a.fields.get("prompt_set") != b.fields.get("prompt_set"):
        raise CompareError(
            f"not comparable: the two sweeps ran different prompt sets "
            f"({a.fields.get('prompts_file')} vs {b.fields.get('prompts_file')})")
    conds = [c for c in a.values if c in b.values]
    if not conds:
        raise CompareError("not comparable: the two sweeps share no condition")
    def field(side: Side, name: str) -> Any:  # the records keep `persuade` only when set
        value = side.fields.get(name)
        return float(value or 0.0) if name == "persuade" else value

    diffs = [{"field": f, "a": field(a, f), "b": field(b, f)} for f in CONFIG_FIELDS
             if field(a, f) != field(b, f)]
    if a.last_round != b.last_round and not any(d["field"] == "rounds" for d in diffs):
        diffs.append({"field": "last round", "a": a.last_round, "b": b.last_round})
    seeds_a, seeds_b = a.fields.get("replicate_seeds") or {}, b.fields.get("replicate_seeds") or {}
    comparison = Comparison(a, b, diffs, paired=False)
    for cond in conds:
        for key, label in HEADLINE:
            va, vb = a.values[cond].get(key), b.values[cond].get(key)
            if not va or not vb:
                continue
            paired = set(va) == set(vb) and all(
                seeds_a.get(str(r)) is not None and seeds_a.get(str(r)) == seeds_b.get(str(r))
                for r in va)
            comparison.paired = comparison.paired or paired
            ua, ub = a.units.get(cond, {}).get(key), b.units.get(cond, {}).get(key)
            d = _difference(key, va, vb, ua, ub, paired)
            word, note = verdict(key, d)
            comparison.rows.append({"cond": cond, "metric": key, "label": label,
                                    "a": _summary(key, va, ua), "b": _summary(key, vb, ub),
                                    "difference": d, "verdict": word, "note": note})
    comparison.attack = _attack(a, b)
    return comparison


def _attack(a: Side, b: Side) -> list[dict[str, Any]]:
    """Collateral of B against A per condition and round, when either pool held injected
    skills and both results dirs can still be read (a night's may be gone)."""
    if not (a.injected or b.injected) or not (a.results_dir and b.results_dir):
        return []
    try:
        return collateral(load_results(Path(a.results_dir)), load_results(Path(b.results_dir)))
    except (AnalysisError, ValueError, OSError):
        return []


def table_rows(comparison: Comparison) -> list[dict[str, str]]:
    out = []
    for row in comparison.rows:
        d = row["difference"]
        out.append({"condition": row["cond"], "metric": row["label"], "A": fmt(row["a"]),
                    "B": fmt(row["b"]), "B - A [95% CI]": fmt(d, sign=True),
                    "verdict": row["verdict"] + (f" ({row['note']})" if row["note"] else "")})
    return out


def config_lines(comparison: Comparison) -> list[str]:
    if not comparison.config_differences:
        return ["same configuration (pool, prompts, judge, noise, model, rounds, replicates, "
                "seed)"]
    return [f"{d['field']}: A {d['a']} | B {d['b']}" for d in comparison.config_differences]


def render_markdown(comparison: Comparison) -> str:
    c = comparison.as_dict()
    lines = ["# Sweep comparison", "",
             f"- **A**: {c['a']['label']} (last round {c['a']['last_round'] + 1})",
             f"- **B**: {c['b']['label']} (last round {c['b']['last_round'] + 1})",
             f"- {c['pairing']}; 95% interval of B - A with the prompt as the unit, the "
             "report's method; nothing claimed without an interval or on a zero-width one.",
             "", "## Configuration differences", ""]
    lines += [f"- {line}" for line in config_lines(comparison)]
    lines += ["", "## Last round", ""]
    rows = table_rows(comparison)
    if rows:
        lines.append("| " + " | ".join(rows[0]) + " |")
        lines.append("|" + "---|" * len(rows[0]))
        lines += ["| " + " | ".join(r.values()) + " |" for r in rows]
    lines += _attack_lines(comparison)
    worse = [f"{r['cond']} {r['label']}" for r in comparison.rows if r["verdict"] == "worse"]
    better = [f"{r['cond']} {r['label']}" for r in comparison.rows if r["verdict"] == "better"]
    lines += ["", f"**Worse**: {', '.join(worse) or 'nothing'}. "
              f"**Better**: {', '.join(better) or 'nothing'}.", ""]
    return "\n".join(lines)


def _attack_lines(comparison: Comparison) -> list[str]:
    """The attack section of compare.md: collateral and attack success, per round."""
    if not comparison.attack:
        return []
    a, b = comparison.a, comparison.b
    rows = [[r["cond"], str(r["round"] + 1), fmt(r["clean"]), fmt(r["attacked"]),
             fmt(r["collateral"], sign=True),
             fmt(r.get("clean attack.heldout.top1_rate")),
             fmt(r.get("attacked attack.heldout.top1_rate"))] for r in comparison.attack]
    header = ["cond", "round", "A hit@1 (held-out)", "B hit@1 (held-out)",
              "collateral B - A [95% CI]", "A attack success top-1",
              "B attack success top-1"]
    return ["", "## Attack: collateral and attack success", "",
            f"A's judge followed an injection with probability {a.persuade:g}, B's with "
            f"{b.persuade:g}. Collateral: B's held-out hit@1 (the right skills) minus A's, "
            "paired by prompt (and replicate when the replicate seeds match); attack success: "
            "the share of held-out prompts whose top 1 holds an injected skill that is not "
            "the right one. Rounds are labelled from 1.", "",
            "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(r) + " |" for r in rows)]
