"""Counter and status rules, through the real SQLite store and as the pure rule."""

from __future__ import annotations

import itertools

import pytest

from mythloop.verdicts import Counters, VerdictIn, VerdictStore, apply_verdict, next_status

_session = itertools.count()


@pytest.fixture()
def store(tmp_path):
    return VerdictStore(tmp_path / "store.db")


def feed(store: VerdictStore, name: str, verdicts: str) -> list[str]:
    """Write verdicts given as letters (G helpful, B harmful, N neutral); return statuses after each."""
    words = {"G": "HELPFUL", "B": "HARMFUL", "N": "NEUTRAL"}
    statuses = []
    for letter in verdicts:
        out = store.record_verdict(VerdictIn(f"s{next(_session)}", name, "test", words[letter],
                                             "a concrete reason text", "some query"))
        assert out.inserted
        statuses.append(out.after.status)
    return statuses


def test_helpful_counts_and_resets_streak(store):
    feed(store, "k", "BB")
    assert store.counters("k") == Counters(helpful=0, harmful=2, streak=2, status="active")
    feed(store, "k", "G")
    assert store.counters("k") == Counters(helpful=1, harmful=2, streak=0, status="active")


def test_neutral_changes_nothing_but_is_logged(store):
    feed(store, "k", "GB")
    before, version = store.counters("k"), store.version()
    feed(store, "k", "NNN")
    assert store.counters("k") == before
    assert [v["verdict"] for v in store.verdicts()].count("NEUTRAL") == 3
    assert store.version() == version + 3  # logged rows still bump the version


def test_three_harmful_in_a_row_archives(store):
    assert feed(store, "k", "BBB") == ["active", "active", "archived"]


def test_helpful_between_harmful_prevents_archive(store):
    assert feed(store, "k", "BBGBB")[-1] != "archived"
    assert store.counters("k").streak == 2


def test_active_to_suspect_by_ratio(store):
    # total 5, harmful 2: ratio 0.4 > 0.3
    assert feed(store, "k", "GBGBG") == ["active"] * 4 + ["suspect"]


def test_active_to_suspect_by_harmful_count(store):
    # 8 helpful then 4 harmful interleaved: ratio 4/15 < 0.3 but harmful > 3
    statuses = feed(store, "k", "GGGGGGGG" + "BGBGBGB")
    assert statuses[-2] == "active" and statuses[-1] == "suspect"
    assert store.counters("k").harmful == 4


def test_no_suspect_below_five_verdicts(store):
    assert feed(store, "k", "GBGB") == ["active"] * 4


def test_suspect_to_archived(store):
    statuses = feed(store, "k", "GBGBG" + "BBB")
    assert statuses[4] == "suspect" and statuses[-1] == "archived"


def test_archive_is_one_way(store):
    feed(store, "k", "BBB")
    assert set(feed(store, "k", "G" * 12)) == {"archived"}
    assert store.counters("k").helpful == 12


def test_status_transition_is_recorded_with_the_verdict(store):
    feed(store, "k", "BBB")
    assert [v["status_after"] for v in store.verdicts()] == ["active", "active", "archived"]


def test_suspect_back_to_active_rule():
    # Through verdicts alone this cannot happen: counters only grow and suspect needs
    # harmful >= 2, while recovery needs harmful <= 1; the rule is checked directly.
    assert next_status(Counters(helpful=20, harmful=1, streak=0, status="suspect")) == "active"
    assert next_status(Counters(helpful=5, harmful=1, streak=0, status="suspect")) == "suspect"
    assert next_status(Counters(helpful=30, harmful=2, streak=0, status="suspect")) == "suspect"
    assert apply_verdict(Counters(19, 1, 0, "suspect"), "HELPFUL").status == "active"


def test_unknown_verdict_is_refused(store):
    with pytest.raises(ValueError, match="unknown verdict"):
        store.record_verdict(VerdictIn("s", "k", "h", "GREAT", "a concrete reason"))
    assert store.verdicts() == []
