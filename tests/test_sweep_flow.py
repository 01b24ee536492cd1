"""The feedback-loop sweep flow under the Prefect harness: outputs, resume, retries, learning."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import settle, wait_for

from mythloop.fileio import read_jsonl
from mythloop.sweep import JudgeOptions, SweepConfig

pytestmark = pytest.mark.usefixtures("prefect_harness")

FAKES = Path(__file__).parent / "fakes"


def _sweep(config: SweepConfig):
    from mythloop_flows.feedback_loop import sweep

    return sweep(config)


def _sweep_with_turn_tags(config: SweepConfig, turns: int
                          ) -> tuple[dict, list[list[str]], list[str]]:
    """Run the sweep; also return the tags and the names of its learning-turn task runs, read
    from the API.

    The server records task runs from their events after the flow returns, so this waits
    (up to a minute) until it shows the `turns` expected.
    """
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterParentFlowRunId,
        TaskRunFilter,
        TaskRunFilterName,
    )

    from mythloop_flows.feedback_loop import sweep

    state = sweep(config, return_state=True)
    parent = state.state_details.flow_run_id
    with get_client(sync_client=True) as client:
        shards = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[parent])))
        seen = settle(lambda: client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[s.id for s in shards])),
            task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="learn "))), 60,
            until=lambda runs: len(runs) >= turns)
    return state.result(), [sorted(t.tags) for t in seen], sorted(t.name for t in seen)


def _comparable(metrics_path: Path) -> dict:
    """Everything the analysis computed; only the run's own metadata (paths, times) differs."""
    metrics = json.loads(metrics_path.read_text())
    metrics.pop("sweep", None)
    return metrics


def test_sweep_leaves_rounds_turns_raw_texts_metrics_and_report(tmp_path):
    out = tmp_path / "s"
    result, turn_tags, names = _sweep_with_turn_tags(
        SweepConfig(rounds=2, replicates=1, results_dir=out), turns=2 * 2)
    # a simulated judge learns a round in one `learn` task, and calls no model: its task
    # runs take no slot of the global `llm` limit
    assert len(turn_tags) == 2 * 2 and all(tags == [] for tags in turn_tags)
    # the UI numbers rounds as the terminal and the report do, from 1 (files from 0)
    assert names == [f"learn {s}-rep1 round {r}" for s in ("c0", "c3") for r in (1, 2)]
    for shard in ("c0-rep1", "c3-rep1"):
        for r in (0, 1):
            rows = read_jsonl(out / shard / f"round_{r}.jsonl")
            assert rows and {row["round"] for row in rows} == {r}
            prompts = {row["prompt_id"] for row in rows}
            assert {"t_regex", "n_sql", "null_recipe"} <= prompts
            assert any(p.startswith("h_") for p in prompts)  # held-out prompts are measured
            assert max(row["rank"] for row in rows) == 10
        turns = read_jsonl(out / shard / "turns.jsonl")
        # learned prompts only: 10 in-distribution + 3 null per round, never held-out ones
        assert len(turns) == 2 * 13
        assert not any(t["prompt_id"].startswith("h_") for t in turns)
        assert all(t["simulated"] and t["status"] == "ok" for t in turns)
        assert (out / shard / "raw" / "r1_t_regex.text.md").read_text().startswith(
            "[simulated judge")
        assert json.loads((out / shard / "progress.json").read_text())["completed_rounds"] == [0, 1]
    assert (out / "metrics.json").is_file()
    report = (out / "report.md").read_text()
    assert "SIMULATED" in report
    assert result.report == str(out / "report.md")
    # C0 stores verdicts too (same data both sides), but its ranking never uses them.
    c0_rows = read_jsonl(out / "c0-rep1" / "round_1.jsonl")
    assert all(row["score"] == row["breakdown"]["semantic"] for row in c0_rows)
    assert any(row["helpful_count"] or row["harmful_count"] for row in c0_rows)


def test_oracle_judge_makes_c3_beat_c0_on_the_traps(tmp_path):
    out = tmp_path / "oracle"
    _sweep(SweepConfig(rounds=4, replicates=1, judge="oracle", results_dir=out))
    last = 3

    def trap_stats(shard: str) -> tuple[float, list[str]]:
        rows = [r for r in read_jsonl(out / shard / f"round_{last}.jsonl")
                if r["prompt_kind"] == "trap"]
        traps = {r["prompt_id"] for r in rows}
        hits = sum(any(r["prompt_id"] == p and r["rank"] == 1
                       and r["skill_name"] == r["expected_skill"] for r in rows) for p in traps)
        twins_in_top5 = [r["skill_name"] for r in rows
                         if r["rank"] <= 5 and r["skill_name"] == r["poisoned_twin"]]
        return hits / len(traps), twins_in_top5

    c0_hit1, c0_twins = trap_stats("c0-rep1")
    c3_hit1, c3_twins = trap_stats("c3-rep1")
    assert c3_hit1 > c0_hit1
    assert c3_twins == []
    assert len(c0_twins) >= 3  # without the blend the traps keep biting


def test_a_round_whose_turns_all_fail_alike_stops_the_sweep_failed(tmp_path, monkeypatch):
    """Every learning turn of round 1 fails with the real claude CLI's "Not logged in": the
    sweep stops there (mythloop.sweep.failing), its flow run ends Failed, each turn is logged,
    the round stays incomplete (the rerun after a login redoes it), and no night, report or
    later round is written."""
    from mythloop.analysis.history import history_path
    from mythloop.sweep.failing import SweepFailing
    from mythloop_flows.feedback_loop import sweep

    monkeypatch.setenv("FAKE_MODE", "auth")
    out = tmp_path / "auth"
    nights = history_path()
    before = nights.read_bytes() if nights.exists() else None
    state = sweep(SweepConfig(conditions=["c3"], rounds=2, judge="claude",
                              judge_options=JudgeOptions(command=str(FAKES / "claude")),
                              results_dir=out), return_state=True)
    assert state.is_failed(), state
    with pytest.raises(SweepFailing, match=r"13 of 13 learning turns of c3-rep1 round 1 failed "
                                           r"for the same reason: .*not authenticated"):
        state.result()
    turns = read_jsonl(out / "c3-rep1" / "turns.jsonl")
    assert len(turns) == 13
    assert all(t["status"] == "failed" and "login" in t["error"].lower() for t in turns)
    progress = out / "c3-rep1" / "progress.json"
    assert not progress.exists() or json.loads(progress.read_text())["completed_rounds"] == []
    assert not (out / "c3-rep1" / "round_1.jsonl").exists()  # round 2 never measured
    assert not (out / "report.md").exists()
    assert (nights.read_bytes() if nights.exists() else None) == before


def test_failing_reason_counts_a_round_that_fails_mostly_alike():
    from types import SimpleNamespace

    from mythloop.sweep.failing import failing_reason

    def rows(*errors):
        return [SimpleNamespace(ok=e is None, status="ok" if e is None else "failed", error=e)
                for e in errors]

    auth = "claude (model sonnet): not authenticated (Not logged in)"
    assert failing_reason(rows(auth, auth, auth)) == (auth, 3, 3)
    assert failing_reason(rows(auth, auth, None)) == (auth, 2, 3)  # more than half
    assert failing_reason(rows(auth, None)) is None  # half is not more than half
    timeouts = [f"claude: no answer within {s}s" for s in (300, 301, 299)]
    assert failing_reason(rows(*timeouts, None))[1:] == (3, 4)  # numbers do not tell apart
    assert failing_reason(rows(auth, "claude: rate limited (429)", "network", None)) is None
    assert failing_reason([]) is None


def test_a_retried_learning_turn_does_not_double_count(tmp_path, monkeypatch):
    """Each turn (its own task run here, 8 at once) fails once with a retriable error while
    saving its raw text; Prefect retries it, and each verdict is stored once."""
    from mythloop.llm import NetworkError
    from mythloop.sweep import condition

    real_write = condition.write_text_atomic
    failed: set[str] = set()

    def flaky_write(path: Path, text: str) -> None:
        if path.name.endswith(".raw.txt") and path.name not in failed:
            failed.add(path.name)
            raise NetworkError("connection reset while saving the turn (injected)")
        real_write(path, text)

    monkeypatch.setattr(condition, "write_text_atomic", flaky_write)
    out = tmp_path / "retry"
    _sweep(SweepConfig(conditions=["c3"], rounds=1, results_dir=out, task_per_turn=True,
                       concurrency=8))
    assert len(failed) == 13  # every turn failed once ...
    turns = read_jsonl(out / "c3-rep1" / "turns.jsonl")
    assert all(t["status"] == "ok" for t in turns)  # ... and succeeded on its retry
    con = sqlite3.connect(out / "c3-rep1" / "store.db")
    tables = {row[0] for row in con.execute("select name from sqlite_master where type='table'")}
    table = "verdicts" if "verdicts" in tables else sorted(t for t in tables if "verdict" in t)[0]
    stored = con.execute(f"select count(*) from {table}").fetchone()[0]
    applied = sum(len(t["applied"]) for t in turns)
    assert applied > 0 and stored == applied
    # the counters moved once per verdict, not once per attempt
    helpful = sum(a["verdict"] == "HELPFUL" for t in turns for a in t["applied"])
    assert con.execute("select coalesce(sum(helpful), 0) from skills").fetchone()[0] == helpful


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


@pytest.mark.slow
def test_a_killed_sweep_resumes_to_the_same_metrics(tmp_path):
    args = ["sweep", "--rounds", "3", "--replicates", "1", "--noise", "0.3"]
    killed = tmp_path / "killed"
    env = dict(os.environ, PREFECT_API_URL=_api_url())
    exe = str(Path(sys.executable).with_name("mythloop"))
    proc = subprocess.Popen([exe, *args, "--results-dir", str(killed)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    progress = killed / "c0-rep1" / "progress.json"

    def two_rounds_done() -> bool:
        try:
            return json.loads(progress.read_text())["completed_rounds"] == [0, 1]
        except (OSError, ValueError, KeyError):
            return False

    try:
        wait_for(two_rounds_done, 600, "c0 rounds 0 and 1", alive=proc, interval=0.05)
        assert proc.poll() is None, "the sweep finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)  # mid-way: c0 round 2 (or c3) under way
    finally:
        proc.wait(timeout=60)
    assert not (killed / "metrics.json").exists()

    result = subprocess.run([exe, *args, "--results-dir", str(killed)], env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "already complete, skipped" in result.stdout

    uninterrupted = tmp_path / "whole"
    _sweep(SweepConfig(rounds=3, replicates=1, judge_options=JudgeOptions(noise=0.3),
                       results_dir=uninterrupted))
    assert _comparable(killed / "metrics.json") == _comparable(uninterrupted / "metrics.json")
    for shard in ("c0-rep1", "c3-rep1"):
        ours = [{k: v for k, v in t.items() if k != "elapsed_s"}
                for t in read_jsonl(killed / shard / "turns.jsonl")]
        theirs = [{k: v for k, v in t.items() if k != "elapsed_s"}
                  for t in read_jsonl(uninterrupted / shard / "turns.jsonl")]
        assert ours == theirs
