"""Render bench/RESULTS.md from the figures `bench/run_all.py` collected."""

from __future__ import annotations

import json


def _n(x: float | None, unit: str = "", digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}{unit}"


def _s(st: dict | None, unit: str = " s", digits: int = 2) -> str:
    """median (min - max, n=...) of a stats dict."""
    if not st or st.get("median") is None:
        return "n/a"
    n = f", n={st['n']}" if "n" in st else ""
    return (f"{st['median']:.{digits}f}{unit} ({st['min']:.{digits}f} - "
            f"{st['max']:.{digits}f}{n})")


def _ms(st: dict) -> dict:
    """The router's p50_ms/min_ms/max_ms stats as a plain stats dict."""
    return {"median": st["p50_ms"], "min": st["min_ms"], "max": st["max_ms"], "n": st["n"]}


def _ok(flag: bool | None) -> str:
    return "n/a" if flag is None else ("met" if flag else "**NOT met**")


def _load(part: dict) -> str:
    before, after = part.get("load_before"), part.get("load_after")
    return f"load average (1/5/15 min) {before} before, {after} after"


def _targets(parts: dict) -> list[tuple[str, str, str, bool | None]]:
    rows: list[tuple[str, str, str, bool | None]] = []
    router = parts.get("router", {}).get("figures")
    if router:
        by_n = {r["skills"]: r for r in router["sizes"]}
        for n, ms in ((80, 1.0), (10_000, 5.0), (100_000, 50.0)):
            if n in by_n:
                p50 = by_n[n]["vectorised"]["p50_ms"]
                rows.append(("router", f"ranking p50 at {n:,} skills <= {ms:g} ms",
                             _n(p50, " ms", 3), p50 <= ms))
        if 10_000 in by_n:
            sp = by_n[10_000]["speedup"]
            rows.append(("router", ">= 20x faster than the per-skill loop at 10k",
                         f"{sp:.0f}x", sp >= 20))
        worst = max(r["memory_ratio"] for r in router["sizes"])
        rows.append(("router", "memory <= 2x the embedding matrix", f"{worst:.2f}x",
                     worst <= 2.0))
    sweep = parts.get("sweep", {}).get("figures")
    if sweep:
        head = sweep["headline"]
        rows.append(("sweep", "seed-sized sweep <= 60 s wall incl. Prefect start-up",
                     _n(head["wall_with_startup_s"], " s", 1), head["wall_with_startup_s"] <= 60))
        ratio = sweep["flow_over_plain"]["median"]
        rows.append(("sweep", "Prefect flow <= 1.5x the plain loop (after start-up)",
                     f"{ratio:.2f}x", ratio <= 1.5))
        rows.append(("sweep", "peak memory <= 1.5 GB", _n(head["peak_rss_mb"], " MB", 0),
                     head["peak_rss_mb"] <= 1536))
    film = parts.get("film", {}).get("figures")
    if film:
        rows.append(("film", "replay film <= 1.15x plain manim + 15 s",
                     f"{film['film_s']['median']:.1f} s vs {film['budget_s']:.1f} s",
                     film["film_s"]["median"] <= film["budget_s"]))
        rerun = (film.get("rerun") or {}).get("rerun")
        if rerun:
            rows.append(("film", "rerun after a failed render: 0 model calls",
                         f"{rerun['model_calls']} calls, render reached after "
                         f"{_n(rerun['to_render_s'], ' s', 1)}", rerun["model_calls"] == 0))
    return rows


def _router(part: dict) -> list[str]:
    f = part["figures"]
    out = ["| skills | vectorised p50 (min - max) | per-skill loop | speedup | max abs diff | "
           "matrix MB | verdict state MB | ranking peak MB | memory x |",
           "|---:|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in f["sizes"]:
        out.append(f"| {r['skills']:,} | {_s(_ms(r['vectorised']), ' ms', 3)} | "
                   f"{_s(_ms(r['loop']), ' ms', 1)} | {r['speedup']:.0f}x | "
                   f"{r['max_abs_diff']:.1e} | {r['embedding_matrix_mb']:.1f} | "
                   f"{r['verdict_state_mb']:.1f} | {r['rank_peak_transient_mb']:.2f} | "
                   f"{r['memory_ratio']:.2f} |")
    qe = f.get("query_embedding")
    if qe:
        out += ["", f"Query embedding (real model, one uncached query): "
                    f"{_s(_ms(qe), ' ms', 1)}; model load {qe['model_load_s']:.1f} s."]
    out += ["", f"Ranking is timed after the query embedding, over a real SQLite store with "
                f"{f['sizes'][0]['reasons']:,} verdict reasons. Memory x = (skill matrix + "
                "peak allocation while ranking) / skill matrix. Peak RSS of the router process: "
                f"{_n(part.get('peak_rss_mb'), ' MB', 0)}."]
    return out


def _sweep(part: dict) -> list[str]:
    f = part["figures"]
    cfg = f["config"]
    cli = f["cli"]
    out = [f"Seed-sized sweep: conditions {', '.join(cfg['conditions'])} x {cfg['rounds']} "
           f"rounds x {cfg['replicates']} replicate, prompts: {cfg['prompts']}, judge "
           f"{cfg['judge']}; {cfg['repeats']} repeats of each variant, alternating.", "",
           "| figure | median (min - max) |", "|---|---|",
           f"| plain Python loop (same library calls, analysis included) | {_s(f['plain_s'])} |",
           f"| Prefect flow `sweep` (server already up) | {_s(f['flow_s'])} |",
           f"| ratio flow / plain | {_s(f['flow_over_plain'], 'x')} |",
           f"| temporary Prefect server to healthy (fresh Prefect home: includes DB "
           f"migrations) | {_n(f['prefect_startup_s'], ' s', 1)} |",
           f"| first flow run after start-up (trivial flow) | {_n(f['first_flow_s'], ' s', 2)} |",
           f"| `mythloop sweep` in a fresh process, end to end (imports, its own temporary "
           f"server, sweep, analysis) | {_s(cli['wall_s'])} |",
           f"| peak RSS, CLI process tree (client + Prefect server) | "
           f"{_n(cli['peak_tree_rss_mb'], ' MB', 0)} |",
           f"| peak RSS, bench process after the plain loops / after the flows | "
           f"{_n(f['peak_rss_mb']['bench_process_after_plain'], ' MB', 0)} / "
           f"{_n(f['peak_rss_mb']['bench_process_after_flow'], ' MB', 0)} |",
           f"| peak RSS, the temporary Prefect server | "
           f"{_n(f['peak_rss_mb']['prefect_server'], ' MB', 0)} |", "",
           f"Both variants end with the same metrics: {f['same_metrics']}. Failed turns: "
           f"{f['failed_turns']}. Untimed warm-up (model load or embedding cache, catalog): "
           f"{f['warmup_plain_s']:.1f} s."]
    return out


def _film(part: dict) -> list[str]:
    f = part["figures"]
    out = ["| figure | median (min - max) |", "|---|---|",
           f"| replay film end to end (`film(...)`, fresh, server already up) | "
           f"{_s(f['film_s'])} |",
           f"| plain `python -m manim -ql` of the final (repaired) scene | "
           f"{_s(f['plain_manim_s'])} |",
           f"| raw ratio film / plain | {_s(f['film_over_plain'], 'x')} |",
           f"| target budget: 1.15 x plain + 15 s | {_n(f['budget_s'], ' s', 1)} |",
           f"| the failed first render (recorded codegen's error) | {_s(f['failed_render_s'])} |",
           f"| the successful render inside the film (sandboxed) | "
           f"{_s(f['ok_render_in_film_s'])} |",
           f"| film without the failed render | {_s(f['film_without_failed_render_s'])} |",
           f"| ratio without the failed render | {_s(f['film_without_failed_over_plain'], 'x')} |",
           f"| from flow call to the first render | {_s(f['to_first_render_s'])} |", "",
           f"Repairs per film: {f['repairs']}; video length {_n(f['video_duration_s'], ' s', 1)}; "
           f"plain manim peak RSS {_n(f['plain_peak_rss_mb'], ' MB', 0)}."]
    rerun = f.get("rerun")
    if rerun:
        a, b = rerun["first"], rerun["rerun"]
        out += ["", "Rerun after a failed render (max_repairs=0, so the first run stops at "
                    "its failed render; then the same film again):", "",
                "| run | model calls | seconds to reach the render | wall |", "|---|---:|---:|---:|",
                f"| first (fresh) | {a['model_calls']} | {_n(a['to_render_s'], ' s')} | "
                f"{_n(a['wall_s'], ' s', 1)} |",
                f"| rerun | {b['model_calls']} | {_n(b['to_render_s'], ' s')} | "
                f"{_n(b['wall_s'], ' s', 1)} |", "",
                f"Cached on the rerun: {', '.join(b['cached_steps']) or 'none'}; not cached: "
                f"{', '.join(b['uncached_steps']) or 'none'}."]
    return out


def _overhead(part: dict) -> list[str]:
    f = part["figures"]
    out = [f"{f['n']} sequential calls of a trivial task inside one flow, {f['repeats']} "
           "repeats; per-task wall time.", "",
           "| task | per task (median, min - max) |", "|---|---|",
           f"| bare `@task` | {_s(f['bare_ms'], ' ms', 1)} |",
           f"| mythloop task (`tasks/common.py: mythloop_task` defaults) | "
           f"{_s(f['mythloop_ms'], ' ms', 1)} |",
           f"| ratio mythloop / bare | {_s(f['mythloop_over_bare'], 'x')} |",
           f"| extra per task | {_s(f['extra_ms_per_task'], ' ms', 1)} |"]
    labels = {"mythloop_no_tags": "mythloop task without tags",
              "mythloop_no_persist": "mythloop task without persisted results",
              "bare_payload": "bare task given the sweep's ConditionRun as a plain argument",
              "bare_payload_quoted": "the same, wrapped in `quote()`"}
    if f.get("breakdown"):
        out += ["", "Breakdown (one run each):", "", "| variant | per task |", "|---|---:|"]
        for key, label in labels.items():
            if key in f["breakdown"]:
                b = f["breakdown"][key]
                out.append(f"| {label} (n={b['n']}) | {b['per_task_ms']:.1f} ms |")
    return out


def _findings(parts: dict) -> list[str]:
    """Why a missed target missed, from the measured breakdown (plus the profile notes)."""
    out: list[str] = []
    sweep = parts.get("sweep", {}).get("figures")
    ovh = parts.get("overhead", {}).get("figures")
    if sweep and sweep["flow_over_plain"]["median"] > 1.5:
        cfg = sweep["config"]
        tasks = len(cfg["conditions"]) * cfg["rounds"] * 14 + 1
        extra = sweep["flow_s"]["median"] - sweep["plain_s"]["median"]
        out.append(f"- **Sweep flow / plain loop misses 1.5x**: the flow spends {extra:.1f} s "
                   f"more than the loop for about {tasks} task runs, "
                   f"{1e3 * extra / tasks:.0f} ms per task run.")
        if ovh and ovh.get("breakdown"):
            b = ovh["breakdown"]
            walk = b["bare_payload"]["per_task_ms"] - b["bare_payload_quoted"]["per_task_ms"]
            tags = ovh["mythloop_ms"]["median"] - b["mythloop_no_tags"]["per_task_ms"]
            out.append(f"  Measured here: passing the `ConditionRun` object as a plain task "
                       f"argument costs {walk:.0f} ms per call (Prefect walks every parameter "
                       f"twice, resolving futures and collecting task inputs); the `mythloop` tag "
                       f"costs {tags:.0f} ms per call (a tagged task asks the API for concurrency "
                       "slots on every run, even with no limit defined).")
    router = parts.get("router", {}).get("figures")
    missed = [t for p, t, _, ok in _targets(parts) if p == "router" and ok is False]
    if router and missed:
        state_mb = router["sizes"][0]["verdict_state_mb"]
        out.append(f"- **Router misses {len(missed)} latency target(s)** ({'; '.join(missed)}). "
                   f"Not profiled by this benchmark. Each ranking also scores the query against "
                   f"all {router['sizes'][0]['reasons']:,} verdict reasons ({state_mb:.0f} MB of "
                   "verdict state), a fixed cost whatever the pool size that may dominate at 80 "
                   "skills (not verified); a busy machine inflates the rest. Check on a quiet machine with "
                   "`python bench/router.py --blas-threads 1`.")
    film = parts.get("film", {}).get("figures")
    if film and film["film_s"]["median"] > film["budget_s"]:
        out.append(f"- **Film misses its budget**: the failed first render costs "
                   f"{film['failed_render_s']['median']:.1f} s; without it the film takes "
                   f"{film['film_without_failed_render_s']['median']:.1f} s against "
                   f"{film['budget_s']:.1f} s.")
    return out


PROFILE_NOTES = """\
### Profile notes (recorded 2026-12-02 on this machine, before any fix; load average 4-7 on 2 cores)

`python bench/sweep.py --profile /tmp/sweep.txt --rounds 2` (pyinstrument): of 32.9 s in the
flow, `Task.__call__` took 28.5 s and the task bodies 3.3 s.
`prefect.utilities.collections.visit_collection` took 12.9 s, called from
`task_engine._resolve_parameters` (6.4 s) and `collect_task_run_inputs_sync` (6.4 s): Prefect walks
the `ConditionRun` argument (its catalog of 80 skills, prompts, config) of every `measure_round`
and `learning_turn` call, twice. `concurrency._sync.acquire_concurrency_slots_with_lease` took
5.3 s: one API round trip per tagged task run (every mythloop task carries the `mythloop` tag),
even with no concurrency limit defined. In the library, shared by both variants,
`mythloop.settings.get_settings()` took 2.2 s: `ConditionRun.learning_turn` builds a fresh
pydantic Settings object on every turn (`_settings_turn_timeout`).

Fix checked on a patched copy of flows/feedback_loop.py (tasks called as `quote(run)`, tags
removed): the 6-round seed sweep went from 52.9 s to 16.2 s (plain loop 5.9 s, load ~4), with
identical metrics. The rest is Prefect's per-task cost (~170 task runs per sweep).
All three are applied in the project now; the sweep figures above were measured with them:
1. flows/feedback_loop.py: call `measure_round(quote(run), ...)` and `turn(quote(run), ...)`
   (`from prefect.utilities.annotations import quote`; Prefect unwraps it before the call and
   skips the walk; no future is ever nested in the run object).
2. tasks/common.py: drop the default `mythloop` tag (each tag costs an API call per task run);
   keep `llm` on real model calls only, where a concurrency limit is useful.
3. mythloop/sweep/condition.py: resolve the turn timeout once (in `open()`), not per turn.
"""


def render_results(data: dict) -> str:
    """The whole RESULTS.md."""
    m, parts = data["machine"], data["parts"]
    pk = m["packages"]
    busy = m["loadavg"][0] > 0.7 * (m["cores_usable"] or 1)
    lines = [
        "# Benchmark results", "",
        "Generated by `make bench` (`bench/run_all.py`); do not edit by hand. Raw figures: "
        "`bench/results.json`. Each figure is the median (min - max, n runs) over repeated "
        "runs, every part measured in the same `make bench` run." +
        (" **Quick mode: minimal sizes, not the real figures.**" if data.get("quick") else ""),
        "", "## Machine", "",
        f"- Date: {m['date_utc']}; total run {data['total_s'] / 60:.1f} min",
        f"- CPU: {m['cpu']}; {m['cores']} cores ({m['cores_usable']} usable); memory "
        f"{_n(m['memory_gb'], ' GB', 1)}; {m['os']}",
        f"- Python {m['python']}; " + ", ".join(f"{k} {v}" for k, v in pk.items()),
        f"- Commit: {m['git']}",
        f"- Load average (1/5/15 min): {m['loadavg']} at the start, {data['load_end']} at "
        "the end; per part below.",
    ]
    if busy:
        lines += ["", "> **The machine was busy** (load average above the usable cores): other "
                      "work shared the CPUs, so absolute timings are inflated and ratios are "
                      "noisier. Rerun `make bench` on a quiet machine for the reference figures."]
    lines += ["", "## Targets", "", "| part | target | measured | result |", "|---|---|---|---|"]
    lines += [f"| {p} | {t} | {v} | {_ok(ok)} |" for p, t, v, ok in _targets(parts)]
    sections = [("router", "Router ranking (bench/router.py)", _router),
                ("scale", "Scale (bench/scale.py)", None),
                ("sweep", "Sweep: Prefect flow vs plain loop (bench/sweep.py)", _sweep),
                ("film", "Film: replay film vs plain manim (bench/film.py)", _film),
                ("overhead", "Per-task orchestration overhead (bench/overhead.py)", _overhead)]
    for key, title, render in sections:
        part = parts.get(key)
        lines += ["", f"## {title}", ""]
        if part is None:
            lines.append("Not run in this `make bench` (see `--only`).")
            continue
        if part.get("absent"):
            lines.append(f"Absent: {part['absent']}.")
            continue
        if part.get("error"):
            lines += [(f"(run of {part['from_run']}) " if part.get("from_run") else "") +
                      f"**Failed**: {part['error'].splitlines()[0] if part['error'] else ''}", "",
                      "```", part["error"][-1200:], "```"]
            continue
        lines += render(part) if render else ["```json", json.dumps(part["figures"], indent=1,
                                                                    default=str)[:6000], "```"]
        lines += ["", f"Part wall {part['child_wall_s']:.0f} s; {_load(part)}."
                  + (f" Figures kept from the run of {part['from_run']}." if part.get("from_run")
                     else "")]
    findings = _findings(parts)
    lines += ["", "## Findings", ""]
    if not findings and all(ok is not False for *_, ok in _targets(parts)):
        findings = ["Every measured target was met."]
    lines += findings
    lines += ["", PROFILE_NOTES]
    return "\n".join(lines) + "\n"
