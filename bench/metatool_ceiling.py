"""What the C4 blend's signals can reach on MetaTool's dev split when every train label is known.

A store is filled with one HELPFUL verdict per train query for its right tool (an oracle
judge that sees every right tool, with no noise and no top-5 limit), and the real Router
ranks the 374 dev queries with C0 and C4 over it. The learning loop can only learn less
than this (a right tool outside a prompt's top 5 is never judged; noise flips verdicts), so
these figures bound what the loop can reach with MiniLM embeddings, BM25 and these weights.

    python bench/metatool_ceiling.py       # about a minute; prints JSON
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
METATOOL = Path(os.environ.get("MYTHLOOP_METATOOL", "/work/shared/benchmarks/metatool"))


def _scores(router, dev, vecs) -> dict:
    h1 = h5 = mrr = 0.0
    for p, v in zip(dev, vecs, strict=True):
        names = [r.name for r in router.rank_vector(v, 10, p.prompt)]
        rank = names.index(p.expected_skill) + 1 if p.expected_skill in names else 11
        h1 += rank == 1
        h5 += rank <= 5
        mrr += 1.0 / rank if rank <= 10 else 0.0
    n = len(dev)
    return {"hit@1": round(h1 / n, 3), "hit@5": round(h5 / n, 3), "mrr": round(mrr / n, 3)}


def run() -> dict:
    from mythloop.router import Router, get_embedder
    from mythloop.skills import load_catalog
    from mythloop.sweep.config import load_heldout, load_prompts
    from mythloop.verdicts import VerdictStore, persist_verdicts

    catalog = load_catalog(METATOOL / "pool")
    train, _seed = load_prompts(METATOOL / "train.json")
    dev = load_heldout(METATOOL / "dev.json")
    embedder = get_embedder()
    known = set(catalog.names())
    with tempfile.TemporaryDirectory(prefix="mythloop-ceiling-") as tmp:
        store = VerdictStore(Path(tmp) / "store.db")
        for p in train:
            persist_verdicts(store, [p.expected_skill],
                             [{"name": p.expected_skill, "verdict": "HELPFUL",
                               "reason": f"the right tool for: {p.prompt}"}],
                             session_id=f"oracle-{p.id}", host="oracle", query=p.prompt,
                             embedder=embedder, known_skills=known)
        vecs = embedder.embed([p.prompt for p in dev])
        out = {"c0": _scores(Router(catalog, store, embedder, blend=False), dev, vecs),
               "c4": _scores(Router(catalog, store, embedder, blend=True, agreement=True),
                             dev, vecs),
               "train_queries": len(train), "dev_queries": len(dev)}
        store.close()
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
