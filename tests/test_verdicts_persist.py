"""persist_verdicts: only the catalog shown is judged; bad reasons and verdicts are rejected with a reason."""

from __future__ import annotations

import pytest

from mythloop.verdicts import (
    VerdictStore,
    persist_verdicts,
    reason_problem,
    render_self_eval_contract,
)

KNOWN = {"regex-debugger", "naive-regex-matcher", "pytest-fixtures", "docker-compose-basics"}
SHOWN = ["regex-debugger", "naive-regex-matcher"]


def persist(store, tags, embedder, session="turn-1"):
    return persist_verdicts(store, SHOWN, tags, session_id=session, host="gemini",
                            query="my regex hangs on long inputs", embedder=embedder, known_skills=KNOWN)


def test_sorts_tags_into_applied_off_catalog_invented_rejected(tmp_path, embedder):
    store = VerdictStore(tmp_path / "s.db")
    files_before = set(tmp_path.rglob("*"))
    tags = [
        {"name": "regex-debugger", "verdict": "HELPFUL", "reason": "its atomic group rewrite fixed the hang"},
        {"name": "naive-regex-matcher", "verdict": "HARMFUL", "reason": "recommends (a+)+ which backtracks"},
        {"name": "pytest-fixtures", "verdict": "HELPFUL", "reason": "known skill but not shown this turn"},
        {"name": "../../etc/passwd", "verdict": "HELPFUL", "reason": "a name the model made up entirely"},
        {"name": "regex-debugger", "verdict": "GREAT", "reason": "unknown verdict word used here"},
        {"name": "naive-regex-matcher", "verdict": "NEUTRAL", "reason": "n/a"},
    ]
    res = persist(store, tags, embedder)
    assert [(a["name"], a["verdict"], a["status"]) for a in res.applied] == [
        ("regex-debugger", "HELPFUL", "active"), ("naive-regex-matcher", "HARMFUL", "active")]
    assert res.off_catalog == ["pytest-fixtures", "../../etc/passwd"]
    assert res.invented == ["../../etc/passwd"]
    assert [r["reason"] for r in res.rejected] == [
        "unknown verdict 'GREAT'", "reason shorter than 8 characters"]
    assert store.counters("pytest-fixtures").helpful == 0
    assert {r["skill_name"] for r in store.verdicts()} == set(SHOWN)
    snap = store.snapshot()
    assert len(snap.reasons) == 2 and all(r.vec is not None and r.model_id == embedder.model_id
                                          for r in snap.reasons)
    assert set(tmp_path.rglob("*")) - files_before <= {tmp_path / "s.db-wal", tmp_path / "s.db-shm"}


def test_retried_turn_applies_nothing_twice(tmp_path, embedder):
    store = VerdictStore(tmp_path / "s.db")
    tags = [{"name": "regex-debugger", "verdict": "HELPFUL", "reason": "its atomic group rewrite fixed the hang"}]
    assert len(persist(store, tags, embedder).applied) == 1
    retry = persist(store, tags, embedder)
    assert retry.rejected == []
    assert [(a["name"], a["already_recorded"]) for a in retry.applied] == [("regex-debugger", True)]
    assert store.counters("regex-debugger").helpful == 1


@pytest.mark.parametrize("reason, problem", [
    ("", "shorter"), ("ok fine", "shorter"), ("   none   ", "shorter"), ("Not applicable", "placeholder"),
    ("placeholder", "placeholder"), ("........", "placeholder"), ("<reason here>", "placeholder"),
    ("TODO: fill in later", "placeholder"), ("todo list was sorted correctly", None), ("WHY, WITH EVIDENCE", "placeholder"), ("[your reason]", "placeholder"),
    ("it's the fixture pattern", None),
])
def test_reason_problems(reason, problem):
    found = reason_problem(reason)
    assert (found is None) if problem is None else (problem in found)


def test_contract_text_names_the_tag_format_and_verdicts():
    text = render_self_eval_contract()
    assert '<skill-used name="' in text
    for word in ("HELPFUL", "HARMFUL", "NEUTRAL", "Never invent", "no tags", "evidence"):
        assert word in text
