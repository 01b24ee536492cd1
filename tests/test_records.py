"""Typed records: sweep rows and film results round-trip, older rows still load, a malformed
JSONL row is one clear error naming its file and line, and Prefect persists the models."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from mythloop.fileio import RecordError, append_jsonl, jsonl_text, read_jsonl, read_records
from mythloop.mythos.records import (
    CodegenResult,
    FilmManifest,
    MediaResult,
    RenderEntry,
    SceneCode,
    SceneRecord,
    SceneRender,
    StageOutcome,
    StitchResult,
)
from mythloop.mythos.rundir import Manifest
from mythloop.sweep.records import (
    AppliedVerdict,
    CatalogEntry,
    MeasurementRow,
    MeasureResult,
    TurnAnswer,
    TurnRow,
)

DATA = Path(__file__).parent / "data" / "results_small"

MEASUREMENT = {
    "round": 0, "cond": "c3", "replicate": 1, "prompt_id": "t_regex", "prompt_kind": "trap",
    "expected_skill": "regex-debugger", "poisoned_twin": "naive-regex", "rank": 1,
    "skill_name": "naive-regex", "tier": "poisoned", "score": 0.7,
    "breakdown": {"semantic": 0.7, "final": 0.7}, "status": "active", "helpful_count": 0,
    "harmful_count": 0, "streak": 0,
}
OK_TURN = {
    "round": 0, "cond": "c3", "replicate": 1, "prompt_id": "t_regex", "prompt_kind": "trap",
    "expected_skill": "regex-debugger", "session_id": "c3-rep1-r0-t_regex", "status": "ok",
    "error": None, "elapsed_s": 0.01, "backend": "simulated", "simulated": True,
    "model": "simulated-judge", "ranked_top5": ["naive-regex", "regex-debugger"],
    "catalog_tiers": {"naive-regex": "poisoned", "regex-debugger": "real"},
    "tags": [{"name": "naive-regex", "verdict": "HARMFUL", "reason": "backtracks"}],
    "applied": [{"name": "naive-regex", "verdict": "HARMFUL", "tier": "poisoned"}],
    "off_catalog": [], "invented": [], "rejected": [], "parse_failures": 0, "text_len": 40,
    "text_tail": "...", "stderr_head": "",
}


# --- sweep rows -----------------------------------------------------------------------
def test_measurement_row_round_trips_with_the_same_keys_in_the_same_order():
    row = MeasurementRow.model_validate(MEASUREMENT, strict=True)
    assert row.rank == 1 and row.breakdown["final"] == 0.7
    assert json.loads(jsonl_text([row])) == MEASUREMENT
    assert list(row.model_dump(mode="json")) == list(MEASUREMENT)


def test_turn_row_leaves_attempts_out_unless_the_turn_failed():
    ok = TurnRow.model_validate(OK_TURN, strict=True)
    assert ok.ok and isinstance(ok.applied[0], AppliedVerdict)
    assert ok.applied[0].tier == "poisoned"
    assert list(ok.model_dump(mode="json")) == list(OK_TURN)  # no "attempts": null
    failed = TurnRow.model_validate({**OK_TURN, "status": "timeout", "error": "timed out",
                                     "attempts": 3, "tags": [], "applied": []})
    dumped = failed.model_dump(mode="json")
    assert not failed.ok and dumped["attempts"] == 3
    keys = list(dumped)
    assert keys.index("error") + 1 == keys.index("attempts") == keys.index("elapsed_s") - 1


def test_step_results_round_trip():
    entry = CatalogEntry(name="regex-debugger", description="Step through a regex", tier="real")
    result = MeasureResult(rows=10, catalogs={"t_regex": [entry]}, in_distribution_hit_at_3=0.5)
    assert MeasureResult.model_validate_json(result.model_dump_json()) == result
    answer = TurnAnswer(session_id="s", text="hi", elapsed_s=0.2, backend="simulated",
                        simulated=True, model="m")
    assert TurnAnswer.model_validate(answer.model_dump(mode="json")) == answer


def test_rows_of_the_checked_in_results_dir_still_load():
    """Rows written before records were models (ok turns with `attempts`, measurement rows
    without `breakdown`) validate, and a kept row is written back with exactly its keys."""
    turns = read_records(DATA / "c3-rep1" / "turns.jsonl", TurnRow)
    assert turns and all(t.attempts == 1 for t in turns if t.ok)
    original = read_jsonl(DATA / "c3-rep1" / "turns.jsonl")
    assert [t.model_dump(mode="json", exclude_unset=True) for t in turns] == original
    rows = read_records(DATA / "c0-rep1" / "round_0.jsonl", MeasurementRow)
    assert rows and all(r.breakdown == {} for r in rows)
    assert "breakdown" not in rows[0].model_dump(exclude_unset=True)


def test_unknown_keys_are_kept():
    row = TurnRow.model_validate({**OK_TURN, "judge_latency_ms": 12})
    assert row.model_dump(mode="json")["judge_latency_ms"] == 12


def test_malformed_row_is_one_line_naming_file_and_line(tmp_path):
    path = tmp_path / "turns.jsonl"
    append_jsonl(path, TurnRow.model_validate(OK_TURN))
    append_jsonl(path, {**OK_TURN, "round": "zero"})
    append_jsonl(path, TurnRow.model_validate(OK_TURN))
    with pytest.raises(RecordError) as info:
        read_records(path, TurnRow)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:2: not a valid TurnRow row: field 'round'")
    # a number is no string, a bool no number: validation is strict
    path.write_text(json.dumps({**MEASUREMENT, "rank": True}) + "\n", encoding="utf-8")
    with pytest.raises(RecordError, match=r":1: .*field 'rank'"):
        read_records(path, MeasurementRow)


def test_torn_last_line_is_dropped_but_a_broken_middle_line_is_not(tmp_path):
    path = tmp_path / "turns.jsonl"
    whole = jsonl_text([TurnRow.model_validate(OK_TURN)])
    path.write_text(whole + whole[:25], encoding="utf-8")  # a kill mid-append
    assert len(read_records(path, TurnRow)) == 1
    path.write_text(whole[:25] + "\n" + whole, encoding="utf-8")
    with pytest.raises(RecordError, match=r":1: not a valid TurnRow row: malformed JSON"):
        read_records(path, TurnRow)
    assert read_records(tmp_path / "missing.jsonl", TurnRow) == []


def test_analysis_reports_a_row_of_the_wrong_type_as_a_data_issue(tmp_path):
    import shutil

    from mythloop.analysis.load import load_results

    root = tmp_path / "results"
    shutil.copytree(DATA, root)
    round_file = root / "c0-rep1" / "round_0.jsonl"
    lines = round_file.read_text(encoding="utf-8").splitlines()
    bad = json.loads(lines[1])
    bad["score"] = "0.5"
    lines[1] = json.dumps(bad)
    round_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    results = load_results(root)
    [issue] = [i for i in results.issues if i.file == "c0-rep1/round_0.jsonl"]
    assert issue.line == 2
    assert issue.problem == "malformed row: field 'score': Input should be a valid number"
    assert len(results.sandboxes[("c0", 1)].rounds[0]) == len(lines) - 1


# --- film records ---------------------------------------------------------------------
def test_film_step_results_round_trip_and_old_cached_dicts_validate():
    codegen = CodegenResult(code="x", scene_name="A", header="h",
                            scenes=[SceneCode(index=1, name="A", code="c")], raw="r",
                            model="m", seconds=1.5)
    assert CodegenResult.model_validate(codegen.model_dump()) == codegen
    assert CodegenResult.model_validate(codegen) is codegen  # a model passes through
    stage = StageOutcome.model_validate({"artifact": {"a": 1}, "raw": "{}", "retried": False,
                                         "model": "m", "seconds": 0.1, "simulated": False})
    assert stage.artifact == {"a": 1}
    render = SceneRender(ok=True, kind="ok", video_path="/v.mp4", cache="hit",
                         layout_findings=[])
    assert SceneRender.model_validate_json(render.model_dump_json()) == render
    assert StitchResult(video_path="f.mp4", duration=3.0).duration == 3.0
    media = MediaResult.model_validate({
        "subtitles": {"srt": "f.srt", "vtt": "f.vtt", "cues": 4, "burnt": False,
                      "soft_track": True},
        "voice": None, "scene_spans": [1.0, 2.0], "duration": 3.0, "poster": "p.png"})
    assert media.subtitles.cues == 4 and media.voice is None


def test_manifest_writes_only_the_keys_that_were_set(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    manifest = Manifest(run_dir, prompt="p", backend="offline")
    record = SceneRecord(index=1, name="A", label="scene-01", ok=None, attempts=0,
                         cache=None, render_seconds=0.0, renders=[], repairs=[])
    record.renders = [RenderEntry(attempt=0, ok=True, kind="ok", cache="miss", seconds=1.0,
                                  message="rendered")]
    manifest.update(scenes=[record], film={"file": "f.mp4", "duration": 2.5})
    manifest.append("renders", RenderEntry(scene=1, attempt=0, kind="scene_error"))
    on_disk = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert set(on_disk) == {"run_id", "created_utc", "stages", "prompt", "backend", "scenes",
                            "film", "renders"}
    assert on_disk["scenes"][0] == {
        "index": 1, "name": "A", "label": "scene-01", "ok": None, "attempts": 0,
        "cache": None, "render_seconds": 0.0, "renders": [
            {"attempt": 0, "ok": True, "kind": "ok", "cache": "miss", "seconds": 1.0,
             "message": "rendered"}], "repairs": []}
    assert on_disk["renders"] == [{"scene": 1, "attempt": 0, "kind": "scene_error"}]
    reloaded = Manifest.load(run_dir)
    assert reloaded.record.film.duration == 2.5 and reloaded.data == on_disk


def test_manifest_keeps_unknown_keys_and_rejects_a_broken_one(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps(
        {"run_id": "run", "stages": [{"stage": "intent", "seconds": 0.1, "tokens": 9}],
         "from_a_newer_version": {"x": 1}}), encoding="utf-8")
    manifest = Manifest.load(run_dir)
    assert manifest.record.stages[0].stage == "intent"
    manifest.update(model_calls=3)
    on_disk = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert on_disk["from_a_newer_version"] == {"x": 1}
    assert on_disk["stages"] == [{"stage": "intent", "seconds": 0.1, "tokens": 9}]
    with pytest.raises(ValueError):
        manifest.update(scenes="not a list")
    (run_dir / "manifest.json").write_text('{"stages": 3}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"manifest.json: not a valid film manifest: "
                                         r"field 'stages'"):
        Manifest.load(run_dir)
    assert isinstance(FilmManifest().scenes, list)


# --- Prefect persists the models --------------------------------------------------------
def test_prefect_persists_and_reloads_the_models(prefect_harness):
    """A cached task's result comes back from the result store (JSON serializer), as the
    model it returned."""
    from prefect import flow

    from mythloop_tasks.common import mythloop_task

    calls = []

    @mythloop_task(name="records-probe", cache_key_fn=lambda ctx, params: params["key"])
    def probe(key: str) -> tuple:
        calls.append(key)
        return (SceneRender(ok=False, kind="scene_error", log_tail="boom", cache="miss",
                            layout_findings=None),
                MeasureResult(rows=2, catalogs={"p": [CatalogEntry(name="s", tier="real")]}),
                TurnRow.model_validate({**OK_TURN, "status": "failed", "attempts": 2}))

    @flow
    def run(key: str):
        return probe(key, return_state=True)

    key = f"records-{uuid.uuid4().hex}"
    first = run(key)
    second = run(key)
    assert calls == [key] and second.name == "Cached"
    render, measured, turn = second.result()
    assert isinstance(render, SceneRender) and render == first.result()[0]
    assert isinstance(measured, MeasureResult)
    assert measured.catalogs["p"][0] == CatalogEntry(name="s", tier="real")
    assert isinstance(turn, TurnRow) and turn.attempts == 2 and not turn.ok


def test_a_resumed_sweep_stops_on_a_malformed_turn_row_naming_it(prefect_harness, tmp_path):
    """The resume path reads turns.jsonl with TurnRow: a bad line stops the sweep with one
    line naming the file and line (the CLI prints it and exits 2), instead of being lost."""
    from mythloop.sweep import SweepConfig
    from mythloop_flows.feedback_loop import sweep

    out = tmp_path / "s"
    config = SweepConfig(rounds=2, replicates=1, conditions=["c0"], results_dir=out)
    sweep(config)
    shard = out / "c0-rep1"
    (shard / "progress.json").write_text(json.dumps({"completed_rounds": [0]}),
                                         encoding="utf-8")  # round 1 is redone
    turns = shard / "turns.jsonl"
    lines = turns.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    row["status"] = None
    turns.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        sweep(config)
    assert str(info.value).startswith(
        f"{turns}:1: not a valid TurnRow row: field 'status': Input should be 'ok', 'failed' "
        "or 'timeout'")  # the turn statuses of mythloop.vocab
    assert "\n" not in str(info.value)
    assert turns.read_text(encoding="utf-8").splitlines()[1:] == lines[1:]  # nothing lost


def test_the_round_line_shows_the_headline_metrics_that_were_measured():
    """The terminal's per-round line: trap-win, hit@5, hit@3, held-out hit@1, only those
    the round measured (a sweep without held-out prompts has no held-out figure), each
    under the split it was measured on (an in-distribution hit@3 once followed "held-out
    hit@1" as if it were held-out too)."""
    full = MeasureResult(rows=1, catalogs={}, in_distribution_hit_at_3=0.9,
                         in_distribution_hit_at_5=1.0, trap_win_rate=0.8, heldout_hit_at_1=0.44)
    assert full.round_line() == ("in-distribution trap-win 0.80, hit@5 1.00, hit@3 0.90; "
                                 "held-out hit@1 0.44")
    no_heldout = MeasureResult(rows=1, catalogs={}, in_distribution_hit_at_3=0.9,
                               in_distribution_hit_at_5=0.9, trap_win_rate=0.0)
    assert "held-out" not in no_heldout.round_line()
    assert MeasureResult(rows=0, catalogs={}).round_line() == ""
