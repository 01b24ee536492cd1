"""The attack study of docs/blend.md ("Defences"): attack success and collateral against the
persuadable judge's rate P, per condition, through `mythloop sweep` (C5 needs the flow).

For each P one sweep of the injected pool (tools/inject_pool.py over the bundled fixtures,
unless `pool` names one); collateral is each P's held-out hit@1 against P = 0's, paired by
prompt and replicate (mythloop/analysis/attack.py). Records, per P and condition: top-1 and
top-5 attack success and held-out hit@1 at the last round, the largest C - C0 top-1 attack
success over the rounds, and the last round's collateral (mean [95% interval]).

    python bench/attack_study.py --set out=/tmp/attack-study          # fixtures, ~25 min
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

from common import REPO, bench_env, mythloop_cmd

from mythloop.analysis.attack import collateral
from mythloop.analysis.load import load_results

TOP1, TOP5 = "attack.heldout.top1_rate", "attack.heldout.top5_rate"


def _cell(s: dict | None) -> str | None:
    return None if not s or s.get("mean") is None else \
        f"{s['mean']:+.3f} [{s['lo']:+.3f}, {s['hi']:+.3f}]"


def _mean(s: dict | None) -> float | None:
    return None if not s or s.get("mean") is None else round(s["mean"], 3)


def _sweep(out: Path, p: float, args: list[str]) -> float:
    t0 = time.monotonic()
    cmd = [*mythloop_cmd(), "sweep", *args, "--judge-persuade", str(p), "--results-dir", str(out)]
    done = subprocess.run(cmd, env=bench_env(out.parent / f"{out.name}-state"), text=True,
                          capture_output=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"attack_study: the sweep at P = {p} failed (exit {done.returncode}): "
                         f"{done.stderr[-1500:]}")
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
    """The study into OUT (new): one sweep per P, then the figures (module docstring)."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=False)
    if pool is None:
        pool = str(root / "pool")
        subprocess.run([sys.executable, str(REPO / "tools" / "inject_pool.py"), "--pool",
                        str(REPO / "fixtures" / "pool"), "--out", pool], check=True, cwd=REPO)
    args = ["--pool", pool, "--conditions", *conditions, "--rounds", str(rounds),
            "--replicates", str(replicates), "--judge", "simulated", "--noise", str(noise)]
    args += ["--prompts", prompts] if prompts else []
    args += ["--held-out", held_out] if held_out else []
    levels = sorted({0.0, *map(float, p)})
    walls = {f"{x:g}": _sweep(root / f"p{x:g}", x, args) for x in levels}
    clean = root / "p0"
    figures: dict = {f"p={x:g}": _figures(clean, root / f"p{x:g}") for x in levels}
    figures["_run"] = {"command": "mythloop sweep " + " ".join(args) + " --judge-persuade P",
                       "levels": levels, "wall_s": walls}
    return figures


if __name__ == "__main__":  # the harness runs it
    from common import part_main

    sys.exit(part_main("attack_study"))
