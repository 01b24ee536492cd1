"""C5's fine-tune settings tried on the trusted pairs of a real sweep (issue 41: "what was tried").
How it measures: docs/performance.md, "bench/c5_variants.py"."""

import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from common import METATOOL, note, part_main
from metatool_ceiling import _hits as ceiling_hits

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
            raise SystemExit(f"c5_variants: bad variant {text!r}: use KEY=VALUE with KEY one of "
                             f"{', '.join(_FIELDS)}")
        try:
            out[key] = _FIELDS[key](value)
        except ValueError:
            raise SystemExit(f"c5_variants: bad value in variant {text!r}: {part}") from None
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


def check(pairs: str = "", sweep_json: str | None = None,
          variants: tuple = DEFAULT_VARIANTS) -> list[dict]:
    """The variants' settings; one line (SystemExit) for a bad variant or a missing file."""
    out = [parse_variant(v) for v in variants]
    if not pairs or not Path(pairs).is_file():
        raise SystemExit(f"c5_variants: no pairs file at {pairs or '(none)'}: pass "
                         "--set pairs=STATE/models/ft-*/pairs.jsonl")
    if sweep_json and not Path(sweep_json).is_file():
        raise SystemExit(f"c5_variants: no sweep.json at {sweep_json}")
    return out


def run(pairs: str = "", sweep_json: str | None = None,
        variants: tuple = DEFAULT_VARIANTS) -> dict:
    """Each variant tuned on PAIRS; dev hit@k of the model alone, all / warm / cold (SWEEP_JSON)."""
    from mythloop.router.embedder import default_model
    from mythloop.router.models import ModelStore
    from mythloop.router.tuning import TrainingPair, TuneSettings, fine_tune
    from mythloop.skills import load_catalog
    from mythloop.sweep.config import load_heldout

    changes_list = check(pairs, sweep_json, variants)
    pairs_file = Path(pairs)
    rows = [TrainingPair(**{k: row[k] for k in ("query", "skill", "text")})
            for row in map(json.loads, pairs_file.read_text(encoding="utf-8").splitlines())]
    lineage_file = pairs_file.parent / "lineage.json"
    lineage = json.loads(lineage_file.read_text(encoding="utf-8")) if lineage_file.is_file() else {}
    settings0 = TuneSettings(**{k: v for k, v in (lineage.get("settings") or {}).items()
                                if k in TuneSettings.__dataclass_fields__})
    cold = set(json.loads(Path(sweep_json).read_text(encoding="utf-8")).get("cold_skills")
               or []) if sweep_json else set()
    skills = load_catalog(METATOOL / "pool").skills
    dev = load_heldout(METATOOL / "dev.json")
    base = default_model()
    result: dict = {"pairs_file": str(pairs_file), "pairs": len(rows),
                    "pairs_skills": len({p.skill for p in rows}),
                    "sweep_lineage": lineage.get("sweep_id"), "cold_skills": len(cold),
                    "variants": {}}
    with tempfile.TemporaryDirectory(prefix="c5-variants-") as tmp:
        store, cache = ModelStore(Path(tmp) / "models"), Path(tmp) / "embeddings"
        result["base"] = evaluate(base, skills, dev, cold, cache)
        for changes in changes_list:
            settings = replace(settings0, **changes)
            t0 = time.perf_counter()
            info = fine_tune(base, rows, store, settings=settings)
            seconds = time.perf_counter() - t0
            row = {"settings": settings.to_dict(), "steps": info.lineage.get("steps"),
                   "train_seconds": round(seconds, 1),
                   "dev": evaluate(str(info.path), skills, dev, cold, cache)}
            result["variants"][", ".join(f"{k}={v:g}" for k, v in changes.items())] = row
            note("c5_variants", f"{changes or 'defaults'}: {row['steps']} steps, "
                 f"{seconds:.0f} s; dev {row['dev']}")
    return result


if __name__ == "__main__":  # the harness runs it
    part_main("c5_variants")
