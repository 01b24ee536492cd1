"""Benchmark: how fast the CLI answers bad input (one line, exit 2, before Prefect starts).
How it measures: docs/performance.md, "bench/bad_input.py"."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import part_main, ratio_stats, stats

CLI = [sys.executable, "-m", "mythloop_app.cli"]
TIMEOUT_S = 120.0  # a case that is not rejected runs on; it is stopped and reported
BACKEND_CASE = "(no backend)"  # a backend preflight answers these: their target is 2 s (issue 38)


def cases(workdir: Path) -> dict[str, list[str]]:
    """Name -> argv: the bad inputs of issues 27 and 38, three baselines (docs/performance.md)"""
    a_file = workdir / "a-file"
    a_file.write_text("not a folder\n", encoding="utf-8")
    empty = workdir / "empty_scene.py"
    empty.write_text("", encoding="utf-8")
    helpers = workdir / "helpers.py"
    helpers.write_text("def helper():\n    return 1\n", encoding="utf-8")
    big = workdir / "big.yaml"
    with big.open("wb") as fh:  # sparse: 100 MB that take no disk
        fh.truncate(100 * 1024 * 1024)
    binary = workdir / "model.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    unrelated = workdir / "my-notes"
    unrelated.mkdir(exist_ok=True)
    (unrelated / "notes.txt").write_text("mine\n", encoding="utf-8")
    no_path = workdir / "empty-bin"
    no_path.mkdir(exist_ok=True)
    bare = ["env", f"PATH={no_path}", "MYTHLOOP_OPENAI_BASE_URL=http://127.0.0.1:9/v1", *CLI]
    out = {"python -c pass (baseline)": [sys.executable, "-c", "pass"],
           "import typer (baseline)": [sys.executable, "-c", "import typer._adapters"],
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
           # issue 38: range errors, as one line instead of a panel
           **{f"sweep {arg}": [*CLI, "sweep", *arg.split()] for arg in (
               "--rounds 0", "--rounds -3", "--rounds abc", "--replicates 0", "--noise -0.5",
               "--noise 2", "--noise nan", "--concurrency 0")},
           "route --top-k 0": [*CLI, "route", "my regex hangs", "--top-k", "0"],
           "film --max-repairs 99": [*CLI, "film", "the heat equation", "--max-repairs", "99"],
           "history -n 0": [*CLI, "history", "-n", "0"],
           # issue 38: files and folders
           "sweep --prompts <a folder>": [*CLI, "sweep", "--prompts", str(workdir)],
           "sweep --prompts <100 MB file>": [*CLI, "sweep", "--prompts", str(big)],
           "sweep --results-dir <unrelated files>": [*CLI, "sweep", "--results-dir",
                                                     str(unrelated)],
           "tags <a binary file>": [*CLI, "tags", str(binary)],
           "render <a file with no Scene>": [*CLI, "render", str(helpers), "--out",
                                             str(workdir / "render-out")],
           "route <2,001-character query>": [*CLI, "route", "x" * 2001],
           "film <no backend configured>": [*CLI, "film", "the Fourier transform", "--render"]}
    for name in ("claude", "gemini", "codex", "openai"):
        out[f"sweep --judge {name} {BACKEND_CASE}"] = [*bare, "sweep", "--judge", name]
        out[f"film --backend {name} {BACKEND_CASE}"] = [*bare, "film", "the Fourier transform",
                                                        "--backend", name]
    return out


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
        # nothing written: no state folder, no render dir, nothing beside the unrelated file
        written = [name for name in ("state", "render-out") if (workdir / name).exists()]
        written += sorted(f"my-notes/{p.name}" for p in (workdir / "my-notes").iterdir()
                          if p.name != "notes.txt")
    help_s = seconds["mythloop --help (baseline)"]
    rows = {name: {"seconds": stats(values), "over_help": ratio_stats(values, help_s),
                   **answers[name]}
            for name, values in seconds.items()}
    rejected = [name for name in argv if "(baseline)" not in name]
    medians = {name: rows[name]["seconds"]["median"] for name in rejected}
    return {"repeats": repeats, "cases": rows,
            "worst_median_s": max(m for n, m in medians.items() if BACKEND_CASE not in n),
            "worst_backend_median_s": max(m for n, m in medians.items() if BACKEND_CASE in n),
            "written": written,
            "all_one_line": all(rows[n]["lines"] == 1 and rows[n]["exit"] == (
                1 if n.startswith("verify") else 2) for n in rejected),
            "databases_left": started_prefect}


if __name__ == "__main__":  # the harness runs it: python bench/bad_input.py [--set KEY=VALUE]
    part_main("bad_input")
