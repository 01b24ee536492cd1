"""The attack study of docs/blend.md ("Defences"): attack success and collateral against the
persuadable judge's rate P, per condition.

For each P one sweep of the injected pool (tools/inject_pool.py over the bundled fixtures,
unless `pool` names one) through the plain loop of bench/sweep.py plus C5's fine-tune step
before each round after the first (what flows/feedback_loop.py does, without Prefect: a
flow's task runs cost more than these sweeps on 2 busy cores); a level whose results are
already in OUT is reused, so a study can grow one level at a time. Collateral is each P's held-out hit@1 against P = 0's, paired by
prompt and replicate (mythloop/analysis/attack.py). Records, per P and condition: top-1 and
top-5 attack success and held-out hit@1 at the last round, the largest C - C0 top-1 attack
success over the rounds, and the last round's collateral (mean [95% interval]).

    python bench/attack_study.py --set out=/tmp/attack-study          # fixtures
    python bench/attack_study.py --set out=/tmp/attack-study --set 'p=[1]'   # one more level
    python bench/attack_study.py --set out=DIR --set pool=/tmp/metatool-injected \\
        --set prompts=.../metatool/train.json --set held_out=.../metatool/dev.json \\
        --set replicates=1 --set 'conditions=["c0","c4"]'
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from common import REPO

from mythloop.analysis.attack import collateral
from mythloop.analysis.load import load_results

TOP1, TOP5 = "attack.heldout.top1_rate", "attack.heldout.top5_rate"


def _cell(s: dict | None) -> str | None:
    return None if not s or s.get("mean") is None else \
        f"{s['mean']:+.3f} [{s['lo']:+.3f}, {s['hi']:+.3f}]"


def _mean(s: dict | None) -> float | None:
    return None if not s or s.get("mean") is None else round(s["mean"], 3)


def _sweep(config) -> float:
    """bench/sweep.py's plain loop with C5's fine-tune step; seconds taken."""
    from mythloop.analysis import analyze
    from mythloop.sweep import ConditionRun, load_prompts
    from mythloop.sweep.tuned import tune_for_round
    from mythloop_flows.feedback_loop import _catalog, _contract, _embedder, _prepare_results_dir

    t0 = time.monotonic()
    results_dir = _prepare_results_dir(config)
    for replicate in range(1, config.replicates + 1):
        for cond in config.conditions:
            prompts, seed = load_prompts(config.resolved_prompts_file())
            run = ConditionRun(config=config, cond=cond, replicate=replicate,
                               results_dir=results_dir, catalog=_catalog(config.resolved_pool()),
                               prompts=prompts, base_seed=seed, embedder=_embedder(None))
            run.open()
            try:
                for round_idx in range(config.rounds):
                    run.prepare_round(round_idx)
                    if run.tunes and round_idx > 0:
                        tune_for_round(run, round_idx)
                    measured = run.measure(round_idx)
                    for row in run.learn_round(round_idx, measured.catalogs, _contract()):
                        run.append_turn(row)
                    run.mark_round_complete(round_idx)
            finally:
                run.close()
    analyze(results_dir)
    return round(time.monotonic() - t0, 1)


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
            "attack top-1": _mean(per[last].get(TOP1)),
            "attack top-5": _mean(per[last].get(TOP5)),
            "attack top-1 - c0, largest over rounds": round(max(over), 3) if over else None,
            "attack top-1 - c0": _cell(diffs.get(last, {}).get(TOP1)),
            "heldout hit@1": _mean(per[last].get("heldout.hit@1")),
            "collateral": _cell(col) if attacked != clean else None,
            "collateral mean": _mean(col) if attacked != clean else None,
            "trap_win": _mean(per[last].get("trap.trap_win_rate")),
        }
    return rows


def run(out: str, p: tuple = (0, 0.25, 0.5, 1), conditions: tuple = ("c0", "c3", "c4", "c5"),
        rounds: int = 4, replicates: int = 3, noise: float = 0.2, pool: str | None = None,
        prompts: str | None = None, held_out: str | None = None) -> dict:
    """The study into OUT: one sweep per P (P = 0 always), then the figures (module
    docstring)."""
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
            walls[f"{x:g}"] = _sweep(SweepConfig(
                conditions=list(conditions), rounds=rounds, replicates=replicates,
                judge="simulated", judge_options=JudgeOptions(noise=noise, persuade=x),
                pool=Path(pool), prompts_file=Path(prompts) if prompts else None,
                heldout_file=Path(held_out) if held_out else None,
                results_dir=root / f"p{x:g}"))
    clean = root / "p0"
    figures: dict = {f"p={x:g}": _figures(clean, root / f"p{x:g}") for x in levels}
    command = (f"mythloop sweep --pool {pool} --conditions {' '.join(conditions)} --rounds "
               f"{rounds} --replicates {replicates} --judge simulated --noise {noise:g}"
               + (f" --prompts {prompts}" if prompts else "")
               + (f" --held-out {held_out}" if held_out else "") + " --judge-persuade P")
    figures["_run"] = {"command": command, "levels": levels, "wall_s": walls}
    return figures


if __name__ == "__main__":  # the harness runs it
    from common import part_main

    sys.exit(part_main("attack_study"))
