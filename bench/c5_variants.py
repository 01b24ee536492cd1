"""C5's fine-tune settings tried on the trusted pairs of a real sweep (issue 41: "what was tried").
How it measures: docs/performance.md, "bench/c5_variants.py".

    python bench/c5_variants.py --pairs STATE/models/ft-XXXX/pairs.jsonl \
        --sweep-json RESULTS/sweep.json --json /tmp/c5v.json
    python bench/c5_variants.py ... --variant epochs=2 --variant epochs=1,learning_rate=5e-5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from common import _git_commit  # noqa: E402 (bench/ is on sys.path when run as a script)
from metatool_ceiling import _hits as ceiling_hits  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
METATOOL = Path(os.environ.get("MYTHLOOP_METATOOL", "/work/shared/benchmarks/metatool"))
DEFAULT_VARIANTS = ("epochs=1", "epochs=2", "epochs=3", "epochs=1,learning_rate=5e-5",
                    "epochs=2,learning_rate=5e-5")
_FIELDS = {"epochs": int, "batch_size": int, "learning_rate": float, "max_seq_length": int,
           "scale": float}


def parse_variant(text: str) -> dict:
    """`epochs=2,learning_rate=5e-5` -> {"epochs": 2, "learning_rate": 5e-05}."""
    out: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in _FIELDS:
            raise SystemExit(f"c5_variants: bad --variant {text!r}: use KEY=VALUE with KEY one of "
                             f"{', '.join(_FIELDS)}")
        try:
            out[key] = _FIELDS[key](value)
        except ValueError:
            raise SystemExit(f"c5_variants: bad value in --variant {text!r}: {part}") from None
    return out


def _hits(score: np.ndarray, gold: np.ndarray) -> dict:
    """metatool_ceiling's hit@1 / hit@5 / MRR, with the count of queries it is over."""
    return {"n": int(gold.size), **ceiling_hits(score, gold)} if gold.size else {"n": 0}


def evaluate(model_path: str, skills, dev, cold: set[str], cache: Path) -> dict:
    """Dev hit@k with the model alone (C0's semantic term), all / warm / cold."""
    from mythloop.router import get_embedder
    from mythloop.router.ranker import full_text, name_text

    embedder = get_embedder(model_path, cache_dir=cache)
    full = embedder.embed([full_text(s) for s in skills])
    names = embedder.embed([name_text(s.name) for s in skills])
    queries = embedder.embed([p.prompt for p in dev])
    score = np.maximum(queries @ full.T, queries @ names.T)
    index = {s.name: i for i, s in enumerate(skills)}
    gold = np.array([index[p.expected_skill] for p in dev])
    is_cold = np.array([p.expected_skill in cold for p in dev], dtype=bool)
    out = {"all": _hits(score, gold)}
    if cold:
        out["warm"] = _hits(score[~is_cold], gold[~is_cold])
        out["cold"] = _hits(score[is_cold], gold[is_cold])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Variants: KEY=VALUE[,KEY=VALUE] over "
                                            + ", ".join(_FIELDS) + "; the rest stays at C5's "
                                            "defaults (the sweep's settings from the pairs' "
                                            "lineage.json when it sits beside them).")
    parser.add_argument("--pairs", type=Path, required=True,
                        help="pairs.jsonl of a tuned model (STATE/models/ft-*/pairs.jsonl)")
    parser.add_argument("--sweep-json", type=Path,
                        help="that sweep's sweep.json: split dev into warm and cold tools")
    parser.add_argument("--variant", action="append", help="settings to try (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the result here")
    args = parser.parse_args(argv)
    variants = [parse_variant(v) for v in (args.variant or DEFAULT_VARIANTS)]
    if not args.pairs.is_file():
        raise SystemExit(f"c5_variants: no pairs file at {args.pairs}")

    from mythloop.router.embedder import default_model
    from mythloop.router.models import ModelStore
    from mythloop.router.tuning import TrainingPair, TuneSettings, fine_tune
    from mythloop.skills import load_catalog
    from mythloop.sweep.config import load_heldout

    pairs = [TrainingPair(**{k: row[k] for k in ("query", "skill", "text")})
             for row in map(json.loads, args.pairs.read_text(encoding="utf-8").splitlines())]
    lineage_file = args.pairs.parent / "lineage.json"
    lineage = json.loads(lineage_file.read_text(encoding="utf-8")) if lineage_file.is_file() else {}
    settings0 = TuneSettings(**{k: v for k, v in (lineage.get("settings") or {}).items()
                                if k in TuneSettings.__dataclass_fields__})
    cold = set(json.loads(args.sweep_json.read_text(encoding="utf-8")).get("cold_skills") or []
               ) if args.sweep_json else set()
    skills = load_catalog(METATOOL / "pool").skills
    dev = load_heldout(METATOOL / "dev.json")
    base = default_model()
    result = {
        "what": "C5 fine-tune settings on one sweep's trusted pairs; dev ranked by the tuned "
                "model alone (C0's semantic term, no blend)",
        "pairs_file": str(args.pairs), "pairs": len(pairs),
        "pairs_skills": len({p.skill for p in pairs}), "sweep_lineage": lineage.get("sweep_id"),
        "cold_skills": len(cold), "commit": _git_commit(), "cores": os.cpu_count(),
        "os": platform.platform(), "load_start": round(os.getloadavg()[0], 2), "rows": [],
    }
    with tempfile.TemporaryDirectory(prefix="c5-variants-") as tmp:
        store, cache = ModelStore(Path(tmp) / "models"), Path(tmp) / "embeddings"
        result["base"] = evaluate(base, skills, dev, cold, cache)
        print(f"[c5 variants] base model: {_line(result['base'])}", file=sys.stderr)
        for changes in variants:
            settings = replace(settings0, **changes)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            info = fine_tune(base, pairs, store, settings=settings)
            seconds = time.perf_counter() - t0
            row = {"settings": settings.to_dict(), "changed": changes,
                   "steps": info.lineage.get("steps"), "train_seconds": round(seconds, 1),
                   "load_before": round(load, 2),
                   "dev": evaluate(str(info.path), skills, dev, cold, cache)}
            result["rows"].append(row)
            print(f"[c5 variants] {_label(changes)}: {row['steps']} steps, {seconds:.0f} s; "
                  f"{_line(row['dev'])}", file=sys.stderr)
    result["load_end"] = round(os.getloadavg()[0], 2)
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    print(text)


def _label(changes: dict) -> str:
    return ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in changes.items()) or "C5's defaults"


def _line(dev: dict) -> str:
    return "; ".join(f"{part} hit@1 {d['hit@1']:.3f} hit@5 {d['hit@5']:.3f}"
                     for part, d in dev.items() if d.get("n"))


if __name__ == "__main__":
    main()
