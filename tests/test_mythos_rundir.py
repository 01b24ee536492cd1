"""Run directory naming, uniqueness, atomic JSON writes and the manifest."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

from mythloop.mythos import rundir
from mythloop.mythos.rundir import Manifest, create_run_dir, slugify, write_json_atomic


@pytest.mark.parametrize(
    ("prompt", "slug"),
    [
        ("the heat equation", "the-heat-equation"),
        ("Euler's identity", "euler-s-identity"),
        ("\ufeff  Explain QFT!!  ", "explain-qft"),
        ("???", "film"),
        ("a" * 100, "a" * 48),
    ],
)
def test_slugify(prompt, slug):
    assert slugify(prompt) == slug


def test_run_dir_name(tmp_path):
    path = create_run_dir(tmp_path, "the heat equation")
    assert path.parent == tmp_path / "mythos" and path.is_dir()
    assert re.fullmatch(r"\d{8}-\d{6}-the-heat-equation", path.name)


def test_two_runs_in_the_same_second_get_distinct_dirs(tmp_path, monkeypatch):
    frozen = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

    class FrozenClock(datetime):
        @classmethod
        def now(cls, tz=None):
            return frozen

    monkeypatch.setattr(rundir, "datetime", FrozenClock)
    first = create_run_dir(tmp_path, "same prompt")
    second = create_run_dir(tmp_path, "same prompt")
    third = create_run_dir(tmp_path, "same prompt")
    assert first.name == "20260102-030405-same-prompt"
    assert second.name == "20260102-030405-same-prompt-2"
    assert third.name == "20260102-030405-same-prompt-3"


def test_write_json_atomic_leaves_no_temp_files(tmp_path):
    target = tmp_path / "sub" / "data.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "text": "é"})
    assert json.loads(target.read_text(encoding="utf-8")) == {"a": 2, "text": "é"}
    assert [p.name for p in target.parent.iterdir()] == ["data.json"]


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "data.json"
    write_json_atomic(target, {"ok": True})
    circular: dict = {}
    circular["self"] = circular
    with pytest.raises(ValueError):
        write_json_atomic(target, circular)
    assert json.loads(target.read_text(encoding="utf-8")) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["data.json"]


def test_manifest_is_on_disk_after_every_update(tmp_path):
    run_dir = create_run_dir(tmp_path, "manifest test")
    manifest = Manifest(run_dir, prompt="manifest test", backend="offline")

    def on_disk() -> dict:
        return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))

    assert on_disk()["run_id"] == run_dir.name and on_disk()["prompt"] == "manifest test"
    manifest.add_stage({"stage": "intent", "seconds": 0.1})
    assert on_disk()["stages"] == [{"stage": "intent", "seconds": 0.1}]
    manifest.add_stage({"stage": "intent", "retried": True})
    assert on_disk()["stages"] == [{"stage": "intent", "seconds": 0.1, "retried": True}]
    manifest.append("renders", {"attempt": 0, "kind": "scene_error"})
    manifest.update(video_path=None, scene_name="DemoJourney")
    data = on_disk()
    assert data["renders"] == [{"attempt": 0, "kind": "scene_error"}] and data["scene_name"] == "DemoJourney"
    assert Manifest.load(run_dir).data == data
    assert sorted(p.name for p in run_dir.iterdir()) == ["manifest.json"]


def test_loading_a_manifest_from_a_non_run_dir_fails_clearly(tmp_path):
    with pytest.raises(FileNotFoundError, match="film run directory"):
        Manifest.load(tmp_path)
