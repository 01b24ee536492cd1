"""C5 through the real sweep flow (issue 41), on the bundled fixtures with a simulated judge
(labelled as such in every output): each C5 replicate ranks its later rounds with its own
fine-tuned model, C0 keeps the base model, the models are recorded in sweep.json and as a
Prefect artifact; and a Ctrl-C during a fine-tune leaves no model and the rerun resumes.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from mythloop.fileio import read_jsonl
from mythloop.router.embedder import default_model, model_id_for
from mythloop.router.models import MODEL_ID_PATTERN, ModelStore
from mythloop.settings import get_settings
from mythloop.sweep import JudgeOptions, SweepConfig


def _rows(path: Path) -> list[dict]:
    return list(read_jsonl(path)) if path.exists() else []


def _semantic(rows: list[dict]) -> dict[tuple[str, str], float]:
    return {(r["prompt_id"], r["skill_name"]): r["breakdown"]["semantic"] for r in rows}


def _rank(rows: list[dict], prompt_id: str, skill: str) -> int:
    ranks = [r["rank"] for r in rows if r["prompt_id"] == prompt_id and r["skill_name"] == skill]
    return ranks[0] if ranks else 11


@pytest.mark.slow  # a fine-tune or two of the real model (about a minute or more)
@pytest.mark.usefixtures("prefect_harness")
def test_c5_ranks_later_rounds_with_its_own_tuned_model(tmp_path):
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from mythloop_flows.feedback_loop import sweep

    out = tmp_path / "sweep"
    sweep(SweepConfig(conditions=["c0", "c5"], rounds=2, replicates=2,
                      judge_options=JudgeOptions(noise=0.0, omit_rate=0.0, invent_rate=0.0),
                      results_dir=out))
    meta = json.loads((out / "sweep.json").read_text())
    assert set(meta["models"]) == {"c5-rep1", "c5-rep2"}  # C0 tunes nothing
    models = ModelStore(get_settings().models_dir)
    ids = {}
    for rep in (1, 2):
        records = meta["models"][f"c5-rep{rep}"]
        assert [r["round"] for r in records] == [1]
        assert all(r["trained"] and MODEL_ID_PATTERN.match(r["model_id"]) for r in records)
        ids[rep] = {r["model_id"] for r in records}
        for record in records:
            info = models.get(record["model_id"])
            assert info is not None and info.lineage["condition"] == "c5"
            assert info.lineage["replicate"] == rep and info.lineage["sweep_id"] == out.name
            assert info.lineage["base_model"] == model_id_for(default_model())
    assert not ids[1] & ids[2]  # one model per replicate: its own pairs and seed
    # C0 ranks with the base model every round; C5 with the base at round 0, tuned after.
    c0 = [_semantic(_rows(out / "c0-rep1" / f"round_{r}.jsonl")) for r in range(2)]
    c5 = [_semantic(_rows(out / "c5-rep1" / f"round_{r}.jsonl")) for r in range(2)]
    assert c0[0] == c0[1]
    shared = set(c0[0]) & set(c5[0])
    assert shared and all(c0[0][k] == c5[0][k] for k in shared)
    moved = set(c5[0]) & set(c5[1])
    assert any(abs(c5[0][k] - c5[1][k]) > 1e-4 for k in moved)
    # No poisoned twin rises above its real skill on a trap prompt under the tuned model.
    last = _rows(out / "c5-rep1" / "round_1.jsonl")
    traps = {(r["prompt_id"], r["expected_skill"], r["poisoned_twin"]) for r in last
             if r["prompt_kind"] == "trap" and r["poisoned_twin"]}
    assert traps
    for pid, gold, twin in traps:
        assert _rank(last, pid, gold) < _rank(last, pid, twin), pid
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["tuned-model-c5-rep1"])))
    assert found and any(out.name in (a.description or "") for a in found)


# ---- Ctrl-C during a fine-tune, through the real CLI -------------------------------------


@pytest.mark.slow
def test_ctrl_c_mid_fine_tune_leaves_no_model_and_the_rerun_resumes(tmp_path):
    from test_interrupts import EXE, _ctrl_c, _env, _kill_leftovers, _start, _text, _wait_for

    state, results = tmp_path / "state", tmp_path / "results"
    args = ["sweep", "--conditions", "c5", "--rounds", "2", "--noise", "0",
            "--results-dir", str(results)]
    progress = results / "c5-rep1" / "progress.json"
    # Many small steps, so the fine-tune is still under way when Ctrl-C comes.
    slow = {"MYTHLOOP_C5_EPOCHS": "10", "MYTHLOOP_C5_BATCH_SIZE": "2"}
    saved = {k: os.environ.get(k) for k in slow}
    os.environ.update(slow)
    try:
        proc = _start(args, state, "sweep")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    try:
        def round_0_done() -> bool:
            with contextlib.suppress(OSError, ValueError, KeyError):
                return json.loads(progress.read_text())["completed_rounds"] == [0]
            return False

        _wait_for("c5-rep1 round 0 done", round_0_done, proc)
        time.sleep(3.0)  # into the fine-tune (model loaded, steps under way)
        code = _ctrl_c(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)
    err = _text(state, "sweep", "err")
    assert code == 130, err[-3000:]
    assert "fine-tuned" not in _text(state, "sweep", "out")  # stopped inside the fine-tune
    assert not (results / "c5-rep1" / "round_1.jsonl").exists()
    store = ModelStore(state / "models")
    assert store.saved() == [] and store.partials() == []

    # the rerun resumes under the same settings (they are part of the sweep's fingerprint)
    rerun = subprocess.run([EXE, *args], env={**_env(state), **slow}, capture_output=True,
                           text=True, timeout=1800)
    _kill_leftovers(state)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "already complete, skipped" in rerun.stdout and "fine-tuned" in rerun.stdout
    records = json.loads((results / "sweep.json").read_text())["models"]["c5-rep1"]
    assert [r["round"] for r in records] == [1] and records[0]["trained"]
    assert [m.id for m in store.saved()] == [records[0]["model_id"]] and store.partials() == []
