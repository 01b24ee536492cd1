"""`mythloop analyze` at MetaTool's size, this checkout against an earlier commit, side by side.
How it measures: docs/performance.md, "bench/analyze_speed.py"."""

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from common import METATOOL, REPO, part_main

CONDITIONS, ROUNDS, SEED = ("c0", "c3", "c4"), 4, 20240917


def build(root: Path) -> dict:
    """Write the synthetic results dir; returns its size."""
    train = json.loads((METATOOL / "train.json").read_text(encoding="utf-8"))
    dev = json.loads((METATOOL / "dev.json").read_text(encoding="utf-8"))
    tools = sorted(p.name for p in (METATOOL / "pool").iterdir() if p.is_dir())
    prompts = [(q["id"], "normal", q["expected"]) for q in train] + \
              [(q["id"], "heldout", q["expected"]) for q in dev]
    rng = random.Random(SEED)
    root.mkdir(parents=True)
    (root / "sweep.json").write_text(json.dumps({
        "sweep_id": "synthetic-metatool-shape", "conditions": list(CONDITIONS),
        "rounds": ROUNDS, "replicates": 1, "judge": "synthetic (no judge: rows drawn at random)",
        "simulated": True, "pool": str(METATOOL / "pool"), "seed": SEED,
        "replicate_seeds": {"1": SEED}}), encoding="utf-8")
    rows = turns = 0
    for cond in CONDITIONS:
        box = root / f"{cond}-rep1"
        box.mkdir()
        with open(box / "turns.jsonl", "w", encoding="utf-8") as tf:
            for r in range(ROUNDS):
                with open(box / f"round_{r}.jsonl", "w", encoding="utf-8") as rf:
                    for pid, kind, gold in prompts:
                        others = rng.sample(tools, 11)
                        ranked = [t for t in others if t != gold][:10]
                        gold_rank = rng.randint(1, 12)  # 11-12: outside the top 10
                        if gold_rank <= 10:
                            ranked[gold_rank - 1] = gold
                        row = {"round": r, "cond": cond, "replicate": 1, "prompt_id": pid,
                               "prompt_kind": kind, "expected_skill": gold}
                        for rank, name in enumerate(ranked, start=1):
                            rf.write(json.dumps({
                                **row, "poisoned_twin": None, "rank": rank, "skill_name": name,
                                "tier": None, "score": round(1 - rank / 20, 6),
                                "status": "active"}) + "\n")
                        rows += len(ranked)
                        if kind == "normal":
                            applied = [{"name": ranked[0], "verdict": "HELPFUL", "tier": None}]
                            tf.write(json.dumps({**row, "status": "ok", "ranked_top5": ranked[:5],
                                                 "applied": applied}) + "\n")
                            turns += 1
    return {"measurement_rows": rows, "turns": turns, "prompts": len(prompts)}


_CHILD = """
import json, os, resource, sys, time
t0 = time.perf_counter()
from mythloop.analysis import analyze
c0 = time.process_time()
analyze(sys.argv[1])
print(json.dumps({"analyze_cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - t0,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "load": os.getloadavg()[0]}))
"""


def _run(package_root: Path, results: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(package_root), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(results)], env=env, cwd="/",
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(base: str = "ee324ff", repeats: int = 2, keep: str | None = None) -> dict:
    """Both analyses, interleaved REPEATS times on copies of one synthetic results dir."""
    if not (METATOOL / "train.json").is_file():
        raise SystemExit(f"analyze_speed: {METATOOL} holds no train.json (set MYTHLOOP_METATOOL)")
    work = Path(tempfile.mkdtemp(prefix="mythloop-analyze-speed-"))
    try:
        base_pkg = work / "base"
        base_pkg.mkdir()
        archive = subprocess.run(["git", "archive", base, "mythloop"], cwd=REPO,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base_pkg)], input=archive, check=True)
        src = Path(keep) if keep else work / "synthetic"
        size = build(src)
        dirs = {"base": work / "a", "this": work / "b"}
        for d in dirs.values():
            shutil.copytree(src, d)
        runs: dict[str, list[dict]] = {"base": [], "this": []}
        for _ in range(repeats):  # interleaved: both see the same machine
            runs["base"].append(_run(base_pkg, dirs["base"]))
            runs["this"].append(_run(REPO, dirs["this"]))
        best = {k: min(r["analyze_cpu_s"] for r in v) for k, v in runs.items()}
        return {"synthetic": True, "size": size, "base": base,
                "runs": {k: {f: [r[f] for r in v] for f in ("analyze_cpu_s", "wall_s",
                                                               "peak_rss_mb")}
                         for k, v in runs.items()},
                "best_cpu_s": best, "ratio_this_over_base": best["this"] / best["base"],
                "metrics_json_mb": {k: (d / "metrics.json").stat().st_size / 1e6
                                    for k, d in dirs.items()}}
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":  # the harness runs it: python bench/analyze_speed.py [--set base=C]
    part_main("analyze_speed")
