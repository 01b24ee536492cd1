"""Scale-out pieces that need no server: shard bookkeeping, config, process cleanup."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from waiting import settle

from mythloop.procs import kill_marked, marked_pids, start_process, stop_process
from mythloop.sweep import SweepConfig
from mythloop.sweep.shards import ShardIncomplete, rounds_done, shard_plan, shard_summary
from mythloop_app.scale.stack import TAG_ENV


def tagged_pids(tag: str) -> list[int]:
    return marked_pids(TAG_ENV, tag)


def kill_tagged(tag: str) -> list[int]:
    return kill_marked(TAG_ENV, tag)


def _shard(results, name, rounds, turns):
    shard = results / name
    shard.mkdir(parents=True)
    (shard / "progress.json").write_text(json.dumps({"completed_rounds": rounds}))
    (shard / "turns.jsonl").write_text("".join(
        json.dumps({"round": 0, "prompt_id": f"p{i}", "status": s}) + "\n"
        for i, s in enumerate(turns)))


def test_shard_plan_follows_the_in_process_order():
    config = SweepConfig(conditions=["c3", "c0"], replicates=2)
    assert shard_plan(config) == [("c3", 1), ("c0", 1), ("c3", 2), ("c0", 2)]


def test_shard_summary_rebuilds_what_condition_run_returns(tmp_path):
    _shard(tmp_path, "c3-rep2", [1, 0], ["ok", "failed", "timeout", "ok"])
    summary = shard_summary(tmp_path, "c3", 2, rounds=2)
    assert summary == {"condition": "c3", "replicate": 2, "dir": str(tmp_path / "c3-rep2"),
                       "completed_rounds": [0, 1], "failed_turns": 2}


def test_shard_summary_names_a_shard_with_missing_rounds(tmp_path):
    _shard(tmp_path, "c0-rep1", [0], ["ok"])
    with pytest.raises(ShardIncomplete, match=r"c0-rep1 .* lacks rounds 1, 2"):
        shard_summary(tmp_path, "c0", 1, rounds=3)
    with pytest.raises(ShardIncomplete, match="c3-rep1"):  # never written at all
        shard_summary(tmp_path, "c3", 1, rounds=1)


def test_rounds_done_counts_over_shards_and_skips_missing(tmp_path):
    _shard(tmp_path, "c0-rep1", [0, 1], [])
    _shard(tmp_path, "c3-rep1", [0], [])
    (tmp_path / "c0-rep2").mkdir()
    (tmp_path / "c0-rep2" / "progress.json").write_text("{torn")
    assert rounds_done(tmp_path, ["c0-rep1", "c3-rep1", "c0-rep2", "c3-rep2"]) == 3


def test_placement_fields_do_not_change_the_fingerprint_and_serialise(tmp_path):
    plain = SweepConfig(rounds=2, results_dir=tmp_path)
    fanned = plain.model_copy(update={"shard_deployment": "condition-run/condition-run",
                                      "shard_timeout": 60.0})
    assert plain.fingerprint() == fanned.fingerprint()  # resume across placements
    assert plain.fingerprint() != SweepConfig(rounds=2, seed=7).fingerprint()
    # What run_deployment sends: JSON parameters that validate back to the same config.
    sent = json.loads(json.dumps(fanned.model_dump(mode="json")))
    assert SweepConfig.model_validate(sent) == fanned
    with pytest.raises(ValueError):
        SweepConfig(shard_timeout=0)


_ESCAPER = """
import os, subprocess, sys, time
# A grandchild in a session of its own, as Prefect's workers start flow runs.
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
time.sleep(120)
"""


def test_stop_and_kill_tagged_leave_no_tagged_process(tmp_path):
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG_ENV: tag}
    proc = start_process([sys.executable, "-c", _ESCAPER], env=env, log_path=tmp_path / "p.log")
    assert len(settle(lambda: tagged_pids(tag), 30, until=lambda pids: len(pids) >= 2,
                      interval=0.1)) == 2
    stop_process(proc, grace=5.0)
    escaped = tagged_pids(tag)
    assert len(escaped) == 1  # its own session: the group kill missed it
    assert kill_tagged(tag) == escaped
    assert tagged_pids(tag) == []
    assert proc.returncode is not None


def test_tagged_pids_ignores_other_processes():
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert other.pid not in tagged_pids(uuid.uuid4().hex)
    finally:
        other.kill()
        other.wait()
