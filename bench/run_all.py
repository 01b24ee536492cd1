"""The bench harness: each part in a child process under a clean, measured environment, its
records appended, then the page regenerated (docs/performance.md, "How each part measures")."""

import argparse
import contextlib
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import common
import records
import report

from mythloop.fileio import write_json_atomic

DEFAULT_PARTS = ("router", "sweep", "film", "overhead", "metatool", "bad_input", "c5_scale")
PARTS = (*DEFAULT_PARTS, "scale", "intervals", "noise_study", "analyze_speed", "metatool_cold",
         "metatool_ceiling", "metatool_replica", "pool_traps", "fixture_study", "film_quality",
         "c5_variants", "attack_study")
QUICK_DIR = common.REPO / ".mythloop" / "bench" / "quick"
TIMEOUT_S = {"router": 300, "scale": 1500, "sweep": 600, "film": 2400, "overhead": 240,
             "metatool": 1800, "bad_input": 600, "c5_scale": 1800}
QUICK = {
    "router": {"sizes": (80, 1_000), "n_reasons": 1_000, "embed": True},
    "scale": {"tasks": 100, "burst_timeout": 60.0, "sweep": False},
    "sweep": {"repeats": 1, "rounds": 1, "cli_repeats": 0, "latency_delay_s": 0.5},
    "film": {"repeats": 1, "rerun": False, "modes": ("temporary_server",), "probe": False,
             "uncached": False, "quiet_wait_s": 0.0},
    "overhead": {"n": 20, "repeats": 1, "breakdown_n": 10},
    "metatool": {"rounds": 1, "conditions": ["c0"], "plot": False},
    "bad_input": {"repeats": 1}, "c5_scale": {"skills": 400},
    "intervals": {"sims": 20},
}


def run_part(name: str, kwargs: dict) -> dict:
    """Run one part in this process (the child); its figures."""
    common.repo_on_path()
    module = __import__(name)
    for key in ("sizes", "modes", "seeds"):  # JSON gives lists where the parts take tuples
        if isinstance(kwargs.get(key), list):
            kwargs = {**kwargs, key: tuple(kwargs[key])}
    return {"figures": module.run(**kwargs)}


def _child(name: str, kwargs: dict, env: dict, workdir: Path, factor: float = 1.0) -> dict:
    """One part in a child process under a CPU meter, killed at its time limit."""
    out = workdir / f"{name}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--part", name,
           "--kwargs", json.dumps(kwargs), "--json", str(out)]
    load_before, limit = common.loadavg(), TIMEOUT_S.get(name, 3600) * factor
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    with common.CpuMeter(name) as meter:
        child = common.run_child(cmd, env=env, cwd=common.REPO, timeout=limit,
                                 log=workdir / f"{name}.log", meter=meter)
    result = json.loads(out.read_text()) if out.exists() else {}
    harness = {k: child[k] for k in ("wall_s", "cpu_s", "peak_tree_rss_mb", "cpu_method")}
    result.update({"harness": harness,
                   "load_before": load_before, "load_after": common.loadavg(), "started": started})
    if child["timed_out"]:
        result["error"] = f"ran past its {limit:.0f} s limit and was stopped"
    elif child["returncode"] != 0 or "figures" not in result:
        result["error"] = f"exit code {child['returncode']}: {child['tail'][-1200:]}"
    return result


def check(name: str, kwargs: dict) -> None:
    """Refuse in one line a keyword the part's run() does not take, or what its check() refuses."""
    common.repo_on_path()
    module = __import__(name)
    params = inspect.signature(module.run).parameters
    unknown = [k for k in kwargs if k not in params]
    if unknown:
        raise SystemExit(f"run_all: {name} takes no {unknown[0]!r}; --set takes one of: "
                         f"{', '.join(params) or 'nothing'}")
    if hasattr(module, "check"):
        module.check(**kwargs)


def _value(text: str) -> object:  # a --set VALUE: JSON, else the text itself
    with contextlib.suppress(json.JSONDecodeError):
        return json.loads(text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="minimal sizes (a smoke run)")
    parser.add_argument("--only", nargs="+", choices=PARTS, help="run only these parts")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a keyword of the parts' run() (VALUE read as JSON, else text)")
    parser.add_argument("--quiet-wait", type=float, default=None, help="seconds to wait for "
                        "the load to fall below the cores before each part (default 300; "
                        "--quick 0)")
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
    bad = [s for s in args.set if "=" not in s]
    if bad:
        parser.error(f"--set takes KEY=VALUE, not {bad[0]!r}")
    extra = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    parts = [p for p in PARTS if p in (args.only or DEFAULT_PARTS)]
    kwargs = {name: {**(QUICK.get(name, {}) if args.quick else {}), **extra} for name in parts}
    for name in parts:  # bad keywords are refused before anything runs or is written
        check(name, kwargs[name])

    state = common.REPO / ".mythloop" / "bench"
    state.mkdir(parents=True, exist_ok=True)
    prefect_home = Path(tempfile.mkdtemp(prefix="mythloop-bench-prefect-"))
    env = {**common.bench_env(state), "PREFECT_HOME": str(prefect_home)}
    cores = len(os.sched_getaffinity(0))
    quiet_wait = args.quiet_wait if args.quiet_wait is not None else (0 if args.quick else 300)
    machine = common.machine_info()
    started = time.perf_counter()
    results: dict[str, dict] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="mythloop-bench-") as tmp:
            for name in parts:
                if quiet_wait:
                    common.wait_for_quiet(cores, quiet_wait)
                print(f"[bench] {name} ...", flush=True)
                results[name] = r = _child(name, kwargs[name], env, Path(tmp),
                                           args.timeout_factor)
                status = r.get("error") or "done"
                print(f"[bench] {name}: {status.splitlines()[0] if status else ''} "
                      f"({r['harness']['wall_s']:.0f} s, load {r['load_after'][0]})", flush=True)
    finally:
        shutil.rmtree(prefect_home, ignore_errors=True)
    directory = args.records or (QUICK_DIR / "records" if args.quick else records.RECORDS)
    page = args.out or (QUICK_DIR / "RESULTS.md" if args.quick else report.PAGE)
    records.append(to_records(results, machine, kwargs, args.quick), directory)
    report.write(directory, page)
    print(f"[bench] {(time.perf_counter() - started) / 60:.1f} min; records: {directory}; "
          f"page: {page}")
    return 0 if not any("error" in r for r in results.values()) else 1


def to_records(results: dict, machine: dict, kwargs: dict, quick: bool) -> list[dict]:
    """Each measured part's figures as records (a failed part: none)."""
    out = []
    for name, part in results.items():
        if "figures" not in part:
            continue
        command = (f"python bench/run_all.py --only {name}" + (" --quick" if quick else "")
                   + "".join(f" --set {k}={json.dumps(v)}" for k, v in kwargs[name].items()))
        prov = records.provenance(name, {**machine, "date_utc": part["started"]},
                                  part["load_before"], part["load_after"], command, quick)
        figures = {**part["figures"], "harness": part["harness"]}
        out += [{**prov, **body} for body in records.flatten(figures)]
    return out


if __name__ == "__main__":
    sys.exit(main())
