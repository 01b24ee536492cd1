"""The noise study's wall time (issue: `mythloop sweep --judge simulated --noise 0 0.2 0.4
--conditions c0 c3 c4 --replicates 3 --rounds 4`, --conditions to add c5), recorded into
records appended to bench/records/noise_study.jsonl (bench/RESULTS.md regenerated).

    python bench/noise_study.py --results-dir /tmp/noise      # run the command, time it, record
    python bench/noise_study.py --results-dir D --wall-s 1234 --load-start 3.1 --load-end 2.9 \
        --load-mean 8.2 --started-utc ...                      # record a run timed elsewhere

Not part of `make bench` (4-16 minutes on 2 shared cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARGS = ["--judge", "simulated", "--noise", "0", "0.2", "0.4", "--conditions", "c0", "c3", "c4",
        "--replicates", "3", "--rounds", "4"]
FOCUS = ("trap.trap_win_rate", "in_distribution.hit@5")


def _git() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _run(results_dir: Path) -> dict:
    """Run the command in a fresh process, sampling the load average every 10 s."""
    samples: list[float] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(10):
            samples.append(os.getloadavg()[0])

    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_start = os.getloadavg()[0]
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "sweep", *ARGS,
                           "--results-dir", str(results_dir)], cwd=REPO)
    wall = time.perf_counter() - t0
    done.set()
    if proc.returncode:
        sys.exit(f"the sweep exited {proc.returncode}")
    return {"started_utc": started, "wall_s": wall, "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "load_mean": sum(samples) / len(samples) if samples else None}


def figures(results_dir: Path) -> dict:
    """Per level, C3 - C0 and C4 - C0 and each condition's mean, for the focus metrics."""
    study = json.loads((results_dir / "metrics.json").read_text(encoding="utf-8"))
    levels = {}
    for lvl, entry in study["table"].items():
        row = {}
        for key in FOCUS:
            cell = {c: (entry["conditions"][c].get(key) or {}).get("mean")
                    for c in entry["conditions"]}
            for name, diffs in entry["differences"].items():
                d = diffs.get(key)
                cell[name] = {k: d[k] for k in ("mean", "lo", "hi", "n")} if d else None
            row[key] = cell
        levels[lvl] = row
    return {"conclusion": study["conclusion"], "levels": levels}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, required=True)
    parser.add_argument("--wall-s", type=float)
    parser.add_argument("--load-start", type=float)
    parser.add_argument("--load-end", type=float)
    parser.add_argument("--load-mean", type=float)
    parser.add_argument("--started-utc")
    parser.add_argument("--commit", help="the commit the timed run used (default: HEAD)")
    parser.add_argument("--note", default="")
    parser.add_argument("--noise", nargs="+", help="the levels the run used (default: "
                        "0 0.2 0.4, the issue's command)")
    parser.add_argument("--conditions", nargs="+", help="the conditions the run used "
                        "(default: c0 c3 c4; c5 fine-tunes the embedder between rounds)")
    args = parser.parse_args()
    if args.noise:
        start = ARGS.index("--noise") + 1
        end = ARGS.index("--conditions")
        ARGS[start:end] = args.noise
    if args.conditions:
        start = ARGS.index("--conditions") + 1
        end = ARGS.index("--replicates")
        ARGS[start:end] = args.conditions
    if args.wall_s is None:
        run = _run(args.results_dir)
    else:
        run = {"started_utc": args.started_utc, "wall_s": args.wall_s,
               "load_start": args.load_start, "load_end": args.load_end,
               "load_mean": args.load_mean}
    record = {
        "command": "mythloop sweep " + " ".join(ARGS) + " --results-dir D",
        **run,
        "cores": os.cpu_count(),
        "os": platform.platform(),
        "commit": args.commit or _git(),
        "note": args.note,
        **figures(args.results_dir.resolve()),
    }
    from common import save_records  # noqa: PLC0415

    save_records("noise_study", {k: v for k, v in record.items()
                                 if k not in ("command", "commit", "os", "cores")},
                 record.get("load_start"), record["command"])


if __name__ == "__main__":
    main()
