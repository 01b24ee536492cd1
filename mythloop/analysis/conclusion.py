"""The one-line conclusion of a report, computed from the intervals alone.

A difference (treated - baseline, last round) *improves* a metric when its whole 95%
interval lies on the better side of 0, *hurts* it when the whole interval lies on the
worse side, and shows no clear difference otherwise. Nothing is claimed where there is no
interval (its `why` says why), nor from an interval of zero width (every prompt gave the same
difference: no spread, so no evidence about it). The intervals are `stats`'s, with the
prompt as the unit: from 1 replicate (then they cover prompt variation only, and the
Conclusion says so). When data issues removed rows of a round file of the last round,
the Conclusion says so and names the claim they affect.
"""

from __future__ import annotations

import re
from typing import Any

from mythloop.analysis.stats import zero_width

__all__ = ["GROUP_METRICS", "LOWER_IS_BETTER", "MIN_REPLICATES", "claim", "counted",
           "data_caveats", "enough", "round_label", "single_conclusion", "signed"]

MIN_REPLICATES = 1
"""Replicates an interval needs (prompts are the unit: 1 replicate covers prompt variation)."""
LOWER_IS_BETTER = {"catalog.in_distribution.poisoned_rate", "trap.twin_rank",
                   "in_distribution.gold_rank"}
# The ranking metrics of each prompt group (the report's Ranking detail) beyond the headline:
# the Conclusion names every one of them whose difference, or change over the rounds, is
# claimable, and the report's first-to-last table shows them.
GROUP_METRICS: tuple[tuple[str, str], ...] = tuple(
    (f"{group}.{key}", f"{label} ({name})")
    for group, name in (("trap", "trap"), ("normal", "normal"), ("heldout", "held-out"))
    for key, label in (("hit@1", "hit@1"), ("hit@3", "hit@3"), ("hit@5", "hit@5"),
                       ("mrr", "MRR")))


def enough(s: dict[str, Any] | None) -> bool:
    """Whether a summary or difference has an interval."""
    return s is not None and bool(s) and s.get("lo") is not None


def claim(key: str, d: dict[str, Any] | None) -> str | None:
    """'improves' | 'hurts' | 'none' from a difference's interval; None when not claimable
    (no interval, or an interval of zero width)."""
    if d is None or not enough(d) or zero_width(d):
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


def counted(d: dict[str, Any] | None) -> str:
    """`10 prompts x 3 replicates` (what an interval counted)."""
    if not d:
        return "nothing"
    reps = d.get("n_replicates")
    if isinstance(reps, list):
        reps = min(reps) if reps else 0
    if d.get("n_prompts") is None:
        return f"{reps} replicate(s)"
    return f"{d['n_prompts']} prompts x {reps}"


def single_conclusion(metrics: dict[str, Any]) -> list[str]:
    """Lines `**Conclusion** ...` for a single-level report: per treated condition, the
    headline metrics it improves and hurts at the last round, with intervals."""
    base = metrics.get("baseline")
    n = _n_line(metrics)
    where = round_label(metrics, metrics["last_round"])
    if not metrics.get("differences"):
        return [f"**Conclusion**: nothing to compare (only {base or 'one condition'} was run).",
                ""]
    lines = []
    headline_keys = {row["key"] for row in metrics["headline"]}
    last = str(metrics["last_round"])
    for name, diff in metrics["differences"].items():
        cond = diff["treated"]
        good, bad, flat, still, none = [], [], [], [], []
        for row in metrics["headline"]:
            d = row["differences"].get(name, {}).get("last")
            verdict = claim(row["key"], d)
            if verdict == "improves":
                good.append(f"{row['label']} {signed(d)} ({counted(d)})")
            elif verdict == "hurts":
                bad.append(f"{row['label']} {signed(d)} ({counted(d)})")
            elif verdict == "none":
                flat.append(row["label"])
            elif zero_width(d):
                still.append(f"{row['label']} {signed(d)}")
            elif d:
                none.append(f"{row['label']} ({d.get('why', 'no interval')})")
        at_last = diff.get("per_round", {}).get(last, {})
        for key, label in GROUP_METRICS:  # beyond the headline: only what is claimable
            d = at_last.get(key)
            verdict = claim(key, d) if key not in headline_keys else None
            if verdict == "improves":
                good.append(f"{label} {signed(d)} ({counted(d)})")
            elif verdict == "hurts":
                bad.append(f"{label} {signed(d)} ({counted(d)})")
        beats = "beats" if good and not bad else ("does not beat" if not good else
                                                   "is mixed against")
        text = (f"**Conclusion** ({cond.upper()} - {str(base).upper()} at {where}, "
                f"mean [95% interval] over prompts x {n} replicate(s), paired by prompt): "
                f"{cond.upper()} {beats} {str(base).upper()}")
        parts = []
        if good:
            parts.append("better on " + "; ".join(good))
        if bad:
            parts.append("worse on " + "; ".join(bad))
        if flat:
            parts.append("no clear difference on " + ", ".join(flat))
        if still:
            parts.append("not claimed, every prompt gave the same difference (a "
                         "zero-width interval is no evidence): " + "; ".join(still))
        if none:
            parts.append("no interval: " + "; ".join(none))
        lines.append(text + (": " + ". ".join(parts) if parts else "") + ".")
    if n == 1:
        lines.append("With 1 replicate the intervals cover prompt variation only, not the "
                     "judge's randomness across replicates (rerun with --replicates 3 for "
                     "both).")
    return [*lines, *_changes(metrics), *data_caveats(metrics), ""]


def _changes(metrics: dict[str, Any]) -> list[str]:
    """`**Over the rounds** ...`: per condition, every headline and prompt-group ranking
    metric whose change from the first round to the last is claimable (the report's
    first-to-last table shows each)."""
    first, last = metrics.get("first_round"), metrics.get("last_round")
    if first is None or last is None or first == last:
        return []
    labels = [(row["key"], row["label"]) for row in metrics["headline"]]
    labels += [kl for kl in GROUP_METRICS if kl[0] not in dict(labels)]
    parts = []
    for cond in metrics.get("conditions") or []:
        deltas = (metrics.get("deltas") or {}).get(cond) or {}
        up: list[str] = []
        down: list[str] = []
        for key, label in labels:
            d = deltas.get(key)
            if d is None:
                continue
            verdict = claim(key, d)
            if verdict in ("improves", "hurts"):
                (up if verdict == "improves" else down).append(
                    f"{label} {signed(d)} ({counted(d)})")
        said = [f"better on {'; '.join(up)}" if up else "",
                f"worse on {'; '.join(down)}" if down else ""]
        text = "; ".join(x for x in said if x) or "no clear change"
        parts.append(f"{cond.upper()} {text}")
    if not parts:
        return []
    return [f"**Over the rounds** ({round_label(metrics, first)} to "
            f"{round_label(metrics, last)}, each condition against itself, paired by prompt "
            f"and replicate): " + ". ".join(parts) + "."]


_CELL_FILE = re.compile(r"^(?P<cond>[a-z0-9]+)-rep(?P<rep>\d+)/round_(?P<round>\d+)\.jsonl$")
_LOST_ROWS = ("malformed JSON", "malformed row", "unreadable", "no measurement rows")


def data_caveats(metrics: dict[str, Any]) -> list[str]:
    """`**Based on incomplete data**: ...` when data issues removed rows of a round file of
    the last round (the round the Conclusion compares), naming the claim each affects."""
    last = int(metrics.get("last_round", 0))
    base = metrics.get("baseline")
    treated = [d["treated"] for d in (metrics.get("differences") or {}).values()]
    hits: dict[str, list[str]] = {}
    for issue in metrics.get("data_issues") or []:
        match = _CELL_FILE.match(str(issue.get("file", "")))
        if not match or int(match["round"]) != last or not str(
                issue.get("problem", "")).startswith(_LOST_ROWS):
            continue
        where = f"line {issue['line']}" if issue.get("line") else ""
        what = str(issue["problem"]).split(":", 1)[0]
        hits.setdefault(issue["file"], []).append(f"{where}: {what}" if where else what)
    if not hits:
        return []
    parts, affected = [], []
    for file, problems in hits.items():
        match = _CELL_FILE.match(file)
        assert match is not None  # (hits holds only cell files)
        cond = match["cond"]
        cut = len(problems) == 1 and problems[0].endswith("malformed JSON")
        parts.append(f"{file} {'cut at ' if cut else 'lost rows at '}"
                     f"{problems[0].split(':')[0] if cut else ', '.join(problems)}")
        names = ([f"{c.upper()} - {base.upper()}" for c in treated] if cond == base
                 else [f"{cond.upper()} - {(base or '?').upper()}"] if cond in treated else [])
        affected += [n for n in names if n not in affected]
    files = len(hits)
    claim_text = (f"; it affects the claim on {', '.join(affected)} at "
                  f"{round_label(metrics, last)}" if affected else "")
    return [f"**Based on incomplete data**: {files} round file(s) of the compared round lost "
            f"rows ({'; '.join(parts)}); a prompt missing from a round counts as a miss"
            f"{claim_text}. See Data issues."]
