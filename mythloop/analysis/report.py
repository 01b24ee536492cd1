"""report.md, rendered only from the metrics dict (so every number is in metrics.json)."""

from __future__ import annotations

import json
from typing import Any

from mythloop.analysis.compute import HEADLINE
from mythloop.analysis.conclusion import MIN_REPLICATES, round_label, single_conclusion
from mythloop.analysis.metrics import TIERS, VERDICTS
from mythloop.analysis.plots import FIGURES
from mythloop.analysis.stats import zero_width
from mythloop.sweep.records import SweepRecord

__all__ = ["console_rows", "fmt", "fmt_diff", "headline_rows", "render_report", "round_rows"]

_RUN_FIELDS = (
    "sweep_id",
    "judge",
    "simulated",
    "model",
    "embedder",
    "pool",
    "prompts_file",
    "seed",
    "replicate_seeds",
    "conditions",
    "rounds",
    "replicates",
    "started_utc",
    "finished_utc",
    "mythloop_version",
)
_LONG_FIELDS = ("config",)  # the whole config dump: too long for the table
_FIGURE_CAPTIONS = {
    "hit_at_3.png": "hit@3 on in-distribution prompts by round",
    "trap_win_rate.png": "trap-win rate by round",
    "poisoned_rank.png": "rank of each trap prompt's poisoned twin by round (missing = 11)",
    "verdict_mix.png": "verdict mix per tier",
}


def fmt(s: dict[str, Any] | None, digits: int = 3, sign: bool = False) -> str:
    """`mean [lo, hi]`; with fewer than 3 replicates `mean (n=2, n too small)` instead of
    an interval; a zero-width interval is marked `(no spread)` (it supports no claim)."""
    if not s:
        return "—"
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    if int(s.get("n", 0)) < MIN_REPLICATES or s.get("lo") is None:
        return f"{f.format(s['mean'])} (n={s.get('n', 0)}, n too small)"
    text = f"{f.format(s['mean'])} [{f.format(s['lo'])}, {f.format(s['hi'])}]"
    return text + (" (no spread)" if zero_width(s) else "")


def fmt_diff(s: dict[str, Any] | None) -> str:
    """A difference with its sign, and how it was paired."""
    if not s:
        return "—"
    return f"{fmt(s, sign=True)} ({s.get('pairing') or s.get('method', '')})"


def headline_rows(metrics: dict[str, Any]) -> list[dict[str, str]]:
    """The headline table as rows of strings (the CLI and the report share it)."""
    first, last = metrics["first_round"], metrics["last_round"]
    rows = []
    for row in metrics["headline"]:
        out = {"metric": row["label"]}
        for cond, cells in row["conditions"].items():
            out[f"{cond} {round_label(metrics, first)}"] = fmt(cells["first"])
            out[f"{cond} {round_label(metrics, last)}"] = fmt(cells["last"])
        for name, d in row["differences"].items():
            out[f"{name} {round_label(metrics, last)}"] = fmt_diff(d["last"])
        rows.append(out)
    return rows


def console_rows(metrics: dict[str, Any]) -> list[dict[str, str]]:
    """A narrow headline for a terminal: first -> last mean, the last interval, the difference."""
    first, last = metrics["first_round"], metrics["last_round"]
    rows = []
    for row in metrics["headline"]:
        out = {"metric": row["label"]}
        for cond, cells in row["conditions"].items():
            a, b = cells["first"], cells["last"]
            start = f"{a['mean']:.2f} -> " if a else "— -> "
            out[f"{cond} round {first + 1} -> {last + 1}"] = start + fmt(b, 2)
        for name, d in row["differences"].items():
            out[f"{name} round {last + 1}"] = fmt(d["last"], 2, sign=True)
        rows.append(out)
    return rows


def round_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per condition and round with the headline metrics (the Prefect table)."""
    rows = []
    for cond in metrics["conditions"]:
        for round_idx, summaries in sorted(
            metrics["per_round"].get(cond, {}).items(), key=lambda kv: int(kv[0])
        ):
            n = max((s["n"] for s in summaries.values()), default=0)
            row: dict[str, Any] = {"condition": cond, "round": int(round_idx) + 1,  # from 1
                                   "replicates": n}
            for key, label in HEADLINE:
                row[label] = fmt(summaries.get(key))
            rows.append(row)
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return out + [""]


def _banner(sweep: SweepRecord) -> list[str]:
    judge = sweep.judge or "unknown"
    if sweep.simulated is True:
        return [
            f"> **SIMULATED JUDGE (`{judge}`)**: verdicts were drawn by a simulated judge, not "
            "produced by a language model. These numbers show how the ranker responds to "
            "synthetic verdicts; they say nothing about a real model's judgement.",
            "",
        ]
    if sweep.simulated is None:
        return [f"> Judge `{judge}`: sweep.json does not say whether it was simulated.", ""]
    return [f"> Judge `{judge}`: a real model backend (not simulated).", ""]


def _run_section(m: dict[str, Any]) -> list[str]:
    sweep = m["sweep"]
    rows = [[k, f"`{json.dumps(sweep[k])}`"] for k in _RUN_FIELDS if k in sweep]
    rows += [
        [k, f"`{json.dumps(v)}`"]
        for k, v in sorted(sweep.items())
        if k not in _RUN_FIELDS and k not in _LONG_FIELDS
    ]
    reps = "; ".join(f"{c}: {', '.join(map(str, r))}" for c, r in m["replicates"].items())
    rows += [
        ["replicates found", reps],
        ["rounds analysed", f"{round_label(m, m['first_round'])} .. "
                            f"{round_label(m, m['last_round'])} (files round_{m['first_round']} "
                            f".. round_{m['last_round']})"],
        ["abstain threshold", f"{m['analysis']['abstain_threshold']}"],
        [
            "intervals",
            f"{m['analysis']['interval']} ({m['analysis']['bootstrap_resamples']} resamples, "
            f"seed {m['analysis']['bootstrap_seed']})",
        ],
    ]
    out = ["## What was run", "", *_table(["field", "value"], rows)]
    if any(k in sweep for k in _LONG_FIELDS):
        out += ["The full configuration is in `sweep.json` (also copied into `metrics.json`).", ""]
    return out


def _issues_section(m: dict[str, Any]) -> list[str]:
    if not m["data_issues"]:
        return []
    rows = [[i["file"], str(i["line"] or ""), i["problem"]] for i in m["data_issues"]]
    return [
        "## Data issues",
        "",
        f"{len(rows)} problem(s) in the results files; the rows concerned were left out.",
        "",
        *_table(["file", "line", "problem"], rows),
    ]


def _headline_section(m: dict[str, Any]) -> list[str]:
    rows = headline_rows(m)
    out = [
        "## Headline",
        "",
        "Mean over replicates [95% interval: t below 10 replicates, bootstrap from 10]; "
        "differences are each "
        f"condition minus {m['baseline']} at the last round.",
        "",
    ]
    if rows:
        header = list(rows[0])
        out += _table(header, [[r[h] for h in header] for r in rows])
    delta_rows = [
        [row["label"], *(fmt(row["conditions"][c]["delta"], sign=True) for c in m["conditions"])]
        for row in m["headline"]
    ]
    out += [
        f"First round ({round_label(m, m['first_round'])}) to last round "
        f"({round_label(m, m['last_round'])}), per replicate then averaged:",
        "",
    ]
    out += _table(["metric", *(f"{c} last - first" for c in m["conditions"])], delta_rows)
    return out


def _figures_section() -> list[str]:
    out = ["## Figures", ""]
    for name in FIGURES:
        out += [f"![{_FIGURE_CAPTIONS[name]}]({name})", ""]
    return out


def _pairs_section(m: dict[str, Any]) -> list[str]:
    rows = []
    for cond, pairs in m["pairs"].items():
        for pid, p in pairs.items():
            statuses = ", ".join(f"rep{r}: {s}" for r, s in p["twin_status_last"].items()) or "—"
            rows.append(
                [
                    cond,
                    f"{pid} ({p['kind']})",
                    p["gold"],
                    p["twin"],
                    fmt(p["first"]["gold_rank"], 2),
                    fmt(p["last"]["gold_rank"], 2),
                    fmt(p["first"]["twin_rank"], 2),
                    fmt(p["last"]["twin_rank"], 2),
                    fmt(p["last"]["win_rate"], 2),
                    statuses,
                ]
            )
    if not rows:
        return ["## Trap pairs", "", "No trap pairs in the data.", ""]
    header = [
        "cond",
        "prompt",
        "gold",
        "poisoned twin",
        f"gold rank ({round_label(m, m['first_round'])})",
        f"gold rank ({round_label(m, m['last_round'])})",
        f"twin rank ({round_label(m, m['first_round'])})",
        f"twin rank ({round_label(m, m['last_round'])})",
        "win rate (last)",
        "twin status (last)",
    ]
    out = ["## Trap pairs", "", "Ranks outside the top 10 count as 11.", "", *_table(header, rows)]
    gap_rows = []
    for cond in m["conditions"]:
        for r in (m["first_round"], m["last_round"]):
            s = m["per_round"].get(cond, {}).get(str(r), {})
            gap_rows.append(
                [
                    cond,
                    round_label(m, r),
                    fmt(s.get("trap.gap_all"), sign=True),
                    fmt(s.get("trap.gap_both_present"), sign=True),
                    fmt(s.get("trap.n_gap_both_present"), 2),
                ]
            )
    out += [
        "Score gap gold - poisoned on trap prompts. *All pairs* imputes a skill missing from the top 10 "
        "as the lowest score shown minus "
        f"{m['analysis']['gap_censor_eps']}; *both present* averages only "
        "pairs where both reached the top 10 (the published run's biased figure).",
        "",
    ]
    out += _table(
        ["cond", "round", "gap (all pairs)", "gap (both present)", "pairs with both present"],
        gap_rows,
    )
    return out


def _detail_section(m: dict[str, Any]) -> list[str]:
    """Every prompt group's ranking metrics and the tier ranks, at the first and last round."""
    cols = [
        ("hit@1", "hit@1"),
        ("hit@3", "hit@3"),
        ("hit@5", "hit@5"),
        ("mrr", "MRR"),
        ("ndcg@5", "nDCG@5"),
        ("gold_rank", "gold rank"),
    ]
    rows, tier_rows = [], []
    for cond in m["conditions"]:
        for r in dict.fromkeys((m["first_round"], m["last_round"])):
            s = m["per_round"].get(cond, {}).get(str(r), {})
            for group in ("in_distribution", "trap", "normal", "heldout"):
                if f"{group}.hit@1" in s:
                    rows.append(
                        [cond, round_label(m, r), group, *(fmt(s.get(f"{group}.{k}"), 2) for k, _ in cols)]
                    )
            tier_rows.append(
                [
                    cond,
                    round_label(m, r),
                    *(
                        f"{fmt(s.get(f'tier_rank.in_distribution.{t}'), 2)} "
                        f"(x{_count(s.get(f'tier_count.in_distribution.{t}'))})"
                        for t in TIERS
                    ),
                    fmt(s.get("null.top_score"), 3),
                    fmt(s.get("in_distribution.abstention_rate"), 2),
                ]
            )
    return [
        "## Ranking detail",
        "",
        *_table(["cond", "round", "prompts", *(c for _, c in cols)], rows),
        "Mean rank per tier over the in-distribution rows present in the top 10 (xN: mean "
        "appearances per replicate; skills outside the top 10 are not counted), the null "
        "prompts' top score, and in-distribution prompts whose top score falls under the "
        "abstention threshold:",
        "",
        *_table(["cond", "round", *TIERS, "null top score", "in-dist abstention"], tier_rows),
    ]


def _count(s: dict[str, Any] | None) -> str:
    return "—" if not s else f"{s['mean']:.1f}"


def _heldout_rounds_section(m: dict[str, Any]) -> list[str]:
    """Held-out hit@1, hit@5 and MRR at every round of every condition (only when the sweep
    measured held-out prompts with an expected skill); C0's round 0 is the baseline."""
    rows = []
    for cond in m["conditions"]:
        for r, s in sorted(m["per_round"].get(cond, {}).items(), key=lambda kv: int(kv[0])):
            if "heldout.hit@1" in s:
                rows.append([cond, round_label(m, int(r)),
                             *(fmt(s.get(f"heldout.{k}"), 3) for k in ("hit@1", "hit@5", "mrr"))])
    if not rows:
        return []
    return ["## Held-out prompts per round", "",
            "Measured every round, never learned from; c0 at its first round (before any "
            "learning) is the baseline.", "",
            *_table(["cond", "round", "hit@1", "hit@5", "MRR"], rows)]


def _cold_rounds_section(m: dict[str, Any]) -> list[str]:
    """Held-out hit@1 and hit@5 at every round of every condition, split into prompts of warm
    skills and of the cold skills the sweep held back (--cold-skills); only when it did."""
    rows = []
    keys = [f"heldout_{part}.{k}" for part in ("warm", "cold") for k in ("hit@1", "hit@5")]
    for cond in m["conditions"]:
        for r, s in sorted(m["per_round"].get(cond, {}).items(), key=lambda kv: int(kv[0])):
            if any(k in s for k in keys):
                rows.append([cond, round_label(m, int(r)), *(fmt(s.get(k), 3) for k in keys)])
    if not rows:
        return []
    cold = m.get("sweep", {}).get("cold_skills") or []
    added = m.get("sweep", {}).get("add_skills_at")
    when = (f"they join the pool at round {added + 1} (`--add-skills-at {added}`) and are "
            "learned from from then on" if added is not None
            else "in the pool throughout, their prompts never learned from")
    return ["## Held-out prompts per round: warm and cold skills", "",
            f"{len(cold)} cold skills (`--cold-skills`; {when}): {', '.join(cold[:12])}"
            f"{' ...' if len(cold) > 12 else ''}. A held-out prompt is cold when its expected "
            "skill is one of them.", "",
            *_table(["cond", "round", "warm hit@1", "warm hit@5", "cold hit@1", "cold hit@5"],
                    rows)]


def _verdict_section(m: dict[str, Any]) -> list[str]:
    keys = [
        ("verdicts.accuracy", "verdict accuracy"),
        *((f"verdicts.accuracy.{t}", f"accuracy on {t}") for t in TIERS),
        ("verdicts.scored", "verdicts scored"),
        ("tags.parse_rate", "tag parse rate (ok in-distribution turns)"),
        ("tags.parse_failures", "tag parse failures"),
        ("tags.off_catalog_rate", "off-catalog names / tags"),
        ("tags.invented_rate", "invented names / tags"),
        ("tags.null_tagged_rate", "null turns that emitted tags"),
        ("catalog.trap.twin_rate", "own poisoned twin in trap catalog"),
        ("turns.ok", "turns ok"),
        ("turns.failed", "turns failed"),
        ("turns.timeout", "turns timed out"),
    ]
    rows = [
        [label, *(fmt(m["overall"].get(c, {}).get(k)) for c in m["conditions"])]
        for k, label in keys
    ]
    out = [
        "## Verdicts and tags",
        "",
        "All rounds pooled within each replicate, then averaged over replicates.",
        "",
    ]
    out += _table(["metric", *m["conditions"]], rows)
    mix_rows = [
        [c, t, *(str(m["verdict_mix"][c][t][v]) for v in VERDICTS)]
        for c in m["conditions"]
        for t in TIERS
    ]
    out += ["Verdict counts per tier (all rounds and replicates):", ""]
    out += _table(["cond", "tier", *VERDICTS], mix_rows)
    return out


def _status_section(m: dict[str, Any]) -> list[str]:
    last = str(m["last_round"])
    rows = [
        [
            c,
            t,
            *(
                fmt(m["per_round"].get(c, {}).get(last, {}).get(f"status.{s}.{t}"), 2)
                for s in ("suspect", "archived")
            ),
        ]
        for c in m["conditions"]
        for t in TIERS
    ]
    return [
        "## Suspect and archived skills (last round)",
        "",
        "Distinct skills with that status among the rows ranked at the last round, per replicate. "
        "Only ranked skills appear in the results: an archived skill scores -1 and rarely reaches a "
        "top 10, so these counts are lower bounds.",
        "",
        *_table(["cond", "tier", "suspect", "archived"], rows),
    ]


def _failures_section(m: dict[str, Any]) -> list[str]:
    if not m["failures"]:
        return ["## Failures", "", "No turn failed or timed out.", ""]
    rows = [
        [
            str(int(f["round"]) + 1),  # rounds are labelled from 1, as everywhere
            f["cond"],
            str(f["replicate"]),
            f["prompt_id"],
            f["status"],
            f["error"][:160],
        ]
        for f in m["failures"]
    ]
    return ["## Failures", "", *_table(["round", "cond", "rep", "prompt", "status", "error"], rows)]


_DEFINITIONS = [
    "## Definitions",
    "",
    "- **gold rank**: rank of the expected skill in the top 10; a miss counts as 11. **hit@k**: gold rank <= k. "
    "**MRR**: mean of 1/rank, a miss counting 0. **nDCG@5**: 1/log2(rank+1) when rank <= 5, else 0 (one relevant skill).",
    "- **in-distribution** = trap + normal prompts; held-out and null prompts are reported apart.",
    "- **trap-win**: the gold skill ranks above its poisoned twin; a missing one counts as 11, ties lose.",
    "- **poisoned skill in top-5 catalog**: share of learning turns whose catalog (turns.jsonl `ranked_top5`) held "
    "any poisoned skill; counted for every turn, failed ones included, since the catalog was shown.",
    "- **null abstention**: share of null prompts whose top score is under the threshold (an empty ranking abstains).",
    "- **verdict accuracy** (from each turn's applied verdicts): poisoned -> HARMFUL; the prompt's expected real "
    "skill -> HELPFUL; other real or competing skills -> HELPFUL or NEUTRAL; noise -> NEUTRAL.",
    "- **tag parse rate**: ok in-distribution turns with at least one parsed tag (null prompts should emit none, "
    "so they are reported apart). Off-catalog and invented rates are per parsed tag.",
    "- **intervals**: 95% over replicates, by count: none below 3 replicates (`n too small`, no "
    "band in the plots, no conclusion); a Student t interval from 3 to 9 (a percentile bootstrap "
    "over so few values covers far less than 95%); a percentile bootstrap from 10. Differences "
    "pair replicates by index when both conditions have the same replicates (the interval of "
    "the per-replicate differences), else a Welch t interval (`unpaired`; a bootstrap of each "
    "side from 10 each). A conclusion counts a metric as better or worse only when the whole "
    "interval of the difference lies on one side of 0 and has some width: a zero-width interval "
    "(`no spread`, every replicate gave the same value) is never a claim. "
    "Rounds are labelled from 1 everywhere (terminal, report, plots: `round 1 of 6` is the "
    "measurement before any learning); the files are numbered from 0 (`round_0.jsonl`).",
    "- A round file with no rows gives no ranking metrics for that cell (reported under data issues); "
    "a prompt missing from a non-empty round counts as a miss.",
    "",
]


def render_report(metrics: dict[str, Any]) -> str:
    """The whole report.md text."""
    sweep = SweepRecord.from_json(metrics["sweep"], "metrics.json's sweep record")
    title = f"# Sweep report: {sweep.sweep_id or 'unnamed sweep'}"
    parts = [
        title,
        "",
        *_banner(sweep),
        *single_conclusion(metrics),
        *_run_section(metrics),
        *_issues_section(metrics),
        *_headline_section(metrics),
        *_figures_section(),
        *_pairs_section(metrics),
        *_detail_section(metrics),
        *_heldout_rounds_section(metrics),
        *_cold_rounds_section(metrics),
        *_verdict_section(metrics),
        *_status_section(metrics),
        *_failures_section(metrics),
        *_DEFINITIONS,
    ]
    return "\n".join(parts).rstrip() + "\n"
