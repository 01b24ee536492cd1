"""The noise study: `mythloop sweep` at three judge noise levels, timed, with focus metrics.
How it measures: docs/performance.md, "bench/noise_study.py"."""

import json
import tempfile
from pathlib import Path

from common import mythloop_child, part_main

FOCUS = ("trap.trap_win_rate", "in_distribution.hit@5")


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


def run(noise: tuple = ("0", "0.2", "0.4"), conditions: tuple = ("c0", "c3", "c4"),
        results_dir: str | None = None) -> dict:
    """The sweep in a fresh process (its own temporary Prefect server): wall and figures."""
    args = ["--judge", "simulated", "--noise", *map(str, noise), "--conditions", *conditions,
            "--replicates", "3", "--rounds", "4"]
    with tempfile.TemporaryDirectory(prefix="bench-noise-") as tmp:
        out = Path(results_dir or tmp)
        child = mythloop_child(["sweep", *args, "--results-dir", str(out)],
                               log=Path(tmp) / "sweep.log")
        return {"command": "mythloop sweep " + " ".join(args), "wall_s": child["wall_s"],
                **figures(out)}


if __name__ == "__main__":  # the harness runs it
    part_main("noise_study")
