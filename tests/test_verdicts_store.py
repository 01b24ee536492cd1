"""Verdict store: idempotent retries, contexts kept, and concurrent writers that lose nothing."""

from __future__ import annotations

import multiprocessing
import threading
from collections import Counter as Tally

import numpy as np

from mythloop.verdicts import VerdictIn, VerdictStore

SKILLS = ("alpha", "beta", "gamma")


def verdict_for(i: int) -> str:
    return "HARMFUL" if i % 4 == 0 else "HELPFUL"


def write_batch(db_path: str, writer: str, n: int, shared: int) -> None:
    """Write n verdicts of our own and `shared` verdicts every writer also writes."""
    store = VerdictStore(db_path)
    for i in range(n):
        store.record_verdict(VerdictIn(f"{writer}-{i}", SKILLS[i % 3], "h", verdict_for(i),
                                       f"reason number {i} from {writer}", f"query {i}"))
    for i in range(shared):
        store.record_verdict(VerdictIn(f"shared-{i}", SKILLS[i % 3], "h", verdict_for(i),
                                       f"shared reason {i}", f"query {i}"))
    store.close()


def assert_consistent(store: VerdictStore, expected_rows: int) -> None:
    rows = store.verdicts()
    assert len(rows) == expected_rows
    assert len({(r["session_id"], r["skill_name"], r["host"]) for r in rows}) == expected_rows
    tally = Tally((r["skill_name"], r["verdict"]) for r in rows)
    for name in SKILLS:
        c = store.counters(name)
        assert (c.helpful, c.harmful) == (tally[(name, "HELPFUL")], tally[(name, "HARMFUL")])


def test_retried_write_is_a_noop(tmp_path):
    store = VerdictStore(tmp_path / "s.db")
    item = VerdictIn("turn-1", "alpha", "gemini", "HARMFUL", "teaches nested quantifiers", "q",
                     np.ones(4, np.float32) / 2, np.ones(4, np.float32) / 2, "m")
    first = store.record_verdict(item)
    version = store.version()
    second = store.record_verdict(item)
    assert first.inserted and not second.inserted
    assert second.after == first.after
    assert store.version() == version
    assert len(store.verdicts()) == 1 and len(store.snapshot().reasons) == 1
    # same turn, another host is a different row
    assert store.record_verdict(VerdictIn("turn-1", "alpha", "claude", "HARMFUL", "same reason text")).inserted


def test_contexts_keep_the_most_recent_per_polarity(tmp_path):
    from mythloop.verdicts.store import CONTEXTS_KEPT

    store = VerdictStore(tmp_path / "s.db")
    vec = np.array([1, 0], np.float32)
    for i in range(CONTEXTS_KEPT + 2):
        store.record_verdict(VerdictIn(f"t{i}", "alpha", "h", "HELPFUL", f"helpful reason {i}",
                                       f"query {i}", vec, vec, "m"))
    store.record_verdict(VerdictIn("t-bad", "alpha", "h", "HARMFUL", "harmful reason", "query bad", vec, vec, "m"))
    snap = store.snapshot()
    helpful = [c.text for c in snap.contexts if not c.harmful]
    assert helpful == [f"query {i}" for i in range(2, CONTEXTS_KEPT + 2)]
    assert [c.text for c in snap.contexts if c.harmful] == ["query bad"]
    assert len(snap.reasons) == CONTEXTS_KEPT + 3
    assert np.array_equal(snap.reasons[0].vec, vec) and snap.reasons[0].model_id == "m"


def test_other_connection_sees_write_immediately(tmp_path):
    a, b = VerdictStore(tmp_path / "s.db"), VerdictStore(tmp_path / "s.db")
    v = b.version()
    a.record_verdict(VerdictIn("t", "alpha", "h", "HELPFUL", "a concrete reason"))
    assert b.version() == v + 1 and b.counters("alpha").helpful == 1


def test_four_threads_lose_no_verdict(tmp_path):
    db = str(tmp_path / "s.db")
    VerdictStore(db)
    threads = [threading.Thread(target=write_batch, args=(db, f"t{k}", 40, 15)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert_consistent(VerdictStore(db), 4 * 40 + 15)


def test_two_processes_lose_no_verdict(tmp_path):
    db = str(tmp_path / "s.db")
    VerdictStore(db)
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold torch threads
    procs = [ctx.Process(target=write_batch, args=(db, f"p{k}", 60, 20)) for k in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert_consistent(VerdictStore(db), 2 * 60 + 20)
