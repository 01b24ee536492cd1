"""Attack success and collateral against the persuadable judge's rate P, per condition.
How it measures: docs/performance.md, "bench/attack_study.py"."""

import json
import subprocess
import sys
import time
from pathlib import Path

from common import REPO, interval_of, mean_of, part_main
from sweep import plain_sweep

from mythloop.analysis.attack import collateral
from mythloop.analysis.load import load_results

TOP1, TOP5 = "attack.heldout.top1_rate", "attack.heldout.top5_rate"


def _figures(clean: Path, attacked: Path) -> dict:
    m = json.loads((attacked / "metrics.json").read_text(encoding="utf-8"))
    last = str(m["last_round"])
    side = {(r["cond"], str(r["round"])): r
            for r in collateral(load_results(clean), load_results(attacked))}
    rows = {}
    for cond in m["conditions"]:
        per = m["per_round"][cond]
        diffs = m["differences"].get(f"{cond}-c0", {}).get("per_round", {})
        over = [d[TOP1]["mean"] for d in diffs.values() if (d.get(TOP1) or {}).get("mean")
                is not None]
        col = (side.get((cond, last)) or {}).get("collateral")
        rows[cond] = {
            "attack top-1": mean_of(per[last].get(TOP1)),
            "attack top-5": mean_of(per[last].get(TOP5)),
            "attack top-1 - c0, largest over rounds": round(max(over), 3) if over else None,
            "attack top-1 - c0": interval_of(diffs.get(last, {}).get(TOP1)),
            "heldout hit@1": mean_of(per[last].get("heldout.hit@1")),
            "collateral": interval_of(col) if attacked != clean else None,
            "collateral mean": mean_of(col) if attacked != clean else None,
            "trap_win": mean_of(per[last].get("trap.trap_win_rate")),
        }
    return rows


def run(out: str, p: tuple = (0, 0.25, 0.5, 1), conditions: tuple = ("c0", "c3", "c4", "c5"),
        rounds: int = 4, replicates: int = 3, noise: float = 0.2, pool: str | None = None,
        prompts: str | None = None, held_out: str | None = None) -> dict:
    """The study into OUT: a sweep per P (P = 0 always; a level in OUT is reused), its figures."""
    from mythloop.sweep import JudgeOptions, SweepConfig

    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    if pool is None:
        pool = str(root / "pool")
        if not Path(pool).is_dir():
            subprocess.run([sys.executable, str(REPO / "tools" / "inject_pool.py"), "--pool",
                            str(REPO / "fixtures" / "pool"), "--out", pool], check=True,
                           cwd=REPO)
    levels = sorted({0.0, *map(float, p)})
    walls = {}
    for x in levels:
        if not (root / f"p{x:g}" / "metrics.json").exists():
            t0 = time.monotonic()
            plain_sweep(SweepConfig(
                conditions=list(conditions), rounds=rounds, replicates=replicates,
                judge="simulated", judge_options=JudgeOptions(noise=noise, persuade=x),
                pool=Path(pool), prompts_file=Path(prompts) if prompts else None,
                heldout_file=Path(held_out) if held_out else None,
                results_dir=root / f"p{x:g}"), tune=True)
            walls[f"{x:g}"] = round(time.monotonic() - t0, 1)
    clean = root / "p0"
    figures: dict = {f"p={x:g}": _figures(clean, root / f"p{x:g}") for x in levels}
    command = (f"mythloop sweep --pool {pool} --conditions {' '.join(conditions)} --rounds "
               f"{rounds} --replicates {replicates} --judge simulated --noise {noise:g}"
               + (f" --prompts {prompts}" if prompts else "")
               + (f" --held-out {held_out}" if held_out else "") + " --judge-persuade P")
    figures["_run"] = {"command": command, "levels": levels, "wall_s": walls}
    return figures


if __name__ == "__main__":  # the harness runs it
    part_main("attack_study")
