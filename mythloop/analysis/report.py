"""report.md, rendered only from the metrics dict (so every number is in metrics.json)."""

from __future__ import annotations

import json
from typing import Any

from mythloop.analysis.compute import HEADLINE, POWER_METRICS
from mythloop.analysis.conclusion import GROUP_METRICS, round_label, single_conclusion
from mythloop.analysis.metrics import TIERS, VERDICTS
from mythloop.analysis.plots import FIGURES
from mythloop.analysis.stats import zero_width
from mythloop.sweep.records import SweepRecord
from mythloop.vocab import CONDITION_HELP

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
    "history.png": "each headline metric per night (written by the sweep's history step "
                   "beside this report; one x per night, every condition at that x)",
    "trap_win_rate.png": "trap-win rate by round",
    "poisoned_rank.png": "rank of each trap prompt's poisoned twin by round (missing = 11)",
    "verdict_mix.png": "verdict mix per tier",
}


def fmt(s: dict[str, Any] | None, digits: int = 3, sign: bool = False) -> str:
    """`mean [lo, hi]`; `mean (no interval: why)` where none could be computed; a
    zero-width interval is marked `(no spread)` (it supports no claim); a counted rate says
    what it counted, `(k of n)`."""
    if not s:
        return "—"
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    if s.get("lo") is None:
        return f"{f.format(s['mean'])} (no interval: {s.get('why') or 'none computed'})"
    text = f"{f.format(s['mean'])} [{f.format(s['lo'])}, {f.format(s['hi'])}]"
    if s.get("method") == "wilson-counts":  # a counted rate: what was counted
        text += f" ({s['k']} of {s['n']})"
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
            n = max((int(s.get("n_replicates") or 0) for s in summaries.values()
                     if not isinstance(s.get("n_replicates"), list)), default=0)
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


def _intro(m: dict[str, Any], sweep: SweepRecord) -> list[str]:
    """What a newcomer needs before the Conclusion: the conditions, the judge and its noise,
    what was counted."""
    out = ["Conditions (how the router uses the verdicts it stores; docs/blend.md):", ""]
    for cond in [*CONDITION_HELP, *(c for c in m["conditions"] if c not in CONDITION_HELP)]:
        ran = cond in m["conditions"]
        out.append(f"- **{cond.upper()}**: {CONDITION_HELP.get(cond, 'unknown condition')}"  # type: ignore[call-overload]
                   + (" (the baseline)" if cond == m.get("baseline") else "")
                   + ("" if ran else " (not run here)"))
    noise = (sweep.judge_options or {}).get("noise")
    judge = sweep.judge or "unknown"
    if sweep.simulated is True:
        what = (f"the simulated judge `{judge}`: the verdict a skill's tier calls for (poisoned "
                "HARMFUL, the expected skill HELPFUL), each decision flipped with probability "
                f"{noise if noise is not None else '?'} (its noise; mythloop/llm/simulated.py)")
    else:
        what = f"`{judge}`" + (f" (noise {noise})" if noise is not None else "")
    prompts = m.get("prompts") or {}
    kinds = [p.get("kind") for p in prompts.values()]
    mix = ", ".join(f"{kinds.count(k)} {label}" for k, label in (
        ("trap", "trap"), ("normal", "normal"), ("heldout", "held-out"), ("null", "null"))
        if kinds.count(k))
    reps = ", ".join(f"{c.upper()} {len(r)}" for c, r in m["replicates"].items())
    out += ["", f"Judge: {what}. {len(prompts)} prompts ({mix}; trap + normal are the "
            f"in-distribution ones), replicates per condition: {reps}; "
            f"{len(m.get('rounds') or [])} rounds of measure then learn.", ""]
    return out


def _power_section(m: dict[str, Any]) -> list[str]:
    """The smallest difference this run could detect (80% power), per POWER_METRICS."""
    power = m.get("power") or {}
    if not power:
        return []
    labels = dict(POWER_METRICS)
    lines = []
    for name, per_key in power.items():
        parts = []
        for key, p in per_key.items():
            if p.get("mde") is None:
                parts.append(f"{labels.get(key, key)}: {p.get('why')}")
                continue
            size = (f"**{p['mde']:.2f}**" if p.get("detects", True) else
                    "**none** (too few prompts for 80% power at any difference)")
            parts.append(f"{labels.get(key, key)} {size} ({p['n_prompts']} prompts x "
                         f"{p['replicates']}; {p['basis']} {p['sd']:.2f})")
        if parts:
            lines.append(f"- {name.upper()}: " + "; ".join(parts) + ".")
    if not lines:
        return []
    return ["**Power**: the smallest difference at the last round this run detects with 80% "
            "power (paired by prompt, two-sided 5%): (t(0.975, N-1) + t(0.80, N-1)) x sd / "
            "sqrt(N), N the metric's prompts, sd that of their per-prompt differences "
            "(replicate means); a \"no clear difference\" smaller than it is no evidence of "
            "no effect.", "", *lines, ""]


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
        ["intervals", m["analysis"]["interval"]],
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
        "Mean over prompts and replicates [95% interval, the prompt as the unit]; differences "
        f"are each condition minus {m['baseline']} at the last round, paired by prompt.",
        "",
    ]
    if rows:
        header = list(rows[0])
        out += _table(header, [[r[h] for h in header] for r in rows])
    delta_rows = [
        [row["label"], *(fmt(row["conditions"][c]["delta"], sign=True) for c in m["conditions"])]
        for row in m["headline"]
    ]
    deltas = m.get("deltas") or {}
    delta_rows += [
        [label, *(fmt(deltas.get(c, {}).get(key), sign=True) for c in m["conditions"])]
        for key, label in GROUP_METRICS
        if key not in {row["key"] for row in m["headline"]}
        and any(key in deltas.get(c, {}) for c in m["conditions"])
    ]
    out += [
        f"First round ({round_label(m, m['first_round'])}) to last round "
        f"({round_label(m, m['last_round'])}), paired by prompt and replicate (the headline, "
        "then each prompt group's ranking metrics):",
        "",
    ]
    out += _table(["metric", *(f"{c} last - first" for c in m["conditions"])], delta_rows)
    return out


def _figures_section() -> list[str]:
    out = ["## Figures", "", "Bands: the same 95% intervals as the tables.", ""]
    for name in FIGURES:
        out += [f"![{_FIGURE_CAPTIONS[name]}]({name})", ""]
    out += [f"History across nights: [history.png](history.png) "
            f"({_FIGURE_CAPTIONS['history.png']}).", ""]
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
    when = (f"they join the pool at round {added + 1} (`--add-skills-at {added + 1}`) and are "
            "learned from from then on" if added is not None
            else "in the pool throughout, their prompts never learned from")
    return ["## Held-out prompts per round: warm and cold skills", "",
            f"{len(cold)} cold skills (`--cold-skills`; {when}): {', '.join(cold[:12])}"
            f"{' ...' if len(cold) > 12 else ''}. A held-out prompt is cold when its expected "
            "skill is one of them.", "",
            *_table(["cond", "round", "warm hit@1", "warm hit@5", "cold hit@1", "cold hit@5"],
                    rows)]


def _attack_section(m: dict[str, Any]) -> list[str]:
    """Attack success at every round of every condition, and each condition minus the
    baseline (only when the sweep's pool held injected skills)."""
    injected = m.get("sweep", {}).get("injected") or {}
    if not injected:
        return []
    keys = [f"attack.{g}.{k}" for g in ("heldout", "targeted") for k in ("top1_rate", "top5_rate")]
    base = m.get("baseline")
    rows = []
    for cond in m["conditions"]:
        diff = (m.get("differences") or {}).get(f"{cond}-{base}", {}).get("per_round", {})
        for r, s in sorted(m["per_round"].get(cond, {}).items(), key=lambda kv: int(kv[0])):
            if any(k in s for k in keys):
                rows.append([cond, round_label(m, int(r)), *(fmt(s.get(k), 3) for k in keys),
                             fmt(diff.get(r, {}).get(keys[0]), 3, sign=True)
                             if cond != base else "—"])
    if not rows:
        return []
    options = m.get("sweep", {}).get("judge_options") or {}
    persuade = float(options.get("persuade") or 0.0)
    judge = (f"the simulated judge followed an injection with probability {persuade:g}"
             + (" and then reported the catalog's other skills harmful where it was asked"
                if options.get("persuade_others") else "")
             if persuade > 0 else "the judge was not persuadable (probability 0): what the "
             "injected descriptions earn on their own semantics and honest verdicts")
    names = sorted(injected)
    return ["## Attack: injected skills", "",
            f"{len(names)} skills of the pool carry an instruction to the judge in their "
            f"description ({', '.join(names[:8])}{' ...' if len(names) > 8 else ''}; "
            f"`injected.yaml`); {judge}. **Attack success**: the share of held-out prompts "
            "whose top 1 (top 5) holds an injected skill that is not the right one; "
            "*targeted*: over the held-out prompts whose right skill an injected skill "
            f"targets. The last column is the condition minus {base}, paired by prompt. "
            "Collateral (the right skills' held-out hit@1 against the same sweep without "
            "the attack) compares two sweeps: `mythloop compare CLEAN_DIR THIS_DIR`.", "",
            *_table(["cond", "round", "top-1", "top-5", "targeted top-1", "targeted top-5",
                     f"top-1 minus {base}"], rows)]


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
        "All rounds and replicates pooled: a rate is k of n counted (turns, tags or verdicts) "
        "with a Wilson interval on those counts, widened by the design effect when the "
        "replicates' own rates differ more than chance would make them; a count is averaged "
        "over replicates.",
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
    "- **intervals**: 95%, with the prompt as the unit (docs/statistics.md): the variance of the "
    "mean clustered by prompt plus the component the replicates share, and a Wilson score "
    "interval at the effective sample size, so rates, hit@k, MRR and nDCG stay in [0, 1], "
    "ranks in [1, 11] and differences in [-1, 1] (ranks: [-10, 10]). Differences pair each "
    "prompt with itself (and each replicate with its namesake when both conditions ran the "
    "same replicates). With 1 replicate an interval covers prompt variation only. A rate "
    "that is counted (verdict accuracy and the tag rates: k of n verdicts, turns or tags; a "
    "trap pair's win rate: k of n replicates) shows `(k of n)` and takes a Wilson interval "
    "on those counts, widened by the design effect when the replicates disagree more than "
    "chance would make them; other numbers that are no mean over prompts (counts, a trap "
    "pair's ranks) take the replicate as the unit. A rate whose every observation sits at a "
    "bound is a count (all 30 hit: 30 of 30) and keeps an interval; identical ranks (or "
    "MRR, nDCG values) have none, at a bound as inside (`no spread`). `n` counts prompts x "
    "replicates. A conclusion counts a metric as "
    "better or worse only when the whole interval of the difference lies on one side of 0 "
    "and has some width; a zero-width interval (`no spread`) is never a claim; where no "
    "interval could be computed the cell says why. "
    "Rounds are labelled from 1 everywhere people read them (terminal, report, plots, the "
    "UI's task names, `--add-skills-at`, `mythloop models`: `round 1 of 6` is the "
    "measurement before any learning); the files and metrics.json index them from 0 "
    "(`round_0.jsonl`).",
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
        *_intro(metrics, sweep),
        *single_conclusion(metrics),
        *_power_section(metrics),
        *_run_section(metrics),
        *_issues_section(metrics),
        *_headline_section(metrics),
        *_figures_section(),
        *_pairs_section(metrics),
        *_detail_section(metrics),
        *_heldout_rounds_section(metrics),
        *_cold_rounds_section(metrics),
        *_attack_section(metrics),
        *_verdict_section(metrics),
        *_status_section(metrics),
        *_failures_section(metrics),
        *_DEFINITIONS,
    ]
    return "\n".join(parts).rstrip() + "\n"
