"""A noise study: one ordinary sweep per simulated-judge noise level under one results dir.

    D/sweep.json            {"study": "noise", "levels": [0.0, 0.2, 0.4], "level_dirs": {...}}
    D/noise-0.00/           a complete ordinary sweep results dir (sweep.json, sandboxes,
    D/noise-0.20/           metrics.json, report.md, plots), resumable on its own
    D/report.md, D/metrics.json, D/noise_curve.png   the study (mythloop.analysis.study)

A sweep with a single noise level keeps the ordinary layout: no study file, no level dir.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

from mythloop.fileio import write_json_atomic
from mythloop.sweep.config import SweepConfig

__all__ = ["STUDY_KIND", "level_dir_name", "level_config", "normalise_levels", "prepare_study_dir",
           "read_study", "study_fingerprint", "sweep_key"]

STUDY_KIND = "noise"
NOISE_JUDGES = {"simulated"}  # the only judge whose verdicts a noise level changes


def normalise_levels(levels: list[float]) -> list[float]:
    """Distinct levels in ascending order, each in 0..1; ValueError otherwise."""
    out = sorted({round(float(x), 4) for x in levels})
    bad = [x for x in out if not 0.0 <= x <= 1.0]
    if bad:
        raise ValueError(f"noise level(s) {', '.join(map(str, bad))} outside 0..1")
    if not out:
        raise ValueError("at least one noise level is needed")
    return out


def level_dir_name(noise: float) -> str:
    """`noise-0.20`: the level's own results dir inside the study dir."""
    return f"noise-{noise:.2f}"


def level_config(config: SweepConfig, root: Path, noise: float) -> SweepConfig:
    """The ordinary sweep config of one level (its own results dir and judge noise)."""
    return config.model_copy(update={
        "results_dir": root / level_dir_name(noise),
        "judge_options": config.judge_options.model_copy(update={"noise": noise}),
    })


def study_fingerprint(config: SweepConfig) -> str:
    """What must match for a rerun of a study to resume it: the config apart from noise."""
    base = config.model_copy(update={
        "judge_options": config.judge_options.model_copy(update={"noise": 0.0})})
    return hashlib.sha256(f"study:{base.fingerprint()}".encode()).hexdigest()[:16]


def sweep_key(judge: str, noise: float | None, persuade: float = 0.0) -> str:
    """The artifact key of a sweep: one history per judge and, for the simulated judge,
    per noise level (`simulated-noise-0.20`) and, for a judge a skill can persuade, per
    probability (`simulated-noise-0.20-persuade-0.50`)."""
    if judge in NOISE_JUDGES and noise is not None:
        attack = f"-persuade-{persuade:.2f}" if persuade > 0 else ""
        return f"{judge}-noise-{noise:.2f}{attack}"
    return judge


def read_study(root: Path) -> dict | None:
    """The study record of D/sweep.json, or None when D holds an ordinary sweep."""
    try:
        meta = json.loads((Path(root) / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) and meta.get("study") == STUDY_KIND else None


def check_study_dir(config: SweepConfig) -> None:
    """Refuse (ValueError, one line) a results dir that holds something other than this
    study; writes nothing (the CLI calls it before Prefect starts)."""
    if config.judge not in NOISE_JUDGES:
        raise ValueError(f"several noise levels need --judge simulated (judge {config.judge!r} "
                         "has no noise setting)")
    if config.results_dir is None:
        return
    root = Path(config.results_dir).expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise ValueError(f"results dir {root} is a file: pass a folder to --results-dir")
    if not (root / "sweep.json").exists():
        return
    previous = read_study(root)
    if not previous:
        raise ValueError(f"{root} holds an ordinary (single-level) sweep; choose another "
                         "--results-dir for a noise study")
    if previous.get("fingerprint") != study_fingerprint(config):
        raise ValueError(f"{root} holds a different noise study (other conditions, judge, "
                         "pool or seed); choose another --results-dir or delete it")


def prepare_study_dir(config: SweepConfig, root: Path, levels: list[float]) -> Path:
    """Create D and write D/sweep.json; a rerun with the same config resumes (levels merge)."""
    root = Path(root).expanduser().resolve()
    check_study_dir(config.model_copy(update={"results_dir": root}))
    root.mkdir(parents=True, exist_ok=True)
    meta_path = root / "sweep.json"
    previous: dict = read_study(root) or {}
    merged = normalise_levels([*previous.get("levels", []), *levels])
    write_json_atomic(meta_path, {
        "study": STUDY_KIND,
        "sweep_id": root.name,
        "fingerprint": study_fingerprint(config),
        "levels": merged,
        "level_dirs": {f"{x:.2f}": level_dir_name(x) for x in merged},
        "judge": config.judge,
        "simulated": config.simulated,
        "conditions": config.conditions,
        "rounds": config.rounds,
        "replicates": config.replicates,
        "config": config.model_dump(mode="json", exclude={"results_dir"}),
        "started_utc": previous.get("started_utc") or datetime.now(UTC).isoformat(),
        "finished_utc": None,
    })
    return root


def finish_study(root: Path) -> None:
    """Stamp D/sweep.json with the time every level finished."""
    meta_path = Path(root) / "sweep.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["finished_utc"] = datetime.now(UTC).isoformat()
    write_json_atomic(meta_path, meta)
