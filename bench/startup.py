"""How fast the CLI answers bad input (issue 27: one line, exit 2, under a second).
How it measures: docs/performance.md, "bench/startup.py".

    python bench/startup.py [--set repeats=5] [--set before=DIR]
    python -X importtime -m mythloop_app serve --cron '99 * * *'   # where the time goes
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOUND_S = 1.0


def _cases(tmp: Path) -> dict[str, list[str]]:
    (tmp / "a-file").write_text("x", encoding="utf-8")
    (tmp / "empty.py").write_text("", encoding="utf-8")
    return {
        "sweep --results-dir unusable": ["sweep", "--rounds", "1", "--results-dir",
                                         "/proc/nope/x"],
        "film --runs-dir a file": ["film", "the heat equation", "--runs-dir",
                                   str(tmp / "a-file")],
        "film replay, no recording": ["film", "the wave equation", "--backend", "replay",
                                      "--runs-dir", str(tmp / "runs")],
        "serve bad cron": ["serve", "--cron", "99 * * *"],
        "serve bad timezone": ["serve", "--timezone", "Mars/Olympus"],
        "verify, no Scene class": ["verify", str(tmp / "empty.py")],
    }


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int]:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, timeout=120)
    return time.perf_counter() - started, proc.returncode


def run(repeats: int = 5, before: str | None = None) -> dict:
    """The figures: per case and floor, seconds (min/median/max), exit code, ratio, bound;
    with `before`, the cases from that checkout too and each median's after/before ratio."""
    before_dir = Path(before) if before else None
    with tempfile.TemporaryDirectory(prefix="mythloop-startup-") as folder:
        tmp = Path(folder)
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env.update({"MYTHLOOP_STATE_DIR": str(tmp / "state"),
                    "PREFECT_HOME": str(tmp / "state" / "prefect")})
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [
            env.get("PYTHONPATH")])])
        runs = {"floor: python": [sys.executable, "-c", "pass"],
                "floor: import typer": [sys.executable, "-c", "import typer._adapters"],
                **{name: [sys.executable, "-m", "mythloop_app", *args]
                   for name, args in _cases(tmp).items()}}
        envs = dict.fromkeys(runs, env)
        if before_dir is not None:
            old = {**env, "PYTHONPATH": os.pathsep.join([str(before_dir.resolve()),
                                                         env["PYTHONPATH"]]),
                   "MYTHLOOP_DATA_ROOT": env.get("MYTHLOOP_DATA_ROOT", str(REPO)),
                   "MYTHLOOP_STATE_DIR": str(tmp / "state-before"),
                   "PREFECT_HOME": str(tmp / "state-before" / "prefect")}
            for name, args in _cases(tmp).items():
                runs[f"before: {name}"] = [sys.executable, "-m", "mythloop_app", *args]
                envs[f"before: {name}"] = old
        times: dict[str, list[float]] = {name: [] for name in runs}
        codes: dict[str, set[int]] = {name: set() for name in runs}
        for _ in range(repeats):  # round-robin, so a burst of load hits every case alike
            for name, argv in runs.items():
                seconds, code = _timed(argv, envs[name], tmp)
                times[name].append(seconds)
                codes[name].add(code)
        state_left = (tmp / "state").exists()
    floor = statistics.median(times["floor: import typer"])
    figures = {"repeats": repeats, "bound_s": BOUND_S,
               "state_folder_written": state_left, "cases": {}}
    for name, values in times.items():
        median = statistics.median(values)
        figures["cases"][name] = {
            "min_s": round(min(values), 3), "median_s": round(median, 3),
            "max_s": round(max(values), 3), "exit_codes": sorted(codes[name]),
            "median_over_typer_floor": round(median / floor, 2),
            "under_bound": max(values) < BOUND_S}
    for name, row in figures["cases"].items():
        old = figures["cases"].get(f"before: {name}")
        if old:
            row["median_over_before"] = round(row["median_s"] / old["median_s"], 2)
    return figures


if __name__ == "__main__":  # the harness runs it: python bench/startup.py [--set KEY=VALUE]
    from common import part_main

    sys.exit(part_main("startup"))
