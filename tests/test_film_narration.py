"""Narration in step with each scene: each scene carries its own words (codegen's NARRATION),
the subtitles cue them inside that scene's span, the voice speaks them there, and a scene
whose speech runs longer than its animation holds its final picture, never black."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mythloop.data import data_path
from mythloop.mythos.code.extract import extract_python_block
from mythloop.mythos.code.scenes import scene_narration, split_film
from mythloop.mythos.media.avmux import (
    duration_of,
    hold_last_frame,
    last_picture_time,
    luma_profile,
)
from mythloop.mythos.media.filmmedia import finish_film, scene_narrations
from mythloop.mythos.standins.offline import offline_response

RECORDINGS = ("the-heat-equation", "euler-s-identity")
# words that direct the crew, not the viewer
DIRECTIONS = re.compile(r"\b(camera|zoom\w*|pull\w* back|coral|gold|olive|blue|font|fade\w*|"
                        r"caption\w*|headline)\b", re.I)
_WORD = re.compile(r"[a-z]+")
_STOP = {"the", "a", "an", "and", "of", "to", "is", "it", "its", "on", "in", "at", "by", "so",
         "then", "one", "that", "this", "what", "how", "every", "from", "as", "for", "with",
         "until", "now", "all", "does", "do", "there", "here"}


def _recorded_scenes(topic_dir: str):
    record = json.loads(data_path("fixtures", "cassettes", topic_dir, "codegen.json")
                        .read_text(encoding="utf-8"))
    return split_film(extract_python_block(record["response"])).scenes


def _on_screen_words(code: str) -> set[str]:
    """Content words of the texts a scene brings on screen (captions, headlines, Text), not
    the declared state it starts from (declare_title/declare_caption: the previous scene's)."""
    texts = re.findall(r'(?:self\.caption|self\.(?:next_)?headline|\bText)\(\s*"([^"]+)"', code)
    return {w for t in texts for w in _WORD.findall(t.lower()) if w not in _STOP}


@pytest.mark.parametrize("topic_dir", RECORDINGS)
def test_each_recorded_scene_carries_narration_about_what_it_shows(topic_dir):
    scenes = _recorded_scenes(topic_dir)
    assert len(scenes) == 5
    screens = [_on_screen_words(s.code) for s in scenes]
    for index, scene in enumerate(scenes):
        assert scene.narration, f"{scene.label} has no NARRATION"
        assert scene_narration(scene.code) == scene.narration
        assert not DIRECTIONS.search(scene.narration), scene.narration  # words for the viewer
        words = {w for w in _WORD.findall(scene.narration.lower()) if w not in _STOP}
        shared = [len(words & screen) for screen in screens]
        # it speaks about this scene's picture more than about any other scene's
        assert shared[index] == max(shared) and shared[index] >= 2, (scene.label, shared)


def test_offline_stand_in_writes_narration_per_scene():
    code = extract_python_block(offline_response("codegen", 'INPUT ARTIFACT JSON: '
                                                 '{"user_prompt": "the heat equation"}'))
    scenes = split_film(code).scenes
    assert len(scenes) == 3 and all(s.narration for s in scenes)
    assert "the heat equation" in scenes[0].narration


def test_a_scene_speaks_its_own_words_and_never_another_scenes():
    curriculum = {"acts": [{"act_number": n, "narrative": f"Act {n} plan."} for n in (1, 2, 3)]}
    lines, sources = scene_narrations(["First here. Still first.", "", "Third."], curriculum)
    assert lines == [["First here.", "Still first."], ["Act 2 plan."], ["Third."]]
    assert sources == ["scene", "curriculum act", "scene"]
    # more scenes than acts: a scene without words stays silent instead of borrowing
    lines, sources = scene_narrations(["One.", "", "Three.", "Four."], curriculum)
    assert lines == [["One."], [], ["Three."], ["Four."]] and sources[1] is None


def _clip(path: Path, seconds: float, *, fade_at: float | None = None) -> Path:
    chain = f"testsrc=size=160x120:rate=15:duration={seconds}"
    if fade_at is not None:
        chain += f",fade=t=out:st={fade_at}:d=0.4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", chain,
                    "-pix_fmt", "yuv420p", "-c:v", "libx264", str(path)], check=True)
    return path


def test_hold_point_is_the_last_picture_before_a_fade_out(tmp_path):
    faded = _clip(tmp_path / "faded.mp4", 2.0, fade_at=1.4)
    plain = _clip(tmp_path / "plain.mp4", 1.0)
    at = last_picture_time(faded)
    assert at is not None and 1.2 <= at <= 1.5
    assert last_picture_time(plain) is None  # ends on a picture: hold its last frame
    held = hold_last_frame(faded, 2.0, tmp_path / "held.mp4", at=at)
    assert abs(duration_of(held, "video") - 4.0) <= 0.15
    bright = max(y for _, y in luma_profile(faded))
    during = [y for t, y in luma_profile(held) if at + 0.2 <= t <= at + 1.8]
    assert during and min(during) > 0.8 * bright  # the hold shows the picture, not black
    old_style = hold_last_frame(faded, 2.0, tmp_path / "old.mp4")
    assert max(y for t, y in luma_profile(old_style) if t >= 2.2) < 0.3 * bright


def _cues(srt: str) -> list[tuple[float, float, str]]:
    def secs(stamp: str) -> float:
        h, m, rest = stamp.split(":")
        s, ms = rest.split(",")
        return int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000

    return [(secs(a), secs(b), text.strip()) for a, b, text in re.findall(
        r"(\d\d:\d\d:\d\d,\d{3}) --> (\d\d:\d\d:\d\d,\d{3})\n(.+)", srt)]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_cues_and_voice_lie_inside_their_scene_and_a_long_one_holds_its_picture(tmp_path):
    from mythloop.mythos.media.avmux import concat_videos

    one = _clip(tmp_path / "one.mp4", 2.0, fade_at=1.5)
    two = _clip(tmp_path / "two.mp4", 3.0)
    narration = [["Squares first, spoken over the first scene.",
                  "It runs longer than the animation does, so the picture must wait."],
                 ["Circles second."]]
    film = concat_videos([one, two], tmp_path / "film.mp4")
    scenes = [{"label": "scene-01", "video": str(one), "duration": duration_of(one)},
              {"label": "scene-02", "video": str(two), "duration": duration_of(two)}]
    done = finish_film(film, scenes, narration, voice="espeak")
    spans = done.scene_spans
    assert spans[0] > 2.5 and abs(spans[1] - 3.0) <= 0.1  # scene 1 was held, scene 2 not
    assert done.voice is not None and done.poster is None  # the task adds the poster
    [held] = done.voice.held
    assert held["scene"] == "scene-01" and 1.2 <= held["at_s"] <= 1.6
    speech = done.voice.speech_s
    assert speech[0] <= spans[0] and speech[1] <= spans[1]  # each voice inside its span
    edges = [0.0, spans[0], spans[0] + spans[1]]
    cues = _cues(Path(str(done.subtitles.srt)).read_text())
    assert len(cues) == 3
    for start, end, text in cues:
        scene = 0 if text in narration[0] else 1
        assert edges[scene] - 0.01 <= start < end <= edges[scene + 1] + 0.01, (text, start, end)
    # while scene 1's voice runs on, its picture is up (the fade comes after the hold)
    profile = luma_profile(film)
    bright = max(y for _, y in profile)
    assert min(y for t, y in profile if 1.7 <= t <= spans[0] - 0.6) > 0.8 * bright


def _speech_spans(film: Path) -> list[tuple[float, float]]:
    """Where the film's audio is not silent, by ffmpeg's silencedetect (pauses of 0.25 s or
    more split it; espeak-ng's pauses inside a line without commas are shorter)."""
    proc = subprocess.run(["ffmpeg", "-v", "info", "-nostats", "-i", str(film), "-vn", "-af",
                           "silencedetect=noise=-40dB:d=0.25", "-f", "null", "-"],
                          capture_output=True, text=True, check=True)
    starts = [float(x) for x in re.findall(r"silence_start: ([\d.]+)", proc.stderr)]
    ends = [float(x) for x in re.findall(r"silence_end: ([\d.]+)", proc.stderr)]
    total = duration_of(film, "audio")
    quiet = list(zip(starts, ends + [total] * (len(starts) - len(ends)), strict=True))
    spans, at = [], 0.0
    for begin, finish in quiet:
        if begin > at + 0.05:
            spans.append((at, begin))
        at = finish
    if total > at + 0.05:
        spans.append((at, total))
    return spans


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_with_a_voice_every_cue_spans_its_own_speech(tmp_path):
    from mythloop.mythos.media.avmux import concat_videos

    one = _clip(tmp_path / "one.mp4", 2.0)
    two = _clip(tmp_path / "two.mp4", 9.0)
    narration = [["Heat flows from hot to cold.", "It never runs the other way on its own.",
                  "So the rod evens out."],
                 ["A short line.", "Then a much longer line that goes on for quite a while "
                  "before it ends.", "Done."]]
    film = concat_videos([one, two], tmp_path / "film.mp4")
    scenes = [{"label": "scene-01", "video": str(one), "duration": duration_of(one)},
              {"label": "scene-02", "video": str(two), "duration": duration_of(two)}]
    done = finish_film(film, scenes, narration, voice="espeak")
    cues = _cues(Path(str(done.subtitles.srt)).read_text())
    assert [text for _, _, text in cues] == [line for lines in narration for line in lines]
    speech = _speech_spans(film)
    assert len(speech) == len(cues), (speech, cues)
    for (start, end, text), (said_from, said_to) in zip(cues, speech, strict=True):
        assert abs(start - said_from) <= 0.3 and abs(end - said_to) <= 0.3, \
            (text, (start, end), (said_from, said_to))
    # the first scene's three lines outlast its 2 s: it was held, and the film is that long
    assert done.voice is not None and [h["scene"] for h in done.voice.held] == ["scene-01"]
    assert abs(done.duration - sum(done.scene_spans)) <= 0.1 and done.duration > 11.0


# -- without a voice: each cue on the shot it describes --------------------------------

_TITLE = "Why does heat spread?"
_LINES = ["Why does heat spread out?", "A metal rod is hot in the middle.",
          "Let time run and the bump sinks toward flat."]
# a scene as scenekit writes it: (step, seconds, lane caption on screen during it)
_STEPS = [("play", 1.0, None), ("wait", 0.8, None), ("play", 1.2, None),  # title, a drawing
          ("play", 0.36, "A metal rod, hot in the middle"), ("wait", 1.3, "A metal rod, hot in the middle"),
          ("play", 0.24, "A metal rod, hot in the middle"),  # CaptionLane.show: out, then in
          ("play", 0.36, "Let time run: the bump sinks"), ("play", 1.5, "Let time run: the bump sinks"),
          ("wait", 0.7, "Let time run: the bump sinks"),
          ("play", 0.4, "Let time run: the bump sinks"), ("wait", 0.4, None)]  # end_scene


def _probe_record(steps, sample: float = 0.25) -> dict:
    """The layout record the probe writes for STEPS (a sample every SAMPLE seconds of a play,
    one after each wait, one at the end), read back as the film reads it."""
    from mythloop.mythos.sandbox.layout_record import parse_record

    snaps, t, plays, waits = [], 0.0, 0, 0
    for kind, seconds, caption in steps:
        items = [{"kind": "text", "label": _TITLE, "box": [-3.0, 2.5, 3.0, 3.5]}]
        if caption:
            items.append({"kind": "text", "label": caption, "box": [-4.0, -2.5, 4.0, -2.0],
                          "lane": "caption"})
        at = []
        if kind == "play":
            plays += 1
            k = 1
            while k * sample < seconds - 1e-6:
                at.append((f"play {plays} at {k * sample:.2f}s", t + k * sample))
                k += 1
        else:
            waits += 1
            at.append((f"wait {waits}", t + seconds))
        snaps += [{"at": a, "t": round(when, 3), "frame": [14.2, 8.0], "items": items}
                  for a, when in at]
        t += seconds
    snaps.append({"at": "end", "t": round(t, 3), "frame": [14.2, 8.0], "items": snaps[-1]["items"]})
    record, problem = parse_record(json.dumps({"pixel_height": 480, "probe_version": 5,
                                               "sample_s": sample, "snapshots": snaps}).encode())
    assert problem is None, problem
    return record


def _true_shots(steps) -> list[tuple[float, float]]:
    """Where the opening and each caption really are, from the steps themselves."""
    shots, t, shown = [], 0.0, None
    for _, seconds, caption in steps:
        if caption != shown:
            if shots:
                shots[-1][1] = t
            if caption is not None:
                shots.append([t, t])
            shown = caption
        t += seconds
    first = shots[0][0]
    return [(0.0, first)] + [(a, b) for a, b in shots]


def test_without_a_voice_every_cue_spans_its_shot():
    from mythloop.mythos.media.subtitles import SceneNarration, caption_shots, cues_for_scenes

    length = round(sum(seconds for _, seconds, _ in _STEPS), 3)
    shots = caption_shots(_probe_record(_STEPS))
    quiet = SceneNarration(4.0, ["A scene whose render reported no captions.", "Shared."])
    scenes = [SceneNarration(length, _LINES, shots), quiet,
              SceneNarration(length, list(reversed(_LINES[1:])) + [_LINES[0]], shots)]
    cues = cues_for_scenes(scenes)
    truth = _true_shots(_STEPS)
    assert [c.text for c in cues[:3]] == _LINES
    for cue, (start, end) in zip(cues[:3], truth, strict=True):
        assert abs(cue.start - start) <= 0.5 and abs(cue.end - end) <= 0.5, (cue, start, end)
    # a scene with no shots shares its span by words, inside it
    assert [c.text for c in cues[3:5]] == quiet.lines
    assert length <= cues[3].start < cues[3].end <= cues[4].start < cues[4].end <= length + 4.0
    # lines never run backwards in time: out of order, they share the shots that keep order
    later = cues[5:]
    assert all(length + 4.0 <= c.start for c in later)
    assert [c.start for c in later] == sorted(c.start for c in later)


_TINY_SCENE = '''
from manim import *
from mythloop.scenekit import CaptionLane, end_scene


class Tiny(ThreeDScene):
    def construct(self):
        self.lane = CaptionLane(self, font_size=30)
        title = Text("{title}", font_size=64)
        self.add_fixed_in_frame_mobjects(title)
        self.remove(title)
        self.play(FadeIn(title), run_time=1.0)
        self.wait(0.8)
        dot = Dot()
        self.play(Create(Circle()), FadeIn(dot), run_time=1.2)
        self.lane.show("{first}")
        self.wait(1.3)
        self.lane.show("{second}")
        self.play(dot.animate.shift(RIGHT), run_time=1.5)
        self.wait(0.7)
        end_scene(self, self.lane)
'''


@pytest.mark.slow  # a real render (a few seconds alone) and ffmpeg
def test_a_rendered_scene_without_a_voice_gets_its_cues_on_its_shots(tmp_path):
    """The same scene as _STEPS, rendered: the probe's record, kept by the scene cache, times
    each cue of the finished film within 0.5 s of its shot."""
    from mythloop.mythos.media.avmux import concat_videos
    from mythloop.mythos.media.subtitles import caption_shots
    from mythloop.mythos.sandbox.render import render_scene
    from mythloop.mythos.sandbox.scene_cache import SceneCache

    first, second = _STEPS[3][2], _STEPS[6][2]
    scene = tmp_path / "scene.py"
    scene.write_text(_TINY_SCENE.format(title=_TITLE, first=first, second=second))
    rendered = render_scene(scene, scene="Tiny", quality="l", timeout=300,
                            out_dir=tmp_path / "out", layout=True)
    assert rendered.ok and rendered.video_path, rendered.message
    cache = SceneCache(tmp_path / "cache")
    cache.put("tiny", rendered.video_path, layout_record=tmp_path / "out" / "media" / "layout.json")
    record = cache.layout_record("tiny")
    assert record is not None
    video = Path(rendered.video_path)
    shots = [[s.start, s.end, s.text] for s in caption_shots(record)]
    scenes = [{"label": "scene-01", "video": str(video), "duration": duration_of(video),
               "shots": shots},
              {"label": "scene-02", "video": str(video), "duration": duration_of(video),
               "shots": shots}]
    film = concat_videos([video, video], tmp_path / "film.mp4")
    finish_film(film, scenes, [_LINES, _LINES], voice=None)
    cues = _cues((tmp_path / "film.srt").read_text())
    truth = _true_shots(_STEPS)
    offset = scenes[0]["duration"]
    assert [text for _, _, text in cues] == _LINES + _LINES
    for (start, end, text), (want_start, want_end) in zip(cues, truth + [
            (a + offset, b + offset) for a, b in truth], strict=True):
        assert abs(start - want_start) <= 0.5 and abs(end - want_end) <= 0.5, \
            (text, (start, end), (want_start, want_end))


# -- with a voice and captions that quote the lines: each line spoken when its caption shows --

_VOICED_LINES = ["Heat flows from hot to cold.", "The rod evens out.",
                 "Then nothing changes any more."]
# the opening (a title, 2.5 s), then caption k = line k: the first up 0.6 s, too short for
# its line's speech, so the second waits for it; the third appears well after the second ends
_VOICED_STEPS = [("play", 1.0, None), ("wait", 1.5, None),
                 ("play", 0.36, _VOICED_LINES[0]), ("play", 0.24, _VOICED_LINES[0]),
                 ("play", 0.36, _VOICED_LINES[1]), ("wait", 3.4, _VOICED_LINES[1]),
                 ("play", 0.24, _VOICED_LINES[1]),
                 ("play", 0.36, _VOICED_LINES[2]), ("wait", 2.5, _VOICED_LINES[2]),
                 ("play", 0.4, _VOICED_LINES[2]), ("wait", 0.4, None)]


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_with_a_voice_each_line_is_spoken_when_its_caption_appears(tmp_path):
    """A voiced film whose first scene's captions quote its lines (its shots from the layout
    record the probe writes): each line's speech, and its cue, starts when its caption
    appears, or LINE_PAUSE_S after the line before it ends where that is later; a scene
    without captions speaks from its start, as before."""
    from mythloop.mythos.media.avmux import concat_videos
    from mythloop.mythos.media.subtitles import LINE_PAUSE_S, caption_shots

    length = round(sum(seconds for _, seconds, _ in _VOICED_STEPS), 3)
    one = _clip(tmp_path / "one.mp4", length)
    two = _clip(tmp_path / "two.mp4", 4.0)
    shots = [[s.start, s.end, s.text] for s in caption_shots(_probe_record(_VOICED_STEPS))]
    plain = ["A scene without captions.", "It speaks from its start."]
    film = concat_videos([one, two], tmp_path / "film.mp4")
    scenes = [{"label": "scene-01", "video": str(one), "duration": duration_of(one),
               "shots": shots},
              {"label": "scene-02", "video": str(two), "duration": duration_of(two)}]
    done = finish_film(film, scenes, [_VOICED_LINES, plain], voice="espeak")
    cues = _cues(Path(str(done.subtitles.srt)).read_text())
    assert [text for _, _, text in cues] == _VOICED_LINES + plain
    # every cue still spans its own speech, as heard in the finished film
    speech = _speech_spans(film)
    assert len(speech) == len(cues), (speech, cues)
    for (start, end, text), (said_from, said_to) in zip(cues, speech, strict=True):
        assert abs(start - said_from) <= 0.3 and abs(end - said_to) <= 0.3, \
            (text, (start, end), (said_from, said_to))
    # each caption's appearance, from the steps themselves (the opening aside)
    shown = [start for start, _ in _true_shots(_VOICED_STEPS)[1:]]
    previous_end = None
    waited = 0
    for (start, end, text), appears in zip(cues[:3], shown, strict=True):
        allowed = appears if previous_end is None else max(appears, previous_end + LINE_PAUSE_S)
        assert abs(start - allowed) <= 0.3, (text, start, appears, previous_end)
        waited += previous_end is not None and previous_end + LINE_PAUSE_S > appears + 0.3
        previous_end = end
    assert cues[0][0] >= 2.0  # not at the scene's start: its caption comes 2.5 s in
    assert waited == 1  # the second line waited for the first; the third did not
    # the manifest's placement is the cues' (scene time)
    assert done.voice is not None
    assert [(p["start_s"], p["end_s"]) for p in done.voice.lines[:3]] == \
        [(a, b) for a, b, _ in cues[:3]]
    # the scene without captions: its lines from its start, LINE_PAUSE_S apart
    offset = done.scene_spans[0]
    assert abs(cues[3][0] - offset) <= 0.05
    assert abs(cues[4][0] - (cues[3][1] + LINE_PAUSE_S)) <= 0.05


def test_speech_waits_for_the_caption_that_quotes_its_line():
    """Without espeak: the placement itself, on the shots the probe's layout record gives.
    Each line starts when its caption appears unless the line before it is still spoken;
    captions that are not the lines leave the lines one after another from the start."""
    from mythloop.mythos.media.subtitles import (
        LINE_PAUSE_S,
        caption_shots,
        caption_starts,
        speech_layout,
    )

    shots = caption_shots(_probe_record(_VOICED_STEPS))
    shown = [start for start, _ in _true_shots(_VOICED_STEPS)[1:]]
    starts = caption_starts(_VOICED_LINES, shots)
    assert starts is not None and len(starts) == 3
    assert all(abs(a - b) <= 0.3 for a, b in zip(starts, shown, strict=True)), (starts, shown)
    durations = [2.0, 1.0, 1.5]  # the first line outlasts its caption (0.6 s up)
    spans = speech_layout(durations, starts)
    assert spans[0] == (starts[0], starts[0] + 2.0)
    assert spans[1][0] == spans[0][1] + LINE_PAUSE_S > starts[1]  # waits for line 1
    assert spans[2][0] == starts[2] > spans[1][1] + LINE_PAUSE_S  # at its caption
    # captions that are not the lines, or no shots: from the scene's start, as before
    assert caption_starts(list(reversed(_VOICED_LINES)), shots) is None
    assert caption_starts(_VOICED_LINES, []) is None
    pause = LINE_PAUSE_S
    assert [pytest.approx(span) for span in speech_layout(durations)] == \
        [(0.0, 2.0), (2.0 + pause, 3.0 + pause), (3.0 + 2 * pause, 4.5 + 2 * pause)]
