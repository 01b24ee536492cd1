"""Generate bench/RESULTS.md from the records in bench/records/ and nothing else.
--check: exit 1 when the page is not what the records give."""

import argparse
import operator
import sys
from pathlib import Path

import records

PAGE = Path(__file__).resolve().parent / "RESULTS.md"
HISTORY_N = 6
TITLES = {  # the parts in the page's order
    "router": "Router ranking (bench/router.py)",
    "scale": "Scale: PostgreSQL, workers, a task burst (bench/scale.py)",
    "sweep": "Sweep: Prefect flow vs plain loop (bench/sweep.py)",
    "film": "Film: scene-parallel replay film vs plain manim (bench/film.py)",
    "sandbox": "Render start-up before and after the bubblewrap sandbox (bench/film.py)",
    "overhead": "Per-task orchestration overhead (bench/overhead.py)",
    "metatool": "The router and its loop on MetaTool's 199 tools (bench/metatool.py)",
    "metatool_cold": "Cold skills on MetaTool (bench/metatool_cold.py)",
    "c5": "C5 on MetaTool (the sweep command)",
    "c5_variants": "C5 fine-tune settings (bench/c5_variants.py)",
    "c5_scale": "C0, C4 and C5 at 4,000 skills, per round and step (bench/c5_scale.py)",
    "attack_study": "A persuaded judge: attack success, collateral (bench/attack_study.py)",
    "bad_input": "Bad input answers (bench/bad_input.py)",
    "noise_study": "Noise study (bench/noise_study.py)",
    "fixture_study": "The fixture study, last round (bench/fixture_study.py)",
    "intervals": "Interval coverage (bench/intervals.py)",
    "analyze_speed": "`mythloop analyze` at MetaTool's size (bench/analyze_speed.py)",
    "film_quality": "Film quality: the two replay films (bench/film_quality.py)",
}
ORDER = tuple(TITLES)
NARRATIVE = ("docs/performance.md (the film's speed, the sweep's profile), docs/blend.md "
             "(MetaTool, cold skills, C5), docs/statistics.md (the intervals and their "
             "coverage), docs/sandbox.md (the render sandbox)")
MODE = {"temporary_server": "no server running (a temporary one starts)",
        "server_up": "`mythloop server` already up"}
OPS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, "==": operator.eq}
TARGETS = [  # part, figure, target, op, bound
    *[("router", f"sizes.skills={n}.vectorised", f"ranking p50 at {n:,} skills <= {ms} ms", "<=",
       ms) for n, ms in ((80, 1), (10_000, 5), (100_000, 50))],
    ("router", "sizes.skills=10000.speedup", ">= 20x faster than the per-skill loop at 10k",
     ">=", 20),
    ("router", "sizes.skills=100000.memory_ratio", "memory <= 2x the embedding matrix (100k)",
     "<=", 2),
    ("sweep", "headline.wall_with_startup_s", "seed-sized sweep <= 60 s wall incl. Prefect "
     "start-up", "<=", 60),
    ("sweep", "flow_over_plain", "Prefect flow <= 2x the plain loop (after start-up)", "<=", 2),
    ("sweep", "latency.turns_speedup", "latency stand-in: turns >= 5x faster at --concurrency 8 "
     "than 1", ">=", 5),
    ("sweep", "headline.peak_rss_mb", "peak memory <= 1.5 GB", "<=", 1536),
    *[("film", f"modes.{m}.{fig}", f"{what}, {label}", "<=", bound)
      for m, label in MODE.items()
      for fig, what, bound in (("film_over_plain", "film wall <= 0.75x plain manim -ql", 0.75),
                               ("cpu_over_plain", "film CPU <= 1.1x plain manim's", 1.1))],
    ("film", "targets.rerun after a failed scene renders only that scene",
     "rerun after a failed scene renders only that scene", "==", "True"),
    ("metatool", "wall_s", "the sweep at benchmark size <= 600 s wall", "<=", 600),
    ("metatool", "peak_tree_rss_mb", "peak memory <= 1.5 GB", "<=", 1536),
    ("metatool", "rank_ms_c4.p50", "ranking p50, 199 skills, every verdict stored <= 2 ms",
     "<=", 2),
    ("metatool", "heldout.c4.3.hit@1", "C4 last round: dev hit@1 >= 0.70", ">=", 0.70),
    ("metatool", "heldout.c4.3.hit@5", "C4 last round: dev hit@5 >= 0.90", ">=", 0.90),
    ("bad_input", "worst_median_s", "each bad input answered in one line in < 1 s (median)",
     "<", 1.0),
    ("bad_input", "worst_backend_median_s", "an unusable model backend answered in < 2 s "
     "(median)", "<", 2.0),
    ("bad_input", "all_one_line", "every bad input answered in one line", "==", "True"),
]
HEADLINES = [  # part, figure: their last HISTORY_N commits
    *[("film", f"modes.{m}.{fig}") for m in MODE for fig in ("film_over_plain", "cpu_over_plain")],
    ("sweep", "flow_over_plain"),
    ("router", "sizes.skills=10000.vectorised"),
    ("metatool", "heldout.c4.3.hit@1"),
    ("bad_input", "worst_median_s"),
]


def _num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 100 else f"{x:.0f}"


def value(rec: dict) -> str:
    """median (min - max, n=N) unit; a single value; or the record's text."""
    if "text" in rec:
        return rec["text"].replace("|", "/").replace("\n", " ")
    mid = records.central(rec)
    if mid is None:
        return "n/a"
    unit = f" {rec['unit']}" if rec.get("unit") and rec["unit"] != "x" else rec.get("unit", "")
    out = _num(mid) + unit
    sp = records.spread(rec)
    if sp:
        out += f" ({_num(sp[0])} - {_num(sp[1])}" + (f", n={sp[2]})" if sp[2] else ")")
    if rec.get("interval"):
        out += f" [{_num(rec['interval'][0])}, {_num(rec['interval'][1])}]"
    return out


def _load1(load: object) -> str:
    """The 1-minute load average of a record's [1, 5, 15] (or one number)."""
    return "?" if load is None else f"{load[0] if isinstance(load, list) else load:g}"


def where(rec: dict) -> list[str]:
    """commit, date, load (1-minute average before -> after; busy above the cores)."""
    load = f"{_load1(rec.get('load_before'))} -> {_load1(rec.get('load_after'))}"
    if records.busy(rec):
        load += " **busy**"
    return [rec.get("commit") or "?", rec.get("date") or "?", load]


def _key(rec: dict) -> tuple:
    return (rec.get("date") or "", rec["_at"])


def latest(recs: list[dict]) -> dict[tuple[str, str], dict]:
    """The latest record of each (part, figure), by date (then file order)."""
    return {(rec["part"], rec["figure"]): rec for rec in sorted(recs, key=_key)}


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def targets(last: dict) -> list[str]:
    out = ["## Targets", "", "The latest figure of each target. Quiet: measured at a load "
           "average below the machine's cores.", "",
           "| part | target | latest | result | commit | date | load | quiet |",
           "|---|---|---|---|---|---|---|---|"]
    for part, figure, what, op, bound in TARGETS:
        rec = last.get((part, figure))
        if rec is None:
            out.append(_row([part, what, "not measured", "n/a", "", "", "", ""]))
            continue
        got = rec.get("text") if isinstance(bound, str) else records.central(rec)
        met = got is not None and OPS[op](got, bound)
        out.append(_row([part, what, value(rec), "met" if met else "**NOT met**", *where(rec),
                         "no" if records.busy(rec) else "yes"]))
    return out


def history(recs: list[dict]) -> list[str]:
    out = ["## History of the headline figures", "",
           f"The last {HISTORY_N} commits each was measured at (the latest record per commit).",
           ""]
    for part, figure in HEADLINES:
        mine = sorted((r for r in recs if (r["part"], r["figure"]) == (part, figure)), key=_key)
        per_commit = {r.get("commit") or "?": r for r in mine}  # the latest record of each
        rows = sorted(per_commit.values(), key=_key)[-HISTORY_N:]
        out += [f"### {part}: {figure}", "", "| value | commit | date | load | run |",
                "|---|---|---|---|---|"]
        out += [_row([value(r), *where(r), r.get("run", "")]) for r in rows] or ["(no records)"]
        out.append("")
    return out


def part_section(part: str, recs: list[dict], last: dict) -> list[str]:
    mine = [r for r in recs if r["part"] == part]
    figures = list(dict.fromkeys(r["figure"] for r in mine))  # first-seen order
    # the latest run's figures first, each run's in the order they were recorded (a stable sort)
    shown = sorted((last[(part, f)] for f in figures), key=lambda r: r.get("date") or "",
                   reverse=True)
    runs = list(dict.fromkeys(r.get("run", "") for r in shown))
    by_run = {r.get("run", ""): r for r in shown}
    out = [f"## {TITLES.get(part, part)}", "", f"The latest record of each figure "
           f"({len(figures)} figures from {len(runs)} run(s); {len(mine)} records in "
           f"bench/records/{part}.jsonl).", "", "Runs shown:", ""]
    for run in runs:
        rec = by_run[run]
        commit, date, load = where(rec)
        out.append(f"- **{run}**: commit {commit}, {date}, load {load}; `{rec.get('command', '')}`"
                   + (f" (from {rec['source']})" if rec.get("source") else ""))
    out += ["", "| figure | value | commit | date | load | run |", "|---|---|---|---|---|---|"]
    out += [_row([f"`{r['figure']}`".replace("|", "/"), value(r), *where(r), r.get("run", "")])
            for r in shown]
    return [*out, ""]


def render(recs: list[dict]) -> str:
    last = latest(recs)
    parts = sorted({r["part"] for r in recs},
                   key=lambda p: (ORDER.index(p) if p in ORDER else len(ORDER), p))
    lines = ["# Benchmark results", "",
             "Generated from the records in `bench/records/` by `python bench/report.py` "
             "(`make bench` measures, appends records, then runs it); do not edit by hand. "
             "Each figure is the median (min - max, n) of its repeated values, or its single "
             "value; with its commit, date and load average (1 minute, before -> after the "
             "measurement). **busy**: a load above the machine's cores at either end, so "
             "the timings are inflated and noisier. `make bench-compare A=... B=...` says "
             f"whether a figure moved beyond its noise. What the figures mean: {NARRATIVE}.",
             "", *targets(last), "", *history(recs)]
    for part in parts:
        lines += part_section(part, recs, last)
    return "\n".join(lines).rstrip("\n") + "\n"


def write(directory: Path = records.RECORDS, page: Path = PAGE) -> None:
    page.write_text(render(records.load(directory)), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=records.RECORDS)
    parser.add_argument("--out", type=Path, default=PAGE)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if not args.records.is_dir():
        print(f"report: no records folder at {args.records}", file=sys.stderr)
        return 2
    if args.check:
        same = args.out.exists() and args.out.read_text(encoding="utf-8") == render(
            records.load(args.records))
        print(f"report: {args.out} {'matches' if same else 'differs from'} the records")
        return 0 if same else 1
    write(args.records, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
