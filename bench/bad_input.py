"""Benchmark: how fast the CLI answers bad input (one line, exit 2, before Prefect starts).

Issue 27's target is an answer in under a second; tests check the answer itself (tests/
test_bad_input.py), not its time, because a shared machine may need longer. Each case runs the
real CLI (`python -m mythloop_app.cli`) in a subprocess; the cases and two baselines (the bare
interpreter, `mythloop --help`) are interleaved round by round, so their ratios are measured
side by side in one run.

    python bench/bad_input.py               # 5 rounds
    python bench/bad_input.py --repeats 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, loadavg, ratio_stats, run_alone, stats  # noqa: E402

CLI = [sys.executable, "-m", "mythloop_app.cli"]
TIMEOUT_S = 120.0  # a case that is not rejected runs on; it is stopped and reported


def cases(workdir: Path) -> dict[str, list[str]]:
    """Name -> argv. The bad inputs of issue 27, plus two baselines. Each bad input is answered
    by exit 2 and one line (`verify`: exit 1, its verdict on the scene)."""
    a_file = workdir / "a-file"
    a_file.write_text("not a folder\n", encoding="utf-8")
    empty = workdir / "empty_scene.py"
    empty.write_text("", encoding="utf-8")
    return {
        "python -c pass (baseline)": [sys.executable, "-c", "pass"],
        "mythloop --help (baseline)": [*CLI, "--help"],
        "sweep --results-dir /proc/nope/x": [*CLI, "sweep", "--rounds", "1",
                                             "--results-dir", "/proc/nope/x"],
        "film --runs-dir <a file>": [*CLI, "film", "the heat equation",
                                     "--runs-dir", str(a_file)],
        "film --backend replay (unrecorded topic)": [*CLI, "film", "the wave equation",
                                                     "--backend", "replay"],
        "serve --cron '99 * * *'": [*CLI, "serve", "--cron", "99 * * *"],
        "serve --timezone Mars/Olympus": [*CLI, "serve", "--timezone", "Mars/Olympus"],
        "verify <a file with no Scene>": [*CLI, "verify", str(empty)],
    }


def _once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                              timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, {"exit": None, "lines": None,
                                          "first_line": f"still running after {TIMEOUT_S:.0f} s"}
    seconds = time.perf_counter() - t0
    lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
    return seconds, {"exit": proc.returncode, "lines": len(lines),
                     "first_line": (lines[0] if lines else "")[:160]}


def run(repeats: int = 5) -> dict:
    load_before = loadavg()
    with tempfile.TemporaryDirectory(prefix="bench-bad-input-") as tmp:
        workdir = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env.update(MYTHLOOP_STATE_DIR=str(workdir / "state"),
                   PREFECT_HOME=str(workdir / "state" / "prefect"))
        argv = cases(workdir)
        seconds: dict[str, list[float]] = {name: [] for name in argv}
        answers: dict[str, dict] = {}
        for _ in range(repeats):
            for name, command in argv.items():
                took, answer = _once(command, env, workdir)
                seconds[name].append(took)
                answers[name] = answer
        started_prefect = sorted(str(p.relative_to(workdir))
                                 for p in (workdir / "state").rglob("*.db"))
    help_s = seconds["mythloop --help (baseline)"]
    rows = {name: {"seconds": stats(values), "over_help": ratio_stats(values, help_s),
                   **answers[name]}
            for name, values in seconds.items()}
    rejected = [name for name in argv if "(baseline)" not in name]
    worst = max(rows[name]["seconds"]["median"] for name in rejected)
    return {"repeats": repeats, "cases": rows, "worst_median_s": worst,
            "all_one_line": all(rows[n]["lines"] == 1 and rows[n]["exit"] == (
                1 if n.startswith("verify") else 2) for n in rejected),
            "databases_left": started_prefect,
            "load_before": load_before, "load_after": loadavg()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with run_alone("bench-bad-input-state-"):
        result = run(args.repeats)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
