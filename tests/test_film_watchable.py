"""Films people can watch: subtitles timed from the scenes, an offline voice-over, the layout
check inside each render (and its scoped repair), a poster frame. Tiny recorded films keep
the real Manim renders short (see test_film_scenes)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from test_film_scenes import SCENE_1, SCENE_2_FIXED, _film, _manifest, _tiny_cassettes

from mythloop.mythos.media.avmux import duration_of, probe
from mythloop.mythos.media.filmmedia import narration_for_scenes
from mythloop.mythos.plan.request import FilmRequest

SCENE_3_OFF_FRAME = '''class TinyFilm03Formula(TinyBase):
    def construct(self):
        self.open_scene()
        self.add(Square(color=CORAL).shift(3 * LEFT))
        self.add(Text("far too far right", font_size=30).shift(9 * RIGHT))
        self.wait(1)
'''
SCENE_3_FIXED = SCENE_3_OFF_FRAME.replace("shift(9 * RIGHT)", "shift(2 * RIGHT)")


def _cue_times(srt: str) -> list[tuple[float, float]]:
    def secs(stamp: str) -> float:
        h, m, rest = stamp.split(":")
        s, ms = rest.split(",")
        return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000

    return [(secs(a), secs(b)) for a, b in
            re.findall(r"(\d\d:\d\d:\d\d,\d{3}) --> (\d\d:\d\d:\d\d,\d{3})", srt)]


def test_narration_follows_acts_or_is_shared_out():
    curriculum = {"acts": [{"act_number": 2, "narrative": "Second. Still second."},
                           {"act_number": 1, "narrative": "First act here."}]}
    assert narration_for_scenes(curriculum, 2) == [["First act here."],
                                                   ["Second.", "Still second."]]
    assert narration_for_scenes(curriculum, 3) == [["First act here."], ["Second."],
                                                   ["Still second."]]
    assert narration_for_scenes({}, 2) == [[], []]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_voiced_film_has_one_audio_track_in_step_and_subtitles_per_scene(tmp_path,
                                                                        monkeypatch, capsys):
    topic = "tiny scenes voiced"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_tiny_cassettes(
        tmp_path / "cassettes", topic, SCENE_2_FIXED)))
    state = _film(FilmRequest(prompt=topic, backend="replay", render=True, voice="espeak",
                              runs_dir=tmp_path / "runs"))
    assert state.is_completed(), state.message
    result = state.result()
    film = Path(result.video_path)
    manifest = _manifest(result.run_dir)
    kinds = sorted(s["codec_type"] for s in probe(film)["streams"])
    assert kinds == ["audio", "subtitle", "video"]
    video_s, audio_s = duration_of(film, "video"), duration_of(film, "audio")
    assert abs(audio_s - video_s) <= 1.0
    # the narration runs longer than the one-second scenes: they are held, not cut off
    assert manifest["voice"]["held"] and video_s > sum(s["duration"] for s in manifest["scenes"])
    # the length printed is the finished film's (held frames included), said once
    said = [ln for ln in capsys.readouterr().out.splitlines()
            if re.search(r"\d s\b|\d s\)", ln) and ln.startswith(("[film] stitch",
                                                                    "[film] subtitles"))]
    assert len(said) == 1 and said[0].endswith(f"film {video_s:.1f} s)"), said
    srt = (film.parent / "film.srt").read_text()
    assert (film.parent / "film.vtt").read_text().startswith("WEBVTT")
    spans = manifest["film"]["scene_spans"]
    edges = [sum(spans[:i]) for i in range(len(spans) + 1)]
    cues = _cue_times(srt)
    assert all(0 <= a < b <= video_s + 0.05 for a, b in cues)
    for start, end in zip(edges, edges[1:], strict=False):  # at least one cue per scene
        assert any(start - 0.01 <= a and b <= end + 0.01 for a, b in cues)
    assert Path(manifest["poster"]).read_bytes()[:4] == b"\x89PNG"
    # no text: nothing for the text rules; the tiny scenes leave their shapes, so each cut to
    # the next scene is hard (the last scene's end is the film's)
    assert [[f["kind"] for f in scene["layout"]] for scene in manifest["scenes"]] == \
        [["hard_cut"]] * (len(manifest["scenes"]) - 1) + [[]]


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_layout_findings_get_one_scoped_repair(tmp_path, monkeypatch):
    topic = "tiny scenes layout"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_tiny_cassettes(
        tmp_path / "cassettes", topic, SCENE_3_FIXED,
        scenes=(SCENE_1, SCENE_2_FIXED, SCENE_3_OFF_FRAME), repaired="scene-03")))
    state = _film(FilmRequest(prompt=topic, backend="replay", render=True, layout_repair=True,
                              runs_dir=tmp_path / "runs"))
    assert state.is_completed(), state.message
    manifest = _manifest(state.result().run_dir)
    [repair] = manifest["repairs"]
    assert repair["scene"] == 3 and "off_frame" in repair["failure"]
    third = manifest["scenes"][2]
    assert [r["kind"] for r in third["renders"]] == ["ok", "ok"]  # rendered, then repaired
    assert third["layout"] == [] and third["ok"] is True
    assert "2 * RIGHT" in (Path(third["file"])).read_text()
    assert json.loads(json.dumps(manifest["subtitles"]))["soft_track"] is True


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_layout_findings_without_a_model_are_warnings_and_say_so(tmp_path, monkeypatch, capsys):
    """A replay holding no repair for the findings: one warning line per finding and one line
    saying no model can repair; the film finishes with the scene's video (no MissingCassette)."""
    topic = "tiny scenes layout unrepaired"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_tiny_cassettes(
        tmp_path / "cassettes", topic, SCENE_2_FIXED,
        scenes=(SCENE_1, SCENE_2_FIXED, SCENE_3_OFF_FRAME), repaired="scene-02")))
    state = _film(FilmRequest(prompt=topic, backend="replay", render=True, layout_repair=True,
                              runs_dir=tmp_path / "runs"))
    assert state.is_completed(), state.message
    manifest = _manifest(state.result().run_dir)
    assert not manifest.get("repairs")
    third = manifest["scenes"][2]
    assert third["ok"] is True and [f["kind"] for f in third["layout"]] == ["off_frame"]
    out = capsys.readouterr().out
    every = [ln for ln in out.splitlines() if ln.startswith("[film] warning: layout")]
    # the tiny scenes add their shapes and leave them: each cut to the next scene is hard,
    # said once, under the scene that ends, and kept in its layout findings
    cuts = [ln for ln in every if " hard_cut: " in ln]
    assert [ln.split()[3] for ln in cuts] == ["scene-01", "scene-02"]
    assert "'Square' vanish(es) in one frame" in cuts[0]
    assert [f["kind"] for f in manifest["scenes"][0]["layout"]] == ["hard_cut"]
    warnings = [ln for ln in every if ln not in cuts]
    assert warnings == [ln for ln in warnings if "scene-03 t=" in ln and "off_frame" in ln]
    assert len(warnings) == 1 and "far too far right" in warnings[0]
    said = [ln for ln in out.splitlines() if "not repaired" in ln]
    assert len(said) == 1 and "no recorded repair-scene-03-1" in said[0]
    assert manifest["warnings"] == [said[0].removeprefix("[film] ")]
    assert "MissingCassette" not in out
