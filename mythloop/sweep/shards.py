"""The shards of a fanned-out sweep: their names, and what each left in the shared results dir."""

from __future__ import annotations

import json
from pathlib import Path

from mythloop.fileio import read_records
from mythloop.sweep.config import SweepConfig
from mythloop.sweep.records import TurnRow

__all__ = ["shard_plan", "shard_summary", "rounds_done", "ShardIncomplete"]


class ShardIncomplete(RuntimeError):
    """A shard's flow run ended, but its sandbox lacks rounds it should hold."""


def shard_plan(config: SweepConfig) -> list[tuple[str, int]]:
    """(condition, replicate) pairs in the order the in-process sweep runs them."""
    return [(cond, rep) for rep in range(1, config.replicates + 1) for cond in config.conditions]


def shard_summary(results_dir: Path, cond: str, replicate: int, rounds: int) -> dict:
    """The dict condition_run returns, rebuilt from the shard's own files.

    A shard that ran on another worker returns nothing the parent can read, but its
    sandbox is on shared storage: progress.json says which rounds completed, turns.jsonl
    which learning turns failed.
    """
    shard_dir = Path(results_dir) / f"{cond}-rep{replicate}"
    try:
        completed = sorted(json.loads((shard_dir / "progress.json").read_text())
                           ["completed_rounds"])
    except (OSError, ValueError, KeyError):
        completed = []
    missing = sorted(set(range(rounds)) - set(completed))
    if missing:
        raise ShardIncomplete(
            f"shard {cond}-rep{replicate} finished but {shard_dir} lacks rounds "
            f"{', '.join(map(str, missing))}: is {results_dir} the same storage on every "
            "worker? Rerun the sweep with the same results dir to resume it")
    failed = sum(1 for row in read_records(shard_dir / "turns.jsonl", TurnRow) if not row.ok)
    return {"condition": cond, "replicate": replicate, "dir": str(shard_dir),
            "completed_rounds": completed, "failed_turns": failed}


def rounds_done(results_dir: Path, shard_names: list[str]) -> int:
    """Rounds completed so far over the named shards (their progress.json files)."""
    done = 0
    for name in shard_names:
        try:
            done += len(json.loads((Path(results_dir) / name / "progress.json").read_text())
                        ["completed_rounds"])
        except (OSError, ValueError, KeyError):
            continue
    return done
