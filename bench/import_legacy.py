"""One-off: carry the figures of bench/RESULTS.md and bench/*.json (as of de361db, read from
that commit) over into bench/records/ as records, with the commit, date and load each was
measured at.

The JSON files are flattened as `bench/run_all.py` flattens a part's figures now; the tables
of the hand-kept sections of RESULTS.md are read cell by cell. Each record's `source` names
the file (and section, table) it came from.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import records  # noqa: E402

BENCH = Path(__file__).resolve().parent
FROM = "de361db"
MACHINE = {"cpu": "AMD EPYC", "cores": 2, "memory_gb": 23.5, "os": "Linux (x86_64, glibc 2.36)",
           "python": "3.11.7"}
PACKAGES = {"prefect": "3.9.1", "manim": "0.22.0", "torch": "2.13.0+cpu",
            "sentence-transformers": "6.3.0", "numpy": "2.4.6", "pydantic": "2.14.4"}
MODES = {"no server running (a temporary one starts)": "temporary_server",
         "`mythloop server` already up": "server_up"}
MODE_COLS = {"film": "film_s", "plain": "plain_manim_s", "film / plain": "film_over_plain",
             "film CPU": "film_cpu_s", "plain CPU": "plain_cpu_s", "CPU ratio": "cpu_over_plain"}
UNCACHED_COLS = {"plain --disable_caching": "uncached_reference.plain_uncached_s",
                 "film / that": "uncached_reference.film_over_plain_uncached",
                 "its CPU": "uncached_reference.plain_uncached_cpu_s",
                 "CPU ratio": "uncached_reference.cpu_over_plain_uncached"}
ROWS = {  # the film's tables whose columns are its modes: row -> bench/film.py's name
    "part": ("breakdown_median.{mode}.", {
        "before the flow": "before_flow_s", "six stages and codegen": "stages_and_codegen_s",
        "scene phase": "scene_phase_s", "scene renders, summed": "render_sum_s",
        "renders' overlap": "overlap", "the failed first render": "failed_render_s",
        "its repair": "repair_s", "scene 1 rendered again": "after_repair_render_s",
        "scenes waiting for a free worker": "worker_wait_s", "static checks": "verify_s",
        "stitch": "stitch_s", "subtitles and voice": "subtitles_and_voice_s",
        "flow end after its last task": "flow_end_s", "after the flow": "after_flow_s"}),
    "": ("modes.{mode}.", {
        "the film without --render, CPU": "floor.no_render_film_cpu_s",
        "the film without --render, wall": "floor.no_render_film_s",
        "one import manim, CPU": "floor.import_manim_cpu_s",
        "of the film without --render: importing": "floor.import_prefect_server_cpu_s",
        "plain + those two": "floor.least_film_cpu_s",
        "its ratio to plain manim's CPU": "floor.least_cpu_ratio",
        "the film's CPU beyond that": "floor.render_side_extra_cpu_s",
        "the renders' own extra": "cpu_split.renders_extra_cpu_s",
        "the failed render of scene 1": "cpu_split.failed_render_cpu_s",
        "the warm workers' start-up": "cpu_split.worker_startup_beyond_two_imports_cpu_s",
        "each render, one at a time": "cpu_split.per_render_beyond_plain_cpu_s",
        "of that, the layout probe": "cpu_split.probe_cpu_s",
        "two renders at once": "cpu_split.two_at_once_cpu_s",
        "the rest:": "cpu_split.rest_cpu_s",
        "for reference: the film's good renders": "cpu_split.film_ok_renders_cpu_s",
        "for reference: the same scenes one at a time": "cpu_split.one_at_a_time_cpu_s",
        "for reference: plain manim's CPU less": "cpu_split.plain_scenes_cpu_s"}),
}


def at_from(name: str) -> str:
    """bench/NAME as of FROM."""
    return subprocess.run(["git", "show", f"{FROM}:bench/{name}"], capture_output=True,
                          text=True, check=True).stdout


def commit_before(date: str) -> str:
    return subprocess.run(["git", "log", "-1", "--format=%h", f"--before={date}"],
                          capture_output=True, text=True, check=True).stdout.strip()


def rec(part: str, body: dict, **prov) -> dict:
    return {"part": part, **body, "machine": MACHINE, "packages": PACKAGES, "cores": 2, **prov}


# -- the JSON files --------------------------------------------------------------------------

def from_json() -> list[dict]:
    out = []
    res = json.loads(at_from("results.json"))
    for name, part in res["parts"].items():
        if name == "scale":
            continue
        date = part.get("from_run") or "2026-12-03 23:00 UTC"
        m = re.search(r"commit ([0-9a-f]{7})", date)
        date = date[:16] + " UTC"
        commit = m.group(1) if m else commit_before(date.replace(" UTC", ":00 +0000"))
        prov = {"commit": commit, "date": date,
                "load_before": part.get("load_before"), "load_after": part.get("load_after"),
                "command": f"python bench/run_all.py (part {name})", "run": f"{name} {commit}",
                "source": f"bench/results.json at {FROM}, parts.{name}"
                          + ("" if m or part.get("from_run") is None else
                             "; commit: the last before the run's date")}
        if name == "metatool":
            prov["source"] += "; commit: the last before the run's date"
        out += [rec(name, b, **prov) for b in records.flatten(part["figures"])]
    scale = json.loads(at_from("scale.json"))
    out += [rec("scale", b, commit=scale["machine"]["git"], date="2026-12-02 15:28 UTC",
                load_before=scale["machine"]["loadavg"], load_after=None,
                command="python bench/run_all.py --only scale", run="scale 74467d4",
                source=f"bench/scale.json at {FROM}")
            for b in records.flatten({k: v for k, v in scale.items() if k != "machine"})]
    noise = json.loads(at_from("noise_study.json"))
    out += [rec("noise_study", b, commit=noise["commit"], date="2026-12-05 17:08 UTC",
                load_before=noise["load_start"], load_after=noise["load_end"],
                command=noise["command"], run="noise_study " + noise["commit"],
                source=f"bench/noise_study.json at {FROM}")
            for b in records.flatten({"wall_s": noise["wall_s"], "levels": noise["levels"],
                                      "conclusion": noise["conclusion"][:160]})]
    iv = json.loads(at_from("intervals.json"))
    out += [rec("intervals", b, commit=iv["commit"], date="2026-12-04 19:36 UTC",
                load_before=iv["load_start"], load_after=iv["load_end"],
                command="python bench/intervals.py", run="intervals " + iv["commit"],
                source=f"bench/intervals.json at {FROM}")
            for b in records.flatten({k: v for k, v in iv.items()
                                      if k not in ("commit", "started_utc")})]
    an = json.loads(at_from("analyze_speed.json"))
    runs = {side: {"analyze_cpu_s": [r["analyze_cpu_s"] for r in rs],
                   "wall_s": [r["wall_s"] for r in rs],
                   "peak_rss_mb": [r["peak_rss_mb"] for r in rs]}
            for side, rs in an["runs"].items()}
    out += [rec("analyze_speed", b, commit=an["commit"], date="2026-12-04 19:43 UTC",
                load_before=an["load_start"], load_after=an["load_end"],
                command=f"python bench/analyze_speed.py --base {an['base']}",
                run="analyze_speed " + an["commit"],
                source=f"bench/analyze_speed.json at {FROM}; date: its first commit")
            for b in records.flatten({"runs": runs, "best_cpu_s": an["best_cpu_s"],
                                      "ratio_this_over_base": an["ratio_this_over_base"],
                                      "metrics_json_mb": an["metrics_json_mb"],
                                      "size": an["size"]})]
    cold = json.loads(at_from("metatool_cold.json"))
    for shape, sweep in cold["sweeps"].items():
        label = shape.split(" (")[0]
        for run in sweep["runs"]:
            lo, hi = (float(x) for x in run["load"].split(" - "))
            rounds = {c: v for c, v in sweep["rounds"].items()
                      if any(c.lower().startswith(k) for k in run["conds"])}
            out += [rec("metatool_cold", {**b, "figure": f"{label}.{b['figure']}"},
                        commit=run["commit"], date="2026-12-04 19:48 UTC", load_before=lo,
                        load_after=hi, command=run["command"],
                        run=f"metatool_cold {label} {run['commit']}",
                        source=f"bench/metatool_cold.json at {FROM}; date: its first commit")
                    for b in records.flatten({"wall_s": run["wall_s"], "rounds": rounds})]
    out += [rec("metatool_cold", {**b, "figure": "replica." + b["figure"]}, commit="7a0088e",
                date="2026-12-04 19:48 UTC", load_before=None, load_after=None,
                command="python bench/metatool_cold.py --replica", run="metatool_cold replica",
                source=f"bench/metatool_cold.json at {FROM}, replica")
            for b in records.flatten(cold["replica"])]
    c5 = json.loads(at_from("c5_variants.json"))
    for i, run in enumerate(c5["runs"], 1):
        rows = {", ".join(f"{k}={v:g}" for k, v in r["changed"].items()): r for r in run["rows"]}
        out += [rec("c5_variants", b, commit=run["commit"], date="2026-12-05 16:36 UTC",
                    load_before=run["load_start"], load_after=run["load_end"],
                    command="python bench/c5_variants.py --pairs PAIRS --sweep-json SWEEP",
                    run=f"c5_variants run {i}",
                    source=f"bench/c5_variants.json at {FROM}, run {i}: {run['note'][:120]}")
                for b in records.flatten({"base": run["base"], "variants": rows})]
    return out


# -- the hand-kept tables of RESULTS.md ------------------------------------------------------

NOTE = ("commit: the last before the date the section gives; date: that day as given, "
        "the hour the commit's")
FILM = "Film: scene-parallel replay film vs plain manim (bench/film.py)"
FILM_C = dict(part="film", commit="0d1cdeb", command="python bench/film.py --repeats 3 --no-rerun")
PROV = {  # (section path, table index) -> where and when; None: read from a JSON file instead
    (FILM, "Run C"): {**FILM_C, "date": "2026-12-06 05:33 UTC", "run": "film run C",
                      "load_before": [1.18, 0.79, 0.88], "load_after": [1.25, 1.11, 1.03]},
    (FILM, "Run D (no server only, `--no-probe`)"): {
        **FILM_C, "date": "2026-12-06 06:15 UTC", "run": "film run D",
        "command": FILM_C["command"] + " --no-probe --modes temporary_server",
        "load_before": [0.0, 0.0, 0.13], "load_after": [0.96, 0.7, 0.41]},
    (FILM, "At 8a9cb3e: runs A and B", "Run A"): {
        **FILM_C, "commit": "8a9cb3e", "date": "2026-12-06 03:41 UTC", "run": "film run A",
        "load_before": [0.18, 0.61, 0.86], "load_after": [1.26, 1.09, 1.03]},
    (FILM, "At 8a9cb3e: runs A and B", "Run B (`--no-probe`)"): {
        **FILM_C, "commit": "8a9cb3e", "date": "2026-12-06 03:56 UTC", "run": "film run B",
        "command": FILM_C["command"] + " --no-probe",
        "load_before": [0.28, 0.81, 0.93], "load_after": [0.94, 1.01, 1.0]},
    (FILM, "Earlier figures (the film called in-process, server up)"): {
        **FILM_C, "commit": "3468ce6", "date": "2026-12-03 17:09 UTC", "run": "film in-process",
        "command": "python bench/film.py", "load_before": [11.03, 10.83, 9.49],
        "load_after": [9.08, 11.18, 11.72]},
    (FILM, "The bubblewrap sandbox (issue 36): render start-up before and after"): {
        "part": "sandbox", "commit": "afebbea", "date": "2026-12-04 19:15 UTC",
        "run": "sandbox before/after", "load_before": 6.48, "load_after": 8.2,
        "command": "bench/film.py startup_and_latex, 4 runs alternating ee324ff and afebbea"},
    ("The router and its loop on MetaTool's 199 tools (bench/metatool.py)",
     "Re-measured after cold skills (#40) and the prompt-level intervals (#37)"): {
        "part": "metatool", "commit": "039abcf", "date": "2026-12-04 20:20 UTC",
        "run": "metatool 039abcf", "load_before": [1.44, 2.39, 4.42],
        "load_after": [2.48, 3.01, 4.04], "command": "python bench/metatool.py '{\"plot\": false}'"},
    ("The router and its loop on MetaTool's 199 tools (bench/metatool.py)",
     "Side by side on dev (hit@1 / hit@5 / MRR)"): {
        "part": "metatool", "commit": "07eb1ee", "date": "2026-12-04 20:20 UTC",
        "run": "metatool side by side", "load_before": None, "load_after": None,
        "command": "bench/metatool.py and the runs the row names; published rows from the paper"},
    ("C5 on MetaTool (issue 41)", 0): {
        "part": "c5", "commit": "94b3368", "date": "2026-12-05 16:57 UTC", "run": "c5 94b3368",
        "load_before": 1.4, "load_after": 2.0, "command": "mythloop sweep --pool .../metatool/pool "
        "--prompts .../train.json --held-out .../dev.json --judge simulated --noise 0.2 "
        "--conditions c0 c4 c5 --rounds 4 --replicates 1"},
    ("C5 on MetaTool (issue 41)", 1): {
        "part": "c5", "commit": "62c2ffa", "date": "2026-12-04 22:20 UTC", "run": "c5 62c2ffa",
        "load_before": 3.2, "load_after": 8.9, "command": "mythloop sweep ... --conditions c5 "
        "--rounds 4 --replicates 1 (lr 2e-5)"},
    ("C5 on MetaTool (issue 41)", 2): {
        "part": "c5", "commit": "4b87ed8", "date": "2026-12-05 14:00 UTC", "run": "c5 cold 4b87ed8",
        "load_before": None, "load_after": None, "command": "mythloop sweep ... --conditions c5 "
        "--rounds 4 --replicates 1 --cold-skills 0.2 (a full test-suite run beside it)"},
    ("Findings", "Concurrent learning turns: the CLI check (recorded 2026-12-03 on this machine, "
     "busy)"): {"part": "sweep", "commit": commit_before("2026-12-03 10:00 +0000"),
                "date": "2026-12-03 10:00 UTC", "run": "sweep concurrency CLI check",
                "load_before": None, "load_after": None, "note": NOTE,
                "command": "mythloop sweep --judge gemini --conditions c3 --rounds 2 "
                           "--replicates 1 --concurrency N (fake gemini, 3 s per answer)"},
    ("Film quality: the two replay films (bench/film_quality.py)",): {
        "part": "film_quality", "commit": commit_before("2026-12-03 20:00 +0000"),
        "date": "2026-12-03 20:00 UTC", "run": "film quality", "load_before": 6.0, "note": NOTE,
        "load_after": 13.0, "command": "python bench/film_quality.py <run dir>..."},
}
NUM = re.compile(r"^\*{0,2}([-+]?\d[\d,]*\.?\d*)\s*(ms|s|x|MB|GB|%)?\*{0,2}"
                 r"(?:\s*\(([-+]?[\d.]+)\s*-\s*([-+]?[\d.]+)(?:,\s*n=(\d+))?\))?"
                 r"(?:\s*\[([-+]?[\d.]+),\s*([-+]?[\d.]+)\])?$")


def cell(text: str) -> dict:
    text = text.strip()
    m = NUM.match(text)
    if not m:
        return {"unit": "", "text": text} if text and text not in ("—", "-", "n/a") else {}
    value = float(m.group(1).replace(",", ""))
    body = {"unit": m.group(2) or ""}
    if m.group(3):
        body["summary"] = {"median": value, "min": float(m.group(3)), "max": float(m.group(4)),
                           "n": int(m.group(5)) if m.group(5) else None}
    else:
        body["values"] = [value]
    if m.group(6):
        body["interval"] = [float(m.group(6)), float(m.group(7))]
    return body


def tables(md: str):
    """(section path, index in section, header, rows) for each table of the page."""
    path: list[str] = []
    index, table = 0, None
    for line in [*md.splitlines(), ""]:
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            path = [*path[:level - 2], line.lstrip("# ").strip()] if level >= 2 else []
            index = 0
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            if table is None:
                table = (cells, [])
            elif not set(line) <= set("|-: "):
                table[1].append(cells)
        elif table is not None:
            yield tuple(path), index, table[0], table[1]
            index, table = index + 1, None


def provenance(path: tuple, index: int) -> dict | None:
    for n in range(len(path), 0, -1):
        for key in ((*path[:n], index), path[:n]):
            if key in PROV:
                return PROV[key]
    return None


def from_markdown() -> list[dict]:
    out = []
    md = at_from("RESULTS.md")
    for path, index, header, rows in tables(md):
        prov = provenance(path, index)
        if prov is None:
            continue
        prov = dict(prov)
        part = prov.pop("part")
        source = f"bench/RESULTS.md at {FROM}: {' > '.join(path)}, table {index + 1}"
        if prov.get("note"):
            source += "; " + prov.pop("note")
        cols = (UNCACHED_COLS if header[1] == "plain --disable_caching" else MODE_COLS) \
            if part == "film" and header[0] == "mode" else {}
        for row in rows:
            label = row[0]
            for col, text in zip(header[1:], row[1:], strict=False):
                body = cell(text)
                if not body:
                    continue
                rows_map = ROWS.get(header[0]) if part == "film" and path[-1].startswith(
                    "Run ") else None
                row_key = next((v for k, v in rows_map[1].items() if label.startswith(k)),
                               None) if rows_map and col in MODES else None
                if label in MODES and col.split(" (")[0] in cols:
                    figure = f"modes.{MODES[label]}.{cols[col.split(' (')[0]]}"
                elif row_key:
                    figure = rows_map[0].format(mode=MODES[col]) + row_key
                else:
                    figure = (f"{header[0] or 'figure'}: {label} / {col}"
                              if header[0] else f"{label} / {col}")
                    figure = f"{index + 1}. {figure}"
                if figure.startswith(("modes.", "breakdown_median.")) and not body["unit"]:
                    body["unit"] = records.unit_of(figure.split("."))
                rc = dict(prov)
                if path[-1].startswith("Side by side"):
                    m = re.search(r"commit ([0-9a-f]{7})", label)
                    rc["commit"] = ("published" if "published" in label else "94b3368"
                                    if label.startswith("C5") else m.group(1) if m else "07eb1ee")
                out.append(rec(part, {"figure": figure, **body}, **rc, source=source))
    return out


def main() -> int:
    out = from_json() + from_markdown()
    target = BENCH / "records"
    if any(target.glob("*.jsonl")):
        print("import_legacy: bench/records/ already holds records; nothing done",
              file=sys.stderr)
        return 1
    records.append(out, target)
    print(f"{len(out)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
