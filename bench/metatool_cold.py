"""Cold skills on MetaTool: does C4's loop starve a skill it has no history for?
How it measures: docs/performance.md, "bench/metatool_cold.py"."""

import json
import pickle
import tempfile
from pathlib import Path

import numpy as np
from common import part_main
from metatool_ceiling import METATOOL, _hits, embedded

from mythloop.router.lexical import BM25
from mythloop.sweep.config import cold_skill_names

KEEP = 20
KEYS = {"c0", "prior", "lex", "wl", "wc", "body", "vote", "explore", "page"}  # of a variant
CACHE = Path(tempfile.gettempdir()) / "mythloop-metatool-embedded.pkl"


def _load() -> dict:
    if CACHE.exists():
        return pickle.loads(CACHE.read_bytes())
    e = embedded()
    e = {k: v for k, v in e.items() if k not in ("skills", "train_prompts", "dev_prompts")} | {
        "names": [s.name for s in e["skills"]],
        "bodies": [s.body or s.description for s in e["skills"]]}
    CACHE.write_bytes(pickle.dumps(e))
    return e


def _score(e, q, texts, helps, present, v) -> np.ndarray:
    """C4's score of each query under variant V (keys: docs/performance.md); absent skills -inf."""
    n = e["full"].shape[0]
    semantic = np.maximum(q @ e["full"].T, q @ e["name"].T)
    if v.get("c0"):
        return np.where(present, semantic, -np.inf)
    sums = np.zeros((n, e["train"].shape[1]))
    for j, kept in enumerate(helps):
        if kept:
            sums[j] = e["train"][kept[-KEEP:]].sum(axis=0)
    protos = sums + v.get("prior", 0.0) * e["full"]
    protos /= np.maximum(np.linalg.norm(protos, axis=1, keepdims=True), 1e-12)
    # BM25 over name + description ("desc"), or with the kept helpful prompts ("learned")
    docs = e["docs"] if v.get("lex") == "desc" else [
        " ".join([d, *(e["train_texts"][i] for i in kept[-KEEP:])])
        for d, kept in zip(e["docs"], helps, strict=True)]
    index = BM25(docs)
    lexical = np.stack([index.normalised(t) for t in texts])
    score = semantic + v.get("wl", 0.2) * lexical + v.get("wc", 1.0) * (q @ protos.T)
    if v.get("body"):  # the embedded SKILL.md body
        score += v["body"] * (q @ e["body"].T)
    kept_all = [i for kept in helps for i in kept[-KEEP:]]
    if v.get("vote") and kept_all:  # a soft nearest-neighbour vote over the kept prompts
        onehot = np.zeros((len(kept_all), n))
        onehot[np.arange(len(kept_all)), e["train_gold"][kept_all]] = 1.0
        votes = np.exp((q @ e["train"][kept_all].T - 1.0) / 0.05) @ onehot
        score += v["vote"] * votes / np.maximum(votes.sum(axis=1, keepdims=True), 1e-12)
    return np.where(present, score, -np.inf)


def loop(e, cold, seed=0, rounds=4, noise=0.2, add_at=None, **v) -> list[dict]:
    """Dev hit@1 / hit@5, warm and cold, at the start of each round (catalog keys: explore, page)"""
    rng = np.random.default_rng(seed)
    n = e["full"].shape[0]
    is_cold = np.isin(np.arange(n), cold)
    helps: list[list[int]] = [[] for _ in range(n)]
    nverd = np.zeros(n)
    depth = np.zeros(e["train"].shape[0], dtype=int)  # the page each query is shown (`page`)
    cold_dev = is_cold[e["dev_gold"]]
    out = []
    sigma = v.get("explore", 0.0)
    for r in range(rounds):
        present = ~is_cold if add_at is not None and r < add_at else np.ones(n, bool)
        dev = _score(e, e["dev"], e["dev_texts"], helps, present, v)
        out.append({"warm": _hits(dev[~cold_dev], e["dev_gold"][~cold_dev]),
                    "cold": _hits(dev[cold_dev], e["dev_gold"][cold_dev]) if cold_dev.any()
                    else {"hit@1": 0.0, "hit@5": 0.0}})
        if v.get("c0"):
            continue
        learn = ~is_cold[e["train_gold"]] | (add_at is not None and r >= add_at)
        idx = np.flatnonzero(learn)
        tr = _score(e, e["train"][idx], [e["train_texts"][i] for i in idx], helps, present, v)
        order = np.argsort(-tr, axis=1)
        for row, i in enumerate(idx):
            d = depth[i] if v.get("page") else 0
            shown = list(order[row, 5 * d:5 * d + 5])
            if sigma:
                window = order[row, 4:15]
                window = window[present[window]]
                draw = tr[row, window] + sigma * rng.standard_normal(window.size) / np.sqrt(1 + nverd[window])
                shown[4] = window[int(np.argmax(draw))]
            gold = e["train_gold"][i]
            if gold in shown:
                nverd[gold] += 1
                if rng.random() >= noise:
                    helps[gold].append(i)
                    depth[i] = 0
                    continue
            depth[i] = min(depth[i] + 1, 5)
    return out


def replica(variants: dict, seeds=(0,), add_at=None, fraction=0.2) -> dict:
    e = _load()
    names = e["names"]
    cold = [names.index(c) for c in cold_skill_names(names, fraction, 42)] if fraction else []
    res = {"cold_tools": len(cold), "data": str(METATOOL)}
    for label, v in variants.items():
        runs = [loop(e, cold, s, add_at=add_at, **v) for s in seeds]
        res[label] = [{part: {k: round(float(np.mean([x[i][part][k] for x in runs])), 3)
                              for k in ("hit@1", "hit@5")} for part in ("warm", "cold")}
                      for i in range(len(runs[0]))]
    return res


DEFAULT = {"c0": {"c0": True},
           "c4 before (learned words, no prior)": {},
           "prior 0.5, learned words": {"prior": 0.5},
           "no prior, name + description BM25": {"lex": "desc"},
           "c4 now (prior 0.5, name + description BM25, explore 0.1)":
               {"prior": 0.5, "lex": "desc", "explore": 0.1}}


def sweep_table(results_dir: Path, conds: list[str] | None = None) -> dict:
    """cond -> per round warm / cold hit@1 and hit@5 of a finished `--cold-skills` sweep."""
    metrics = json.loads((results_dir / "metrics.json").read_text(encoding="utf-8"))
    out = {}
    for cond, rounds in metrics["per_round"].items():
        if conds and cond not in conds:
            continue
        out[cond] = []
        for r, s in sorted(rounds.items(), key=lambda kv: int(kv[0])):
            split = "heldout_warm.hit@1" in s  # else no skill held back: every prompt is warm
            row = {"round": int(r)}
            for part in ("warm", "cold") if split else ("warm",):
                for k in ("hit@1", "hit@5"):
                    key = f"heldout_{part}.{k}" if split else f"heldout.{k}"
                    if key in s:
                        row[f"{part} {k}"] = round(s[key]["mean"], 3)
            out[cond].append(row)
    return out


def check(variants: dict | None = None, **_: object) -> None:
    """Refuse, in one line, a variant key the replica does not know."""
    bad = sorted({k for v in (variants or {}).values() for k in v} - KEYS)
    if bad:
        raise SystemExit(f"metatool_cold: no variant key {bad[0]!r}; the keys: "
                         f"{', '.join(sorted(KEYS))}")


def run(variants: dict | None = None, seeds=(0, 1), add_at=None, fraction=0.2,
        results_dir: str | None = None, conds: tuple = (), label: str = "sweep") -> dict:
    """The default study; or VARIANTS; or, with RESULTS_DIR, a finished sweep's warm / cold rows."""
    if results_dir:
        return {label: {"rounds": sweep_table(Path(results_dir), list(conds) or None)}}
    if variants is None:  # the table of docs/blend.md ("Cold skills")
        seeds = tuple(seeds)
        return {"replica": {"cold 0.2": replica(DEFAULT, seeds),
                            "cold 0.2, added at round 2": replica(DEFAULT, seeds, 2),
                            "no cold skills": replica(DEFAULT, seeds, fraction=0)}}
    return {"replica": replica(variants, tuple(seeds), add_at, fraction)}


if __name__ == "__main__":  # the harness runs it
    part_main("metatool_cold")
