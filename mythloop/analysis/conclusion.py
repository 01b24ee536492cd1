"""The one-line conclusion of a report, computed from the intervals alone.

A difference (treated - baseline, last round) *improves* a metric when its whole 95%
interval lies on the better side of 0, *hurts* it when the whole interval lies on the
worse side, and shows no clear difference otherwise. Nothing is claimed with fewer than
MIN_REPLICATES replicates: a percentile bootstrap over one or two values is no interval.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LOWER_IS_BETTER", "MIN_REPLICATES", "claim", "enough", "round_label", "single_conclusion",
           "signed"]

MIN_REPLICATES = 3
LOWER_IS_BETTER = {"catalog.in_distribution.poisoned_rate", "trap.twin_rank",
                   "in_distribution.gold_rank"}


def enough(s: dict[str, Any] | None) -> bool:
    """Whether a summary or difference rests on enough replicates for an interval."""
    return bool(s) and int(s.get("n", 0)) >= MIN_REPLICATES


def claim(key: str, d: dict[str, Any] | None) -> str | None:
    """'improves' | 'hurts' | 'none' from a difference's interval; None when not claimable."""
    if not enough(d):
        return None
    lo, hi = float(d["lo"]), float(d["hi"])
    if lo > 0 or hi < 0:
        better = lo > 0
        if key in LOWER_IS_BETTER:
            better = not better
        return "improves" if better else "hurts"
    return "none"


def signed(d: dict[str, Any], digits: int = 2) -> str:
    f = f"{{:+.{digits}f}}"
    return f"{f.format(d['mean'])} [{f.format(d['lo'])}, {f.format(d['hi'])}]"


def round_label(metrics: dict[str, Any], round_idx: int | str) -> str:
    """`round 1 of 2`: rounds are stored from 0, labelled from 1 out of the sweep's rounds."""
    total = (metrics.get("sweep") or {}).get("rounds")
    if not isinstance(total, int) or isinstance(total, bool):
        total = max((int(r) for r in metrics.get("rounds") or []), default=int(round_idx)) + 1
    return f"round {int(round_idx) + 1} of {total}"


def _n_line(metrics: dict[str, Any]) -> int:
    reps = metrics.get("replicates") or {}
    return min((len(r) for r in reps.values()), default=0)


def single_conclusion(metrics: dict[str, Any]) -> list[str]:
    """Lines `**Conclusion** ...` for a single-level report: per treated condition, the
    headline metrics it improves and hurts at the last round, with intervals."""
    base = metrics.get("baseline")
    n = _n_line(metrics)
    where = round_label(metrics, metrics["last_round"])
    if not metrics.get("differences"):
        return [f"**Conclusion**: nothing to compare (only {base or 'one condition'} was run).",
                ""]
    if n < MIN_REPLICATES:
        return [f"**Conclusion**: not claimed: {n} replicate(s) per condition; at least "
                f"{MIN_REPLICATES} are needed for a 95% interval (rerun with --replicates "
                f"{MIN_REPLICATES} or more).", ""]
    lines = []
    for name, diff in metrics["differences"].items():
        cond = diff["treated"]
        good, bad, flat = [], [], []
        for row in metrics["headline"]:
            d = row["differences"].get(name, {}).get("last")
            verdict = claim(row["key"], d)
            if verdict == "improves":
                good.append(f"{row['label']} {signed(d)}")
            elif verdict == "hurts":
                bad.append(f"{row['label']} {signed(d)}")
            elif verdict == "none":
                flat.append(row["label"])
        beats = "beats" if good and not bad else ("does not beat" if not good else
                                                   "is mixed against")
        text = (f"**Conclusion** ({cond.upper()} - {base.upper()} at {where}, "
                f"mean [95% interval] over {n} replicates): {cond.upper()} {beats} "
                f"{base.upper()}")
        parts = []
        if good:
            parts.append("better on " + "; ".join(good))
        if bad:
            parts.append("worse on " + "; ".join(bad))
        if flat:
            parts.append("no clear difference on " + ", ".join(flat))
        lines.append(text + (": " + ". ".join(parts) if parts else "") + ".")
    return [*lines, ""]
