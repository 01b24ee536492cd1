"""The noise study: each level's last-round differences, the break-even noise, a conclusion,
D/metrics.json, D/report.md and D/noise_curve.png, rebuilt from the level dirs' files alone.

Per level, the level's own analysis (mythloop.analysis.analyze on D/noise-<level>/) gives
every condition's summary and every `cond - c0` difference at the last round; the study
only gathers them. The break-even noise of a metric is the lowest level at which the 95%
interval of `cond - c0` includes 0 (none when it never does); the intervals are the report's
(the prompt as the unit, paired by prompt; docs/statistics.md), and nothing is claimed where
a level has no interval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mythloop.analysis.conclusion import MIN_REPLICATES, claim, enough, round_label, signed
from mythloop.analysis.core import analyze
from mythloop.analysis.load import AnalysisError
from mythloop.analysis.plots_study import draw_noise_curve
from mythloop.analysis.stats import zero_width
from mythloop.fileio import write_text_atomic
from mythloop.sweep.study import read_study

__all__ = ["STUDY_METRICS", "StudyResult", "analyze_study", "compute_study", "render_study"]

STUDY_METRICS: tuple[tuple[str, str], ...] = (
    ("trap.trap_win_rate", "trap-win rate"),
    ("in_distribution.hit@1", "hit@1 (in-distribution)"),
    ("in_distribution.hit@3", "hit@3 (in-distribution)"),
    ("in_distribution.hit@5", "hit@5 (in-distribution)"),
    ("heldout.hit@3", "hit@3 (held-out)"),
)
FIGURE = "noise_curve.png"


@dataclass
class StudyResult:
    metrics_path: Path
    report_path: Path
    figure: Path
    levels: list[float]
    table_rows: list[dict[str, str]] = field(default_factory=list)
    simulated: bool | None = None


def _level_summary(level: float, m: dict[str, Any]) -> dict[str, Any]:
    last = str(m["last_round"])
    keys = [k for k, _ in STUDY_METRICS]
    return {
        "noise": level,
        "last_round": m["last_round"],
        "round_label": round_label(m, m["last_round"]),
        "replicates": {c: len(r) for c, r in m["replicates"].items()},
        "conditions": {c: {k: m["per_round"].get(c, {}).get(last, {}).get(k) for k in keys}
                       for c in m["conditions"]},
        "differences": {name: {k: d["per_round"].get(last, {}).get(k) for k in keys}
                        for name, d in m["differences"].items()},
    }


def compute_study(levels: dict[float, dict[str, Any]], study: dict[str, Any]) -> dict[str, Any]:
    """Every number of the study from each level's metrics dict (metrics.json)."""
    order = sorted(levels)
    table = {f"{x:.2f}": _level_summary(x, levels[x]) for x in order}
    conditions = list(dict.fromkeys(c for x in order for c in levels[x]["conditions"]))
    names = list(dict.fromkeys(n for x in order for n in levels[x]["differences"]))
    baseline = next((levels[x]["baseline"] for x in order if levels[x].get("baseline")), None)
    break_even: dict[str, dict[str, Any]] = {}
    claims: dict[str, dict[str, dict[str, str | None]]] = {}
    for name in names:
        break_even[name], claims[name] = {}, {}
        for key, _ in STUDY_METRICS:
            found, claimable = None, True
            for x in order:
                d = table[f"{x:.2f}"]["differences"].get(name, {}).get(key)
                verdict = claim(key, d)
                if verdict is None and zero_width(d) and float(d["mean"]) == 0:
                    verdict = "none"  # the same on every prompt: no difference at all
                claims[name].setdefault(key, {})[f"{x:.2f}"] = verdict
                if verdict is None:
                    claimable = False
                elif verdict == "none" and found is None and claimable:
                    found = x
            break_even[name][key] = {"noise": found, "claimable": claimable}
    min_n = min((n for x in order for n in table[f"{x:.2f}"]["replicates"].values()), default=0)
    return {
        "schema_version": 1,
        "study": study,
        "levels": order,
        "conditions": conditions,
        "baseline": baseline,
        "min_replicates": min_n,
        "metrics": [{"key": k, "label": label} for k, label in STUDY_METRICS],
        "table": table,
        "claims": claims,
        "break_even": break_even,
        "conclusion": _conclusion(order, names, claims, table, min_n, baseline),
        "c4_goal": _c4_goal(table),
    }


def _c4_goal(table: dict[str, Any]) -> dict[str, Any]:
    """Per level, the C4 goal: trap-win rate within 0.1 of C3, and the interval of
    C4 - C0 on in-distribution hit@5 including or exceeding 0 (None: not measurable)."""
    out = {}
    for lvl, entry in table.items():
        conds, diffs = entry["conditions"], entry["differences"]
        c3 = (conds.get("c3") or {}).get("trap.trap_win_rate")
        c4 = (conds.get("c4") or {}).get("trap.trap_win_rate")
        hit5 = (diffs.get("c4-c0") or {}).get("in_distribution.hit@5")
        if not (c3 and c4 and hit5):
            continue
        gap = round(c4["mean"] - c3["mean"], 12)
        out[lvl] = {
            "trap_win_c4_minus_c3": gap,
            "trap_win_within_0_1": gap >= -0.1 - 1e-9,
            "hit5_c4_minus_c0": hit5,
            "hit5_not_below_c0": (hit5["hi"] >= 0) if enough(hit5) else None,
        }
    return out


def _levels_text(levels: list[float]) -> str:
    return ", ".join(f"{x:g}" for x in levels)


def _conclusion(order, names, claims, table, min_n, baseline) -> str:
    if not names:
        return f"nothing to compare (only {baseline or 'one condition'} was run)."
    if min_n < MIN_REPLICATES:
        return (f"not claimed: {min_n} replicate(s) per condition at some level; at least "
                f"{MIN_REPLICATES} are needed for a 95% interval (rerun with --replicates "
                f"{MIN_REPLICATES} or more).")
    if all(v is None for per in claims.values() for by in per.values() for v in by.values()):
        return "not claimed: no interval at any level (each level's report says why)."
    labels = dict(STUDY_METRICS)
    sentences = []
    for name in names:
        treated = name.split("-")[0].upper()
        good, bad = [], []
        for key, _ in STUDY_METRICS:
            by_level = claims[name].get(key, {})
            up = [x for x in order if by_level.get(f"{x:.2f}") == "improves"]
            down = [x for x in order if by_level.get(f"{x:.2f}") == "hurts"]
            if up:
                good.append(f"{labels[key]} at noise {_levels_text(up)}")
            if down:
                bad.append(f"{labels[key]} at noise {_levels_text(down)}")
        text = f"{treated} vs {(baseline or '?').upper()}: "
        text += ("improves " + "; ".join(good)) if good else "improves nothing"
        text += (", hurts " + "; ".join(bad)) if bad else ", hurts nothing"
        sentences.append(text)
    only = ("; with 1 replicate they cover prompt variation only, not the judge's randomness "
            "across replicates" if min_n == 1 else "")
    return "; ".join(sentences) + (f" (last round, 95% intervals over the prompts x {min_n}+ "
                                   "replicate(s), paired by prompt; a metric counts only when "
                                   f"its whole interval is on one side of 0{only})")


def _cell(s: dict[str, Any] | None, sign: bool = False) -> str:
    if not s:
        return "—"
    if not enough(s):
        f = f"{{:{'+' if sign else ''}.2f}}"
        return f"{f.format(s['mean'])} (no interval)"
    return signed(s) if sign else f"{s['mean']:.2f} [{s['lo']:.2f}, {s['hi']:.2f}]"


def table_rows(study: dict[str, Any]) -> list[dict[str, str]]:
    """The noise table as rows of strings: one row per level and metric."""
    rows = []
    labels = dict(STUDY_METRICS)
    for lvl, entry in study["table"].items():
        for key, _ in STUDY_METRICS:
            row = {"noise": f"{float(lvl):g}", "metric": labels[key]}
            for cond in study["conditions"]:
                row[cond] = _cell(entry["conditions"].get(cond, {}).get(key))
            for name, diffs in entry["differences"].items():
                d = diffs.get(key)
                verdict = study["claims"].get(name, {}).get(key, {}).get(lvl)
                mark = {"improves": " ▲", "hurts": " ▼", "none": ""}.get(verdict or "", "")
                row[name] = _cell(d, sign=True) + mark
            rows.append(row)
    return rows


def _break_even_lines(study: dict[str, Any]) -> list[str]:
    labels = dict(STUDY_METRICS)
    top = _levels_text(study["levels"][-1:])
    out = []
    for name, per_key in study["break_even"].items():
        parts = []
        for key, _ in STUDY_METRICS:
            be = per_key.get(key, {})
            if not be.get("claimable"):
                parts.append(f"{labels[key]}: not claimable at some level (no interval, or "
                             "a zero-width one)")
            elif be.get("noise") is None:
                parts.append(f"{labels[key]}: never (interval excludes 0 up to noise {top})")
            else:
                parts.append(f"{labels[key]}: noise {be['noise']:g}")
        out.append(f"- **{name}** interval first includes 0 at: " + "; ".join(parts) + ".")
    return out


def _c4_goal_lines(study: dict[str, Any]) -> list[str]:
    goal = study.get("c4_goal") or {}
    if not goal:
        return []
    out = ["## C4 goal", "",
           "Goal: C4's trap-win rate within 0.1 of C3, and in-distribution hit@5 not below C0 "
           "(the interval of C4 - C0 includes or exceeds 0).", "",
           "| noise | trap-win C4 - C3 | within 0.1 | hit@5 C4 - C0 | not below C0 |",
           "|---|---|---|---|---|"]
    for lvl, g in goal.items():
        ok = g["hit5_not_below_c0"]
        out.append(f"| {float(lvl):g} | {g['trap_win_c4_minus_c3']:+.2f} | "
                   f"{'yes' if g['trap_win_within_0_1'] else 'no'} | "
                   f"{_cell(g['hit5_c4_minus_c0'], sign=True)} | "
                   f"{'no interval' if ok is None else 'yes' if ok else 'no'} |")
    return [*out, ""]


def render_study(study: dict[str, Any]) -> str:
    """The study's report.md."""
    meta = study["study"]
    judge = meta.get("judge", "unknown")
    rows = table_rows(study)
    header = list(rows[0]) if rows else ["noise", "metric"]
    level_links = [f"- noise {x:g}: [{d}/report.md]({d}/report.md)"
                   for x, d in ((float(k), v) for k, v in (meta.get("level_dirs") or {}).items())
                   if x in study["levels"]]
    first: dict[str, Any] = next(iter(study["table"].values()), {})
    label = first.get("round_label", "the last round")
    parts = [
        f"# Noise study: {meta.get('sweep_id', 'unnamed')}",
        "",
    ]
    if meta.get("simulated"):
        parts += [f"> **SIMULATED JUDGE (`{judge}`)**: each level flips the simulated judge's "
                  "verdicts with that probability; the numbers show how the ranker responds to "
                  "synthetic verdicts, not a real model's judgement.", ""]
    parts += [
        f"**Conclusion**: {study['conclusion']}",
        "",
        f"Levels {_levels_text(study['levels'])}; conditions "
        f"{', '.join(c.upper() for c in study['conditions'])}; baseline "
        f"{(study['baseline'] or '?').upper()}; {meta.get('rounds', '?')} rounds, "
        f"{meta.get('replicates', '?')} replicate(s) per condition and level.",
        "",
        "## Noise table",
        "",
        f"Each condition's mean [95% interval, the prompt as the unit] at the last round "
        f"({label}), and each condition minus {(study['baseline'] or '?').upper()} "
        "(▲ the whole interval is better than 0, ▼ worse).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r[h] for h in header) + " |" for r in rows),
        "",
        *_c4_goal_lines(study),
        "## Break-even noise",
        "",
        "The lowest noise level at which the interval of the difference includes 0.",
        "",
        *_break_even_lines(study),
        "",
        "## Figure",
        "",
        f"![difference to {(study['baseline'] or '?').upper()} at the last round by noise "
        f"level]({FIGURE})",
        "",
        "## Levels",
        "",
        "Each level is an ordinary sweep with its own report, metrics and plots:",
        "",
        *level_links,
        "",
    ]
    return "\n".join(parts).rstrip() + "\n"


def _level_dirs(root: Path, meta: dict[str, Any]) -> dict[float, Path]:
    dirs = {}
    for key, name in (meta.get("level_dirs") or {}).items():
        path = root / name
        if (path / "sweep.json").exists():
            dirs[float(key)] = path
    if not dirs:
        raise AnalysisError(f"{root} is a noise study with no level results yet "
                            "(no noise-*/sweep.json); run the sweep first")
    return dirs


def analyze_study(root: str | Path, *, reanalyse_levels: bool = True) -> StudyResult:
    """Rebuild a study dir from its files: each level's analysis (unless reanalyse_levels
    is False and its metrics.json exists), then D/metrics.json, D/report.md, the figure."""
    root = Path(root).expanduser().resolve()
    meta = read_study(root)
    if meta is None:
        raise AnalysisError(f"{root} is not a noise study (no study sweep.json)")
    levels: dict[float, dict[str, Any]] = {}
    for level, path in sorted(_level_dirs(root, meta).items()):
        metrics_path = path / "metrics.json"
        if reanalyse_levels or not metrics_path.exists():
            metrics_path = analyze(path).metrics_path
        levels[level] = json.loads(metrics_path.read_text(encoding="utf-8"))
    study = compute_study(levels, meta)
    figure = draw_noise_curve(study, root / FIGURE)
    metrics_path = root / "metrics.json"
    write_text_atomic(metrics_path, json.dumps(study, indent=2, sort_keys=True, allow_nan=False) + "\n")
    report_path = root / "report.md"
    write_text_atomic(report_path, render_study(study))
    simulated = meta.get("simulated")
    return StudyResult(metrics_path=metrics_path, report_path=report_path, figure=figure,
                       levels=study["levels"], table_rows=table_rows(study),
                       simulated=simulated if isinstance(simulated, bool) else None)
