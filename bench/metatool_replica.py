"""Would other signals, or a catalog that explores, carry C4's learning loop on MetaTool further?
How it measures: docs/performance.md, "bench/metatool_replica.py".

    python bench/metatool_replica.py       # about a minute
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from metatool_ceiling import METATOOL, _hits, embedded  # noqa: E402

from mythloop.router.lexical import BM25  # noqa: E402

KEEP = 20  # helpful prompts kept per skill (the store's limit)


def _score(e: dict, q: np.ndarray, texts: list[str], helps: list[list[int]],
           body: float, vote: float) -> np.ndarray:
    n = e["full"].shape[0]
    protos = np.zeros((n, e["train"].shape[1]))
    for j, kept in enumerate(helps):
        if kept:
            protos[j] = e["train"][kept[-KEEP:]].sum(axis=0)
    protos /= np.maximum(np.linalg.norm(protos, axis=1, keepdims=True), 1e-12)
    docs = [f"{d} {' '.join(e['train_texts'][i] for i in kept[-KEEP:])}"
            for d, kept in zip(e["docs"], helps, strict=True)]
    bm25 = BM25(docs)
    score = (np.maximum(q @ e["full"].T, q @ e["name"].T)
             + 0.2 * np.stack([bm25.normalised(t) for t in texts]) + q @ protos.T)
    if body:
        score += body * (q @ e["body"].T)
    kept_all = [i for kept in helps for i in kept[-KEEP:]]
    if vote and kept_all:
        onehot = np.zeros((len(kept_all), n))
        onehot[np.arange(len(kept_all)), e["train_gold"][kept_all]] = 1.0
        v = np.exp((q @ e["train"][kept_all].T - 1.0) / 0.05) @ onehot
        score += vote * v / np.maximum(v.sum(axis=1, keepdims=True), 1e-12)
    return score


def loop(e: dict, seed: int, rounds: int = 4, noise: float = 0.2, body: float = 0.0,
         vote: float = 0.0, explore: bool = False) -> list[dict]:
    """Dev hit@1 / hit@5 measured at the start of each round."""
    rng = np.random.default_rng(seed)
    n, m = e["full"].shape[0], e["train"].shape[0]
    helps: list[list[int]] = [[] for _ in range(n)]
    depth = np.zeros(m, dtype=int)
    out = []
    for _ in range(rounds):
        dev = _score(e, e["dev"], e["dev_texts"], helps, body, vote)
        h = _hits(dev, e["dev_gold"])
        out.append({"hit@1": h["hit@1"], "hit@5": h["hit@5"]})
        order = np.argsort(-_score(e, e["train"], e["train_texts"], helps, body, vote), axis=1)
        for i in range(m):
            d = depth[i] if explore else 0
            gold = e["train_gold"][i]
            if gold in order[i, 5 * d:5 * d + 5] and rng.random() >= noise:
                helps[gold].append(i)
                depth[i] = 0
            else:
                depth[i] = min(depth[i] + 1, 5)
    return out


def run(seeds: tuple[int, ...] = (0, 1)) -> dict:
    e = embedded()
    variants = {"c4": {}, "c4 + body": {"body": 0.2}, "c4 + vote": {"vote": 0.5},
                "c4 + body + vote": {"body": 0.2, "vote": 0.5},
                "c4, exploring catalog": {"explore": True},
                "c4 + body, exploring catalog": {"body": 0.2, "explore": True}}
    out = {}
    for name, kw in variants.items():
        runs = [loop(e, s, **kw) for s in seeds]
        out[name] = [{k: round(float(np.mean([r[i][k] for r in runs])), 3) for k in ("hit@1", "hit@5")}
                     for i in range(len(runs[0]))]
    return {"rounds": out, "seeds": list(seeds), "data": str(METATOOL)}


if __name__ == "__main__":  # the harness runs it: python bench/metatool_replica.py [--set KEY=VALUE]
    from common import part_main

    sys.exit(part_main("metatool_replica"))
