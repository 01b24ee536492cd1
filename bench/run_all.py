"""`make bench`: run every benchmark, each in its own process; append its records to
bench/records/ and regenerate bench/RESULTS.md from them (bench/report.py).

Parts: router, sweep, film, overhead, metatool (MetaTool's 199 tools from
/work/shared/benchmarks, ~10 min), bad_input (~1 min); and scale (the PostgreSQL stack,
workers and a 1000-task burst, ~6 min), which runs only when asked for (`--with-scale`,
`--only scale`, `make bench-scale`). Each part runs in a child process (its CPU, peak memory
and load before and after measured by bench/common.py's run_child) with a shared bench state
folder (.mythloop/bench: the embedding cache survives between runs) and a fresh Prefect home
per run. A part that fails or runs out of time is reported here and writes no record; the
others still run. A part not run keeps its latest records on the page.

    python bench/run_all.py                     # router, sweep, film, overhead, metatool, bad_input
    python bench/run_all.py --with-scale        # and the scale part
    python bench/run_all.py --quick             # minimal sizes, a smoke run (records kept apart)
    python bench/run_all.py --only sweep film   # some parts
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import records  # noqa: E402
import report  # noqa: E402
from common import (  # noqa: E402
    REPO,
    bench_env,
    loadavg,
    machine_info,
    peak_rss_mb,
    repo_on_path,
    run_child,
    write_json_atomic,
)

PARTS = ("router", "scale", "sweep", "film", "overhead", "metatool", "bad_input")
DEFAULT_PARTS = ("router", "sweep", "film", "overhead", "metatool", "bad_input")
QUICK_DIR = REPO / ".mythloop" / "bench" / "quick"
TIMEOUT_S = {"router": 300, "scale": 1500, "sweep": 600, "film": 2400, "overhead": 240,
             "metatool": 1800, "bad_input": 600}
FULL = {
    "router": {},
    "scale": {"tasks": 1000, "burst_timeout": 300.0},
    "sweep": {"repeats": 3, "rounds": 6, "cli_repeats": 1},
    "film": {"repeats": 3, "rerun": True},
    "overhead": {"n": 200, "repeats": 3},
    "metatool": {"rounds": 4},
    "bad_input": {"repeats": 5},
}
QUICK = {
    "router": {"sizes": (80, 1_000), "n_reasons": 1_000, "embed": True},
    "scale": {"tasks": 100, "burst_timeout": 60.0, "sweep": False},
    "sweep": {"repeats": 1, "rounds": 1, "cli_repeats": 0, "latency_delay_s": 0.5},
    "film": {"repeats": 1, "rerun": False, "modes": ("temporary_server",), "probe": False,
             "uncached": False, "quiet_wait_s": 0.0},
    "overhead": {"n": 20, "repeats": 1, "breakdown_n": 10},
    "metatool": {"rounds": 1, "conditions": ["c0"], "plot": False},
    "bad_input": {"repeats": 1},
}


def run_part(name: str, kwargs: dict) -> dict:
    """Run one part in this process; its figures plus wall time and peak RSS."""
    repo_on_path()
    if name == "scale" and not (REPO / "bench" / "scale.py").exists():
        return {"absent": "bench/scale.py is not in this checkout"}
    module = __import__(name)
    if name == "router" and "sizes" in kwargs:
        kwargs = {**kwargs, "sizes": tuple(kwargs["sizes"])}
    t0 = time.perf_counter()
    figures = module.run(**kwargs)
    return {"figures": figures, "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": peak_rss_mb()}


def _child(name: str, kwargs: dict, env: dict, workdir: Path, factor: float = 1.0) -> dict:
    """One part in a child process, killed at its time limit."""
    out = workdir / f"{name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name,
           "--kwargs", json.dumps(kwargs), "--json", str(out)]
    load_before = loadavg()
    limit = TIMEOUT_S[name] * factor
    child = run_child(cmd, env=env, cwd=REPO, timeout=limit,
                      log=workdir / f"{name}.log")
    result = json.loads(out.read_text()) if out.exists() else {}
    result.update({"child_wall_s": child["wall_s"], "peak_tree_rss_mb": child["peak_tree_rss_mb"],
                   "load_before": load_before, "load_after": loadavg()})
    if child["timed_out"]:
        result["error"] = f"ran past its {limit:.0f} s limit and was stopped"
    elif child["returncode"] != 0 or "figures" not in result and "absent" not in result:
        result["error"] = f"exit code {child['returncode']}: {child['tail'][-1200:]}"
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="minimal sizes (a smoke run)")
    parser.add_argument("--only", nargs="+", choices=PARTS, help="run only these parts")
    parser.add_argument("--with-scale", action="store_true",
                        help="also run the scale part (PostgreSQL, workers; ~6 more minutes)")
    parser.add_argument("--timeout-factor", type=float, default=1.0,
                        help="multiply each part's time limit (a busy machine needs more)")
    parser.add_argument("--records", type=Path, help="records folder (default bench/records; "
                        "with --quick, .mythloop/bench/quick/records)")
    parser.add_argument("--out", type=Path, help="the page (default bench/RESULTS.md; with "
                        "--quick, .mythloop/bench/quick/RESULTS.md)")
    parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)
    parser.add_argument("--kwargs", default="{}", help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part:  # child mode
        write_json_atomic(args.json, run_part(args.part, json.loads(args.kwargs)))
        return 0

    state = REPO / ".mythloop" / "bench"
    state.mkdir(parents=True, exist_ok=True)
    prefect_home = Path(tempfile.mkdtemp(prefix="mythloop-bench-prefect-"))
    env = bench_env(state)
    env["PREFECT_HOME"] = str(prefect_home)
    sizes = QUICK if args.quick else FULL
    wanted = args.only or [*DEFAULT_PARTS, *(["scale"] if args.with_scale else [])]
    parts = [p for p in PARTS if p in wanted]
    machine = machine_info()
    started = time.perf_counter()
    results: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="mythloop-bench-") as tmp:
            for name in parts:
                print(f"[bench] {name} ...", flush=True)
                results[name] = _child(name, sizes[name], env, Path(tmp), args.timeout_factor)
                status = results[name].get("error") or results[name].get("absent") or "done"
                print(f"[bench] {name}: {status.splitlines()[0] if status else ''} "
                      f"({results[name]['child_wall_s']:.0f} s, load "
                      f"{results[name]['load_after'][0]})", flush=True)
    finally:
        shutil.rmtree(prefect_home, ignore_errors=True)
    total = time.perf_counter() - started
    directory = args.records or (QUICK_DIR / "records" if args.quick else records.RECORDS)
    page = args.out or (QUICK_DIR / "RESULTS.md" if args.quick else report.PAGE)
    records.append(to_records(results, machine, sizes, args.quick), directory)
    report.write(directory, page)
    print(f"[bench] {total / 60:.1f} min; records: {directory}; page: {page}")
    return 0 if not any("error" in r for r in results.values()) else 1


def to_records(results: dict, machine: dict, sizes: dict, quick: bool) -> list[dict]:
    """Each measured part's figures as records (a failed or absent part: none)."""
    out = []
    for name, part in results.items():
        if "figures" not in part:
            continue
        figures = {**part["figures"], "part_wall_s": part["child_wall_s"],
                   "peak_tree_rss_mb": part["peak_tree_rss_mb"]}
        command = (f"python bench/run_all.py --only {name}" + (" --quick" if quick else "")
                   + f"  # {json.dumps(sizes[name])}")
        prov = records.provenance(name, machine, part["load_before"], part["load_after"],
                                  command, quick)
        out += [{**prov, **body} for body in records.flatten(figures)]
    return out


if __name__ == "__main__":
    sys.exit(main())
