"""Concurrent learning turns: the same seed gives the same results at any concurrency, a kill
mid-round with turns in flight resumes to the same metrics, retries count once.

The real-model path is played by the fake `gemini` CLI in judge mode (tests/fakes): it answers
with the simulated judge's verdict tags after a delay, through the real CLI backend, so the
turns of a round really are in flight together and end in a shuffled order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for

from mythloop.fileio import read_jsonl
from mythloop.sweep import JudgeOptions, SweepConfig
from mythloop.sweep.records import SweepOutcome

pytestmark = pytest.mark.usefixtures("prefect_harness")

FAKES = Path(__file__).parent / "fakes"
GEMINI = JudgeOptions(command=str(FAKES / "gemini"))


def _sweep(config: SweepConfig) -> SweepOutcome:
    from mythloop_flows.feedback_loop import sweep

    return sweep(config)


def _metrics(results_dir: Path) -> dict:
    metrics = json.loads((results_dir / "metrics.json").read_text())
    metrics.pop("sweep", None)  # the run's own metadata: paths, times
    return metrics


def _turns(shard_dir: Path) -> list[dict]:
    """The turn log without the per-turn wall time."""
    return [{k: v for k, v in t.items() if k != "elapsed_s"}
            for t in read_jsonl(shard_dir / "turns.jsonl")]


def _verdicts(shard_dir: Path) -> list[tuple]:
    """The verdict log in write order, with the status each write left."""
    con = sqlite3.connect(shard_dir / "store.db")
    try:
        return con.execute("select session_id, skill_name, verdict, status_after from verdicts"
                           " order by id").fetchall()
    finally:
        con.close()


def _same_results(a: Path, b: Path, shards: tuple[str, ...]) -> None:
    assert _metrics(a) == _metrics(b)
    for shard in shards:
        assert _turns(a / shard) == _turns(b / shard)
        assert _verdicts(a / shard) == _verdicts(b / shard)
        rounds = sorted(p.name for p in (a / shard).glob("round_*.jsonl"))
        assert rounds == sorted(p.name for p in (b / shard).glob("round_*.jsonl"))
        for name in rounds:
            assert (a / shard / name).read_text() == (b / shard / name).read_text()


@pytest.fixture
def judge_cli(monkeypatch):
    """The fake gemini answers as the simulated judge, after 0-0.4 s (order shuffled)."""
    monkeypatch.setenv("FAKE_MODE", "judge")
    monkeypatch.setenv("FAKE_DELAY", "0-0.4")


@pytest.mark.slow  # two sweeps, ~29 s in the last full run
def test_same_seed_same_metrics_and_turn_rows_at_concurrency_1_and_8(tmp_path, judge_cli):
    base = {"conditions": ["c3"], "rounds": 2, "judge": "gemini", "judge_options": GEMINI}
    _sweep(SweepConfig(**base, concurrency=1, results_dir=tmp_path / "one"))
    _sweep(SweepConfig(**base, concurrency=8, results_dir=tmp_path / "eight"))
    turns = _turns(tmp_path / "eight" / "c3-rep1")
    assert len(turns) == 2 * 13 and all(t["status"] == "ok" for t in turns)
    assert sum(len(t["applied"]) for t in turns) > 0  # verdicts really were written
    # rows in prompt order, not in the order the turns ended
    order = [p.id for p in _learning_order()]
    assert [t["prompt_id"] for t in turns] == order * 2
    _same_results(tmp_path / "one", tmp_path / "eight", ("c3-rep1",))


def _learning_order():
    from mythloop.data import data_path
    from mythloop.sweep import load_prompts

    prompts, _ = load_prompts(data_path("fixtures", "prompts.yaml"))
    return [p for p in prompts if p.learned]


def test_simulated_judge_learn_step_batched_or_per_turn_gives_the_same_results(tmp_path):
    base = {"rounds": 2, "replicates": 1, "judge_options": JudgeOptions(noise=0.3)}
    batched = _sweep(SweepConfig(**base, results_dir=tmp_path / "batched"))
    _sweep(SweepConfig(**base, task_per_turn=True, concurrency=8, parallel_shards=2,
                       results_dir=tmp_path / "per-turn"))
    assert batched.failed_turns == 0
    _same_results(tmp_path / "batched", tmp_path / "per-turn",
                  ("c0-rep1", "c3-rep1"))


def test_eight_concurrent_turns_with_injected_retries_lose_and_double_nothing(
        tmp_path, judge_cli, monkeypatch):
    """Every turn's first call is rate-limited (a retriable 429): Prefect retries it while the
    other turns run; each verdict is stored once and the results match a run without errors."""
    base = {"conditions": ["c3"], "rounds": 1, "judge": "gemini", "judge_options": GEMINI,
            "concurrency": 8}
    _sweep(SweepConfig(**base, results_dir=tmp_path / "clean"))
    flaky = tmp_path / "flaky-markers"
    flaky.mkdir()
    monkeypatch.setenv("FAKE_FLAKY_DIR", str(flaky))
    result = _sweep(SweepConfig(**base, results_dir=tmp_path / "retried"))
    assert len(list(flaky.iterdir())) == 13  # every turn failed once ...
    assert result.failed_turns == 0  # ... and succeeded on its retry
    shard = tmp_path / "retried" / "c3-rep1"
    turns = read_jsonl(shard / "turns.jsonl")
    applied = sum(len(t["applied"]) for t in turns)
    assert applied > 0 and len(_verdicts(shard)) == applied
    con = sqlite3.connect(shard / "store.db")
    helpful = sum(a["verdict"] == "HELPFUL" for t in turns for a in t["applied"])
    assert con.execute("select coalesce(sum(helpful), 0) from skills").fetchone()[0] == helpful
    con.close()
    _same_results(tmp_path / "clean", tmp_path / "retried", ("c3-rep1",))


def test_concurrent_turns_wait_for_the_servers_llm_limit(tmp_path, judge_cli, monkeypatch):
    """--concurrency 8 against a server whose `llm` limit is 2: never more than 2 model calls
    at once; the other turns wait for a slot and the round completes."""
    from prefect.client.orchestration import get_client

    from mythloop.llm import LLM_TAG

    times = tmp_path / "calls.txt"
    monkeypatch.setenv("FAKE_CALL_TIMES", str(times))
    monkeypatch.setenv("FAKE_DELAY", "0.5")
    with get_client(sync_client=True) as client:
        client.create_concurrency_limit(tag=LLM_TAG, concurrency_limit=2)
        # Prefect's task engine remembers for a few seconds that a set of tags had no limit
        # (prefect.concurrency.services): the previous test's tagged turns may have filled
        # that memory, and the new limit would go unseen until it expires.
        with contextlib.suppress(ImportError, AttributeError):
            from prefect.concurrency.services import _no_limits_cache

            _no_limits_cache.clear()
        try:
            result = _sweep(SweepConfig(conditions=["c3"], rounds=1, judge="gemini",
                                        judge_options=GEMINI, concurrency=8,
                                        results_dir=tmp_path / "limited"))
        finally:
            client.delete_concurrency_limit_by_tag(LLM_TAG)
    assert result.failed_turns == 0
    calls = [tuple(map(float, line.split())) for line in times.read_text().splitlines()]
    assert len(calls) == 13
    events = sorted([(start, 1) for start, _ in calls] + [(end, -1) for _, end in calls],
                    key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert peak <= 2


def test_a_retried_batched_learn_step_counts_each_verdict_once(tmp_path):
    """The learn task fails after it has written the round's verdicts; Prefect runs it again
    and the repeated writes are no-ops."""
    from mythloop.llm import NetworkError
    from mythloop.sweep.condition import ConditionRun

    real = ConditionRun.learn_round
    calls = []

    def flaky(self, *args, **kwargs):
        rows = real(self, *args, **kwargs)
        calls.append(len(rows))
        if len(calls) == 1:
            raise NetworkError("connection reset after the verdicts were written (injected)")
        return rows

    mp = pytest.MonkeyPatch()
    mp.setattr(ConditionRun, "learn_round", flaky)
    try:
        _sweep(SweepConfig(conditions=["c3"], rounds=1, results_dir=tmp_path / "retried"))
    finally:
        mp.undo()
    _sweep(SweepConfig(conditions=["c3"], rounds=1, results_dir=tmp_path / "clean"))
    assert calls == [13, 13]
    _same_results(tmp_path / "clean", tmp_path / "retried", ("c3-rep1",))


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value()


@pytest.mark.slow
def test_a_sweep_killed_with_eight_turns_in_flight_resumes_to_the_same_metrics(
        tmp_path, monkeypatch):
    args = ["sweep", "--judge", "gemini", "--conditions", "c3", "--rounds", "2",
            "--replicates", "1"]
    monkeypatch.setenv("FAKE_MODE", "judge")
    monkeypatch.setenv("PATH", f"{FAKES}{os.pathsep}{os.environ['PATH']}")  # `gemini` = the fake
    env = dict(os.environ, PREFECT_API_URL=_api_url(), FAKE_DELAY="1")
    exe = str(Path(sys.executable).with_name("mythloop"))
    killed = tmp_path / "killed"
    shard = killed / "c3-rep1"
    proc = subprocess.Popen([exe, *args, "--concurrency", "8", "--results-dir", str(killed)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        # Round 1 under way: its first answers are in, the other turns are still in flight.
        wait_for(lambda: list((shard / "raw").glob("r1_*.text.md")), 300,
                 "round 1's first answers", alive=proc, interval=0.02)
        assert proc.poll() is None, "the sweep finished before it could be killed"
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert len(list((shard / "raw").glob("r1_*.text.md"))) < 13
    assert not (killed / "metrics.json").exists()

    # resumed at another concurrency: placement, not content
    result = subprocess.run([exe, *args, "--concurrency", "3", "--results-dir", str(killed)],
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "round 1 of 2: already complete, skipped" in result.stdout

    whole = tmp_path / "whole"
    monkeypatch.setenv("FAKE_DELAY", "0-0.2")
    _sweep(SweepConfig(conditions=["c3"], rounds=2, judge="gemini", concurrency=8,
                       results_dir=whole))
    _same_results(killed, whole, ("c3-rep1",))


def test_the_cli_calls_of_a_round_can_be_ended_at_once_on_the_way_out():
    """Ctrl-C or a crash while turns are in flight: their CLIs (own sessions, out of reach of
    the terminal's Ctrl-C) are ended at once, not waited for until their deadline."""
    import contextvars
    import threading

    from mythloop.llm.runner import cli_owner, kill_owned_clis, run_cli

    owner, other = object(), object()
    results: dict[str, object] = {}

    def call(name: str, who: object) -> None:
        cli_owner.set(who)
        results[name] = run_cli(["sleep", "30"], timeout=60)

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(call, name, who))
               for name, who in (("a", owner), ("b", owner), ("c", other))]
    for thread in threads:
        thread.start()
    from mythloop.llm import runner

    wait_for(lambda: len(runner._LIVE) >= 3, 30, "all three calls started", interval=0.05)
    assert kill_owned_clis(owner) == 2
    for thread in threads[:2]:
        thread.join(timeout=20)
        assert not thread.is_alive()
    assert all(results[name].rc == -signal.SIGKILL for name in ("a", "b"))
    assert threads[2].is_alive()  # another owner's call is left alone
    assert kill_owned_clis(other) == 1
    threads[2].join(timeout=20)
    assert kill_owned_clis(owner) == 0


def test_concurrency_and_placement_stay_out_of_the_resume_fingerprint():
    plain = SweepConfig(rounds=2)
    placed = SweepConfig(rounds=2, concurrency=8, task_per_turn=True, parallel_shards=2)
    assert plain.fingerprint() == placed.fingerprint()
    assert not plain.per_turn_tasks and placed.per_turn_tasks
    assert SweepConfig(judge="gemini").per_turn_tasks  # a real model: a task per turn, always
    with pytest.raises(ValueError):
        SweepConfig(concurrency=0)
