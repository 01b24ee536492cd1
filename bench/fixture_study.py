"""The fixture study of docs/blend.md (5 replicates x 6 rounds at noise 0.3, the bundled pool).
How it measures: docs/performance.md, "bench/fixture_study.py"."""

import json
import time
from pathlib import Path

from common import bench_env, interval_of, mean_of, mythloop_child, part_main
from sweep import plain_sweep

from mythloop.sweep import JudgeOptions, SweepConfig

ROUNDS, REPLICATES, NOISE = 6, 5, 0.3


def run(out: str, conditions: tuple = ("c0", "c3", "c4")) -> dict:
    """The study into results dir OUT (new); the last round's figures per condition."""
    out, conditions = Path(out), list(conditions)
    started = time.monotonic()
    if "c5" in conditions:
        mythloop_child(["sweep", "--conditions", *conditions, "--rounds", str(ROUNDS),
                        "--replicates", str(REPLICATES), "--judge", "simulated", "--noise",
                        str(NOISE), "--results-dir", str(out)],
                       env=bench_env(out.parent / f"{out.name}-state"))
    else:
        plain_sweep(SweepConfig(conditions=conditions, rounds=ROUNDS, replicates=REPLICATES,
                                judge="simulated", judge_options=JudgeOptions(noise=NOISE),
                                results_dir=out))
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    last = str(m["last_round"])

    rows: dict = {}
    for cond in m["conditions"]:
        s = m["per_round"][cond][last]
        diff = m["differences"].get(f"{cond}-c0", {}).get("per_round", {}).get(last, {})
        rows[cond] = {"trap_win": mean_of(s.get("trap.trap_win_rate"), 2),
                      "hit@5 - c0": interval_of(diff.get("in_distribution.hit@5"), 2),
                      "hit@3 - c0": interval_of(diff.get("in_distribution.hit@3"), 2),
                      "heldout hit@3": mean_of(s.get("heldout.hit@3"), 2),
                      "poisoned in top-5 catalog": mean_of(
                          s.get("catalog.in_distribution.poisoned_rate"), 2)}
    rows["_run"] = {"wall_s": round(time.monotonic() - started, 1), "rounds": ROUNDS,
                    "replicates": REPLICATES, "noise": NOISE,
                    "through": "mythloop sweep" if "c5" in conditions
                    else "plain loop (bench/sweep.py)"}
    return rows


if __name__ == "__main__":  # the harness runs it
    part_main("fixture_study")
