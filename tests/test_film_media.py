"""Subtitles, offline voice (espeak-ng) and the ffmpeg steps that put them into a film."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mythloop.mythos.media.avmux import (
    duration_of,
    hold_last_frame,
    mux_film,
    poster_frame,
    probe,
    speech_track,
)
from mythloop.mythos.media.subtitles import (
    SceneNarration,
    cues_for_scenes,
    format_srt,
    format_vtt,
    write_subtitles,
)
from mythloop.mythos.media.tts import TTSError, engine_names, engine_status, get_engine

needs_ffmpeg = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg not installed")
needs_espeak = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason="espeak-ng not installed (make setup installs it)")


def _clip(path: Path, seconds: float, colour: str = "blue") -> Path:
    subprocess.run(["ffmpeg", "-y", "-v", "error", "-f", "lavfi", "-i",
                    f"color=c={colour}:s=320x180:r=15:d={seconds}", "-c:v", "libx264",
                    "-pix_fmt", "yuv420p", str(path)], check=True)
    return path


def test_cues_stay_inside_their_scene_and_follow_word_counts():
    scenes = [SceneNarration(4.0, ["Heat flows from hot to cold.", "Always."]),
              SceneNarration(0.0, ["a scene of no length says nothing"]),
              SceneNarration(6.0, []),
              SceneNarration(5.0, ["The rate depends on curvature of the temperature."])]
    cues = cues_for_scenes(scenes)
    assert [c.text for c in cues] == ["Heat flows from hot to cold.", "Always.",
                                      "The rate depends on curvature of the temperature."]
    first, second, third = cues
    assert 0 <= first.start < first.end <= second.start < second.end <= 4.0
    assert (first.end - first.start) > (second.end - second.start)  # six words vs one
    assert 10.0 <= third.start < third.end <= 15.0  # after 4 s + 0 s + 6 s of silence


def test_srt_and_vtt_formats(tmp_path):
    cues = cues_for_scenes([SceneNarration(3725.5, ["one line"])])
    srt = format_srt(cues)
    assert re.fullmatch(r"1\n00:00:00,000 --> 01:02:05,\d{3}\none line\n", srt)
    vtt = format_vtt(cues)
    assert vtt.startswith("WEBVTT\n\n00:00:00.000 --> 01:02:05.")
    srt_path, vtt_path = write_subtitles(cues, tmp_path / "film")
    assert srt_path.read_text() == srt and vtt_path.name == "film.vtt"


def test_unknown_engine_names_the_choices():
    assert "espeak" in engine_names()
    with pytest.raises(TTSError, match="espeak"):
        get_engine("festival-9000")


@needs_espeak
def test_espeak_speaks_a_wav_of_plausible_length(tmp_path):
    engine = get_engine("espeak")
    short = engine.synthesize("Heat.", tmp_path / "a.wav")
    long = engine.synthesize("-- The heat equation says that heat flows from hot regions "
                             "to cold ones, at a rate set by the curvature.", tmp_path / "b.wav")
    assert 0.1 < short < long < 20
    assert dict((name, ok) for name, ok, _ in engine_status())["espeak"] is True


def test_missing_espeak_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(TTSError, match="apt-get install espeak-ng"):
        get_engine("espeak")


@needs_ffmpeg
def test_hold_last_frame_lengthens_a_scene(tmp_path):
    clip = _clip(tmp_path / "s.mp4", 2.0)
    held = hold_last_frame(clip, 1.5, tmp_path / "held.mp4")
    assert duration_of(held, "video") == pytest.approx(3.5, abs=0.15)
    assert not list(tmp_path.glob(".*part*"))


@needs_ffmpeg
def test_probe_runs_ffprobe_once_per_version_of_a_file(tmp_path, monkeypatch):
    from mythloop.mythos.media import avmux

    calls = []
    real_run = avmux.procs.run
    monkeypatch.setattr(avmux.procs, "run", lambda argv, **kw: calls.append(argv) or
                        real_run(argv, **kw))
    clip = _clip(tmp_path / "s.mp4", 1.0)
    first = probe(clip)
    first["format"]["duration"] = "99"  # a caller changing its answer changes nobody else's
    assert duration_of(clip) == pytest.approx(1.0, abs=0.1)
    assert duration_of(tmp_path / "." / "s.mp4", "video") == pytest.approx(1.0, abs=0.1)
    assert len(calls) == 1
    # the file replaced as every step here does (a new file renamed over it): asked afresh
    _clip(tmp_path / "t.mp4", 2.0, "red").replace(clip)
    assert duration_of(clip) == pytest.approx(2.0, abs=0.1)
    assert len(calls) == 2
    # a file ffprobe cannot read is an error every time, never remembered
    (tmp_path / "bad.mp4").write_bytes(b"not a video")
    for _ in range(2):
        with pytest.raises(avmux.MuxError, match="ffprobe cannot read"):
            probe(tmp_path / "bad.mp4")
    assert len(calls) == 4


@needs_ffmpeg
@needs_espeak
def test_voice_and_soft_subtitles_make_one_stream_each(tmp_path):
    video = _clip(tmp_path / "film_video.mp4", 5.0)
    clip = tmp_path / "v1.wav"
    spoken = get_engine("espeak").synthesize("Two seconds or so of speech.", clip)
    assert spoken < 3.0
    track = speech_track([(clip, 3.0), (None, 2.0)], tmp_path / "voice.wav")
    assert duration_of(track) == pytest.approx(5.0, abs=0.05)
    srt, _ = write_subtitles(cues_for_scenes([SceneNarration(3.0, ["speech"]),
                                              SceneNarration(2.0, ["quiet"])]),
                             tmp_path / "film")
    film = mux_film(video, tmp_path / "film.mp4", audio=track, subtitles=srt)
    kinds = sorted(s["codec_type"] for s in probe(film)["streams"])
    assert kinds == ["audio", "subtitle", "video"]
    assert abs(duration_of(film, "audio") - duration_of(film, "video")) < 0.2


@needs_ffmpeg
def test_burnt_subtitles_change_the_picture(tmp_path):
    video = _clip(tmp_path / "v.mp4", 2.0, colour="black")
    srt, _ = write_subtitles(cues_for_scenes([SceneNarration(2.0, ["WHITE TEXT HERE"])]),
                             tmp_path / "subs dir with space" / "film")
    burnt = mux_film(video, tmp_path / "burnt.mp4", subtitles=srt, burn=True)
    kinds = [s["codec_type"] for s in probe(burnt)["streams"]]
    assert kinds == ["video"]

    def bright_pixels(path: Path) -> int:
        raw = subprocess.run(["ffmpeg", "-v", "error", "-ss", "1", "-i", str(path), "-frames:v",
                              "1", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                             capture_output=True, check=True).stdout
        return sum(1 for value in raw if value > 128)

    assert bright_pixels(video) == 0 and bright_pixels(burnt) > 20  # the words are drawn


@needs_ffmpeg
@pytest.mark.parametrize("size", ["854x480", "1920x1080"])
def test_burnt_subtitles_stay_in_the_band_scenes_keep_free(tmp_path, size):
    """A long two-line cue burnt into an empty film draws only inside the bottom band that
    the layout check treats as occupied (and scenekit's caption lane stays above)."""
    import numpy as np

    from mythloop.mythos.sandbox.layout import SUBTITLE_SHARE

    width, height = (int(v) for v in size.split("x"))
    video = tmp_path / "empty.mp4"
    subprocess.run(["ffmpeg", "-y", "-v", "error", "-f", "lavfi", "-i",
                    f"color=c=0x0c0c0b:s={size}:r=15:d=2", "-c:v", "libx264",
                    "-pix_fmt", "yuv420p", str(video)], check=True)
    words = "the curvature of the temperature decides how fast each point of the rod cools"
    srt, _ = write_subtitles(cues_for_scenes([SceneNarration(2.0, [f"{words}, {words}."])]),
                             tmp_path / "film")
    burnt = mux_film(video, tmp_path / "burnt.mp4", subtitles=srt, burn=True)
    raw = subprocess.run(["ffmpeg", "-v", "error", "-ss", "1", "-i", str(burnt), "-frames:v",
                          "1", "-f", "rawvideo", "-pix_fmt", "gray", "-"],
                         capture_output=True, check=True).stdout
    frame = np.frombuffer(raw, np.uint8).reshape(height, width)
    rows = np.nonzero((frame > 80).sum(axis=1) > 2)[0]
    assert len(rows) > 0.03 * height  # the subtitle is there (two lines of text)
    assert rows.min() >= (1 - SUBTITLE_SHARE) * height, (rows.min(), height)
    assert rows.max() < height - 1  # and not cut by the bottom edge


@needs_ffmpeg
def test_failed_mux_leaves_no_file(tmp_path):
    from mythloop.mythos.media.avmux import MuxError

    bad = tmp_path / "not_a_video.mp4"
    bad.write_text("nope")
    with pytest.raises(MuxError, match="ffmpeg failed"):
        mux_film(bad, tmp_path / "out.mp4")
    assert not (tmp_path / "out.mp4").exists() and not list(tmp_path.glob(".out*"))


@needs_ffmpeg
def test_poster_frame_is_a_png_from_the_middle(tmp_path):
    _clip(tmp_path / "a.mp4", 2.0, colour="black")
    _clip(tmp_path / "b.mp4", 2.0, colour="white")
    listing = tmp_path / "list.txt"
    listing.write_text("file 'a.mp4'\nfile 'b.mp4'\n")
    subprocess.run(["ffmpeg", "-y", "-v", "error", "-f", "concat", "-safe", "0", "-i",
                    str(listing), "-c", "copy", str(tmp_path / "ab.mp4")], check=True)
    poster = poster_frame(tmp_path / "ab.mp4", tmp_path / "poster.png", at=3.0)
    assert poster.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    info = probe(poster)["streams"][0]
    assert (info["width"], info["height"]) == (320, 180)
    early = poster_frame(tmp_path / "ab.mp4", tmp_path / "early.png", at=0.5)
    assert early.stat().st_size != poster.stat().st_size  # black vs white frame
