"""C0, C4 and C5 on a library of 4,000+ skills: wall, CPU and peak memory per round and step.
How it measures: docs/performance.md, "bench/c5_scale.py"."""

import contextlib
import json
import random
import tempfile
import time
from pathlib import Path

from common import METATOOL, note, part_main, peak_rss_mb, vm_hwm_mb

VENDORS = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Stark", "Wayne",
           "Wonka", "Cyberdyne", "Soylent", "Tyrell", "Aperture", "Oscorp", "Gringotts",
           "Monarch", "Pied Piper", "Massive Dynamic", "Nakatomi", "Virtucon")
AUDIENCES = ("for small teams", "for enterprises", "for students", "for clinics",
             "for retailers", "for travel agents", "for newsrooms", "for law firms",
             "for game studios", "for city councils", "for farmers", "for researchers",
             "for hobbyists", "for banks", "for schools", "for charities")


def make_pool(folder: Path, skills: int, per_tool: int, seed: int = 0) -> tuple[Path, Path]:
    """Write the pool (SKILL.md folders) and the learned prompts; (pool, prompts file)."""
    from mythloop.skills import load_catalog

    base = load_catalog(METATOOL / "pool").skills
    pool = folder / "pool"
    rng = random.Random(seed)
    rows = [(s.name, s.description) for s in base]
    combos = [(v, a) for v in VENDORS for a in AUDIENCES]
    rng.shuffle(combos)
    i = 0
    while len(rows) < skills:
        tool = base[i % len(base)]
        vendor, audience = combos[(i // len(base)) % len(combos)]
        rows.append((f"{tool.name}-{vendor.lower().replace(' ', '-')}-{i}",
                     f"{vendor} edition {audience}. {tool.description}"))
        i += 1
    for name, description in rows:
        (pool / name).mkdir(parents=True)
        (pool / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n{description}\n",
            encoding="utf-8")
    taken: dict[str, int] = {}
    learned = []
    for row in json.loads((METATOOL / "train.json").read_text(encoding="utf-8")):
        if taken.get(row["expected"], 0) < per_tool:
            taken[row["expected"]] = taken.get(row["expected"], 0) + 1
            learned.append(row)
    prompts = folder / "train.json"
    prompts.write_text(json.dumps(learned), encoding="utf-8")
    return pool, prompts


def _timed(steps: dict, name: str, run_, fn, *args):
    """Run one step; its wall, CPU, peak RSS (reset first) and the texts the model encoded."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM starts again from here
    embedder, encoded = run_.embedder, run_.embedder.encoded
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    steps[name] = {"wall_s": round(time.perf_counter() - wall, 3),
                   "cpu_s": round(time.process_time() - cpu, 3),
                   "peak_mb": round(vm_hwm_mb() or peak_rss_mb(), 1),
                   "texts_encoded": run_.embedder.encoded - (
                       encoded if run_.embedder is embedder else 0)}
    return out


def check(skills: int = 4000, rounds: int = 2, per_tool: int = 1,
          conditions: tuple = ("c0", "c4", "c5")) -> None:
    if not (METATOOL / "pool").is_dir():
        raise SystemExit(f"c5_scale: no MetaTool pool at {METATOOL}/pool (set MYTHLOOP_METATOOL)")
    if skills < 199 or rounds < 2 or per_tool < 1:
        raise SystemExit("c5_scale: use skills >= 199, rounds >= 2 (C5 tunes from round 2), "
                         "per_tool >= 1")


def run(skills: int = 4000, rounds: int = 2, per_tool: int = 1,
        conditions: tuple = ("c0", "c4", "c5")) -> dict:
    """Per condition: each round's steps (wall, CPU, peak) and held-out hit@1."""
    from mythloop.router import get_embedder
    from mythloop.skills import load_catalog
    from mythloop.sweep import ConditionRun, JudgeOptions, SweepConfig
    from mythloop.sweep.config import load_sweep_prompts
    from mythloop.sweep.tuned import tune_for_round
    from mythloop.verdicts import render_self_eval_contract

    check(skills, rounds, per_tool, conditions)
    out: dict = {"skills": skills, "rounds": rounds, "per_tool": per_tool, "conditions": {}}
    with tempfile.TemporaryDirectory(prefix="c5-scale-") as tmp:
        pool, prompts_file = make_pool(Path(tmp), skills, per_tool)
        config = SweepConfig(conditions=list(conditions), rounds=rounds, replicates=1,
                             pool=pool, prompts_file=prompts_file,
                             heldout_file=METATOOL / "dev.json", judge="simulated",
                             judge_options=JudgeOptions(), results_dir=Path(tmp) / "results")
        prompts, seed = load_sweep_prompts(config)
        catalog = load_catalog(pool)
        out["learned_prompts"] = sum(p.learned for p in prompts)
        out["heldout_prompts"] = sum(p.kind == "heldout" for p in prompts)
        contract = render_self_eval_contract()
        for cond in conditions:
            run_ = ConditionRun(config=config, cond=cond, replicate=1,
                                results_dir=config.results_dir, catalog=catalog,
                                prompts=prompts, base_seed=seed, embedder=get_embedder())
            per_round = []
            steps: dict = {}
            _timed(steps, "open", run_, run_.open)
            for r in range(rounds):
                run_.prepare_round(r)
                if run_.tunes and r > 0:
                    # The step also embeds every text with the new model (use_embedder):
                    # train_s is the training alone, as the model store recorded it.
                    model = _timed(steps, "fine_tune", run_, tune_for_round, run_, r)
                    steps["fine_tune"].update(pairs=model["pairs"],
                                              train_s=model.get("train_seconds", 0.0))
                measured = _timed(steps, "measure", run_, run_.measure, r)
                rows = _timed(steps, "learn", run_, run_.learn_round, r, measured.catalogs,
                              contract)
                for row in rows:
                    run_.append_turn(row)
                run_.mark_round_complete(r)
                per_round.append({"round": r, "steps": steps,
                                  "wall_s": round(sum(s["wall_s"] for s in steps.values()), 3),
                                  "cpu_s": round(sum(s["cpu_s"] for s in steps.values()), 3),
                                  "heldout_hit_at_1": measured.heldout_hit_at_1})
                note("c5_scale", f"{cond} round {r}: {per_round[-1]}")
                steps = {}
            run_.close()
            out["conditions"][cond] = per_round
    return out


if __name__ == "__main__":  # the harness runs it
    part_main("c5_scale")
