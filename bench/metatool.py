"""The router and its loop on a public benchmark: MetaTool's ToolE set (199 tools).
How it measures: docs/performance.md, "bench/metatool.py"."""

import json
import sys
import tempfile
import time
from pathlib import Path

from common import METATOOL, REPO, part_main, run_child
from metatool_ceiling import rank_hits

PNG = REPO / "bench" / "metatool.png"


def _round_times(shard: Path, rounds: int) -> list[dict]:
    """Measure and learn seconds per round, from when the sandbox's files were written."""
    out = []
    for r in range(rounds):
        start = shard / "snapshots" / f"store_before_round_{r}.db"
        measured = shard / f"round_{r}.jsonl"
        nxt = shard / "snapshots" / f"store_before_round_{r + 1}.db"
        end = nxt if nxt.exists() else shard / "progress.json"
        if not (start.exists() and measured.exists() and end.exists()):
            continue
        t0, t1, t2 = (p.stat().st_mtime for p in (start, measured, end))
        out.append({"round": r, "measure_s": round(t1 - t0, 2), "learn_s": round(t2 - t1, 2)})
    return out


def _heldout(metrics: dict) -> dict:
    """cond -> per round dev hit@1 / hit@5 / MRR, 95% intervals, minus C0 (metrics.json)"""
    out = {}
    keys = ("hit@1", "hit@5", "mrr")
    for cond, rounds in metrics["per_round"].items():
        rows = []
        diffs = (metrics.get("differences") or {}).get(f"{cond}-c0", {}).get("per_round", {})
        for r, s in sorted(rounds.items(), key=lambda kv: int(kv[0])):
            if "heldout.hit@1" in s:
                row = {"round": int(r), **{k: s[f"heldout.{k}"]["mean"] for k in keys},
                       "ci": {k: [s[f"heldout.{k}"].get("lo"), s[f"heldout.{k}"].get("hi")]
                              for k in keys}}
                d = diffs.get(r, {})
                if d:
                    row["vs_c0"] = {k: {x: d[f"heldout.{k}"].get(x) for x in ("mean", "lo", "hi")}
                                    for k in keys if f"heldout.{k}" in d}
                rows.append(row)
        out[cond] = rows
    return out


def _bm25_and_latency(results: Path) -> dict:
    """BM25 alone on dev, and the blended ranking's p50/p95 with the last C3 store."""
    from threadpoolctl import threadpool_limits

    from mythloop.router import Router, get_embedder
    from mythloop.router.lexical import BM25
    from mythloop.router.ranker import name_text
    from mythloop.skills import load_catalog
    from mythloop.sweep.config import load_heldout
    from mythloop.verdicts import VerdictStore

    catalog = load_catalog(METATOOL / "pool")
    dev = load_heldout(METATOOL / "dev.json")
    bm25 = BM25([f"{name_text(s.name)} {s.description}" for s in catalog.skills])
    names = catalog.names()
    ranks = []
    for p in dev:
        scores = bm25.scores(p.prompt)
        order = sorted(range(len(names)), key=lambda i: (-scores[i], i))
        ranks.append(order.index(names.index(p.expected_skill)) + 1)
    out = {"bm25": {**rank_hits(ranks), "n": len(dev)}}
    for cond in ("c3", "c4"):
        store_path = results / f"{cond}-rep1" / "store.db"
        if not store_path.exists():
            continue
        embedder = get_embedder()
        store = VerdictStore(store_path)
        router = Router(catalog, store, embedder, agreement=cond == "c4")
        vecs = embedder.embed([p.prompt for p in dev])
        router.rank_vector(vecs[0], 10, dev[0].prompt)  # build the arrays once

        def timed_ranks(router=router, vecs=vecs) -> list[float]:
            times = []
            for p, v in zip(dev, vecs, strict=True):
                t0 = time.perf_counter()
                router.rank_vector(v, 10, p.prompt)
                times.append((time.perf_counter() - t0) * 1000)
            return sorted(times)

        default = timed_ranks()
        with threadpool_limits(limits=1):  # one BLAS thread: no spin-waits on a busy machine
            single = timed_ranks()
        snap = store.snapshot()
        out[f"rank_ms_{cond}"] = {"p50": single[len(single) // 2],
                                  "p95": single[int(len(single) * 0.95)],
                                  "p50_default_threads": default[len(default) // 2],
                                  "verdicts": len(snap.reasons), "contexts": len(snap.contexts)}
        store.close()
    return out


def _plot(heldout: dict, bm25: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for cond, rows in sorted(heldout.items()):
        ax.plot([r["round"] + 1 for r in rows], [r["hit@1"] for r in rows], marker="o",
                label=cond.upper())
    ax.axhline(bm25["hit@1"], color="grey", ls=":", label="BM25 (name + description)")
    ax.axhline(0.6715, color="black", ls="--", lw=0.8, label="Re-Invoke (published)")
    ax.set(xticks=sorted({r["round"] + 1 for rows in heldout.values() for r in rows}),
           xlabel="round (measured before that round's learning)", ylim=(0, 1),
           ylabel="held-out (dev) hit@1",
           title="MetaTool ToolE, 199 tools: held-out hit@1 per round")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(rounds: int = 4, conditions: tuple[str, ...] = ("c0", "c3", "c4"), noise: float = 0.2,
        timeout: float = 1800, plot: bool = True) -> dict:
    if not (METATOOL / "train.json").is_file():
        return {"absent": f"{METATOOL} holds no train.json"}
    with tempfile.TemporaryDirectory(prefix="mythloop-metatool-") as tmp:  # gone afterwards
        results = Path(tmp) / "sweep"
        cmd = [sys.executable, "-m", "mythloop_app.cli", "sweep",
               "--pool", str(METATOOL / "pool"), "--prompts", str(METATOOL / "train.json"),
               "--held-out", str(METATOOL / "dev.json"), "--judge", "simulated",
               "--noise", str(noise), "--conditions", *conditions, "--rounds", str(rounds),
               "--replicates", "1", "--results-dir", str(results)]
        child = run_child(cmd, cwd=REPO, timeout=timeout, log=Path(tmp) / "sweep.log")
        figures = {k: child[k] for k in ("wall_s", "peak_tree_rss_mb", "returncode", "timed_out")}
        figures.update(rounds=rounds, noise=noise)
        if child["returncode"] != 0:
            figures["tail"] = child["tail"][-1500:]
            return figures
        metrics = json.loads((results / "metrics.json").read_text(encoding="utf-8"))
        figures["heldout"] = _heldout(metrics)
        figures["round_times"] = {c: _round_times(results / f"{c}-rep1", rounds)
                                  for c in conditions}
        figures.update(_bm25_and_latency(results))
    if plot:  # the figure docs/blend.md shows
        _plot(figures["heldout"], figures["bm25"], PNG)
    return figures


if __name__ == "__main__":  # the harness runs it: python bench/metatool.py [--set KEY=VALUE]
    part_main("metatool")
