"""What the C4 blend's signals can reach on MetaTool's dev split when every train label is known.
How it measures: docs/performance.md, "bench/metatool_ceiling.py" (about a minute)."""

import tempfile
from pathlib import Path

import numpy as np
from common import METATOOL, part_main


def rank_hits(ranks: list[int]) -> dict:
    """hit@1, hit@5 and MRR (0 outside the top 10) of the right skill's rank per query."""
    n = len(ranks)
    return {"hit@1": sum(r == 1 for r in ranks) / n, "hit@5": sum(r <= 5 for r in ranks) / n,
            "mrr": sum(1.0 / r for r in ranks if r <= 10) / n}


def _scores(router, dev, vecs) -> dict:
    ranks = []
    for p, v in zip(dev, vecs, strict=True):
        names = [r.name for r in router.rank_vector(v, 10, p.prompt)]
        ranks.append(names.index(p.expected_skill) + 1 if p.expected_skill in names else 11)
    return {k: round(v, 3) for k, v in rank_hits(ranks).items()}


def _hits(score: np.ndarray, gold: np.ndarray) -> dict:
    """hit@1, hit@5, MRR (0 outside the top 10) of a score matrix; a tie does not push gold down."""
    rank = (score > score[np.arange(gold.shape[0]), gold][:, None]).sum(axis=1) + 1
    return {"hit@1": round(float(np.mean(rank == 1)), 3), "hit@5": round(float(np.mean(rank <= 5)), 3),
            "mrr": round(float(np.mean(np.where(rank <= 10, 1.0 / rank, 0.0))), 3)}


def embedded(embedder=None) -> dict:
    """MetaTool's skills and queries, embedded, with the texts and gold indices the studies need."""
    from mythloop.router import get_embedder
    from mythloop.router.ranker import full_text, name_text
    from mythloop.skills import load_catalog
    from mythloop.sweep.config import load_heldout, load_prompts

    embedder = embedder or get_embedder()
    skills = load_catalog(METATOOL / "pool").skills
    train, _seed = load_prompts(METATOOL / "train.json")
    dev = load_heldout(METATOOL / "dev.json")
    index = {s.name: i for i, s in enumerate(skills)}
    return {"skills": skills, "train_prompts": train, "dev_prompts": dev,
            "full": embedder.embed([full_text(s) for s in skills]),
            "name": embedder.embed([name_text(s.name) for s in skills]),
            "body": embedder.embed([s.body or s.description for s in skills]),
            "docs": [f"{name_text(s.name)} {s.description}" for s in skills],
            "train": embedder.embed([p.prompt for p in train]),
            "dev": embedder.embed([p.prompt for p in dev]),
            "train_texts": [p.prompt for p in train], "dev_texts": [p.prompt for p in dev],
            "train_gold": np.array([index[p.expected_skill] for p in train]),
            "dev_gold": np.array([index[p.expected_skill] for p in dev])}


def signals(e: dict) -> dict:
    """The grid of extra signals over known train labels (docs/performance.md)."""
    from sklearn.linear_model import LogisticRegression  # noqa: PLC0415 (bench only)

    from mythloop.router.lexical import BM25

    n = e["full"].shape[0]
    ty, gold, tq, dq = e["train_gold"], e["dev_gold"], e["train"], e["dev"]
    full, names, body = e["full"], e["name"], e["body"]
    semantic = np.maximum(dq @ full.T, dq @ names.T)
    protos = np.zeros((n, tq.shape[1]))
    np.add.at(protos, ty, tq)
    protos /= np.maximum(np.linalg.norm(protos, axis=1, keepdims=True), 1e-12)
    learned = [" ".join(t for t, g in zip(e["train_texts"], ty, strict=True) if g == j)
               for j in range(n)]
    bm25 = BM25([f"{d} {extra}" for d, extra in zip(e["docs"], learned, strict=True)])
    lexical = np.stack([bm25.normalised(t) for t in e["dev_texts"]])
    c4 = semantic + 0.2 * lexical + dq @ protos.T
    sims = dq @ tq.T
    onehot = np.zeros((ty.shape[0], n))
    onehot[np.arange(ty.shape[0]), ty] = 1.0

    def vote(tau: float) -> np.ndarray:
        v = np.exp((sims - 1.0) / tau) @ onehot
        return v / v.sum(axis=1, keepdims=True)

    def logp(c: float) -> np.ndarray:
        clf = LogisticRegression(C=c, max_iter=2000).fit(
            np.vstack([tq, full, names]), np.r_[ty, np.arange(n), np.arange(n)])
        prob = np.full((dq.shape[0], n), 1e-9)
        prob[:, clf.classes_] = np.maximum(clf.predict_proba(dq), 1e-9)
        return np.log(prob)

    def best(extra: dict[str, np.ndarray], weights) -> dict:
        rows = [(_hits(c4 + w * sig, gold), f"{name} x{w}")
                for name, sig in extra.items() for w in weights]
        top = max(rows, key=lambda r: (r[0]["hit@5"], r[0]["hit@1"]))
        return {**top[0], "chosen": top[1]}

    body_sim = dq @ body.T
    votes = {f"tau {t}": vote(t) for t in (0.03, 0.05, 0.1)}
    logps = {f"C {c}": logp(c) for c in (1.0, 10.0, 100.0)}
    both = {f"body x0.2 + vote {k}": 0.2 * body_sim + v for k, v in votes.items()}
    return {"c4 terms": _hits(c4, gold),
            "+ body cosine": best({"body": body_sim}, (0.1, 0.2, 0.3)),
            "+ nearest-neighbour vote": best(votes, (0.5, 1.0, 2.0)),
            "+ logistic regression log-prob": best(logps, (0.05, 0.1, 0.2)),
            "+ body and vote": best(both, (0.5, 1.0))}


def run() -> dict:
    from mythloop.router import Router, get_embedder
    from mythloop.verdicts import VerdictStore, persist_verdicts

    embedder = get_embedder()
    e = embedded(embedder)
    skills, train, dev = e["skills"], e["train_prompts"], e["dev_prompts"]
    known = {s.name for s in skills}
    with tempfile.TemporaryDirectory(prefix="mythloop-ceiling-") as tmp:
        store = VerdictStore(Path(tmp) / "store.db")
        for p in train:
            persist_verdicts(store, [p.expected_skill],
                             [{"name": p.expected_skill, "verdict": "HELPFUL",
                               "reason": f"the right tool for: {p.prompt}"}],
                             session_id=f"oracle-{p.id}", host="oracle", query=p.prompt,
                             embedder=embedder, known_skills=known)
        out = {"c0": _scores(Router(skills, store, embedder, blend=False), dev, e["dev"]),
               "c4": _scores(Router(skills, store, embedder, blend=True, agreement=True),
                             dev, e["dev"]),
               "train_queries": len(train), "dev_queries": len(dev)}
        store.close()
    out["signals"] = signals(e)
    return out


if __name__ == "__main__":  # the harness runs it
    part_main("metatool_ceiling")
