"""One text per moment: a scene's lane captions quote its narration lines, so without a voice
each subtitle is the caption on screen, and a scene whose captions are not its lines is a
warning (one line per scene, kept in the manifest), never a failed render."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from test_film_narration import _probe_record, _true_shots
from test_film_scenes import HEADER, _fence, _film, _manifest, _stage_cassettes

from mythloop.data import data_path
from mythloop.llm.replay import write_cassette
from mythloop.mythos.code.extract import extract_python_block
from mythloop.mythos.code.scenes import join_film, scene_file_text, split_film
from mythloop.mythos.media.filmmedia import scene_narrations
from mythloop.mythos.media.subtitles import (
    SceneNarration,
    caption_mismatch,
    caption_shots,
    cues_for_scenes,
    lane_captions,
    quoted_lines,
)
from mythloop.mythos.plan.request import FilmRequest
from mythloop.mythos.standins.offline import offline_response

_LINES = ["A metal rod, hot in places, cool at its ends.",
          "Let time run: the sharp bumps vanish first; then the hump sinks."]


def test_captions_quote_lines_one_each_or_split_at_a_clause_and_nothing_else_does():
    assert quoted_lines(_LINES, ["A metal rod, hot in places, cool at its ends",
                                 "LET TIME RUN: the sharp bumps vanish first.  Then the hump "
                                 "sinks"]) == [0, 1]
    assert quoted_lines(_LINES, ["A metal rod, hot in places, cool at its ends.",
                                 "Let time run: the sharp bumps vanish first;",
                                 "then the hump sinks."]) == [0, 1, 1]
    assert caption_mismatch(_LINES, ["A metal rod, hot in places, cool at its ends.",
                                     "Let time run: the sharp bumps vanish first;",
                                     "then the hump sinks."]) is None
    # a paraphrase, a line left off screen, a piece out of order, a word cut in two
    assert caption_mismatch(_LINES, ["A metal rod, hot in the middle", _LINES[1]]) == \
        f'caption 1 "A metal rod, hot in the middle" is not line 1 "{_LINES[0]}"'
    assert "quote 1 of 2 line(s); line 2" in caption_mismatch(_LINES, [_LINES[0]])
    assert caption_mismatch(_LINES, [_LINES[0], "then the hump sinks.",
                                     "Let time run: the sharp bumps vanish first;"]) is not None
    assert caption_mismatch(_LINES, ["A metal rod, hot in pla", "ces, cool at its ends",
                                     _LINES[1]]) is not None
    assert caption_mismatch(_LINES, [*_LINES, "One more."]).startswith("caption 3")
    assert caption_mismatch([], ["A caption"]) == "1 caption(s) but no narration line"
    # a scene without a caption says what no caption does: nothing to compare
    assert caption_mismatch(_LINES, []) is None and quoted_lines(_LINES, []) is None


# a scene whose second line shares every word of the first caption: by words alone both lines
# would go to the first shot; quoted, each line is its own caption's
_QUOTED = [("play", 1.0, None), ("play", 0.36, "One rule."), ("wait", 1.2, "One rule."),
           ("play", 0.24, "One rule."), ("play", 0.36, "One rule for every point, the one rule."),
           ("wait", 1.4, "One rule for every point, the one rule."),
           ("play", 0.4, "One rule for every point, the one rule."), ("wait", 0.4, None)]


def test_without_a_voice_each_cue_is_the_caption_it_quotes_on_its_shot():
    lines = ["One rule.", "One rule for every point, the one rule."]
    shots = caption_shots(_probe_record(_QUOTED))
    length = round(sum(seconds for _, seconds, _ in _QUOTED), 3)
    cues = cues_for_scenes([SceneNarration(length, lines, shots)])
    truth = _true_shots(_QUOTED)[1:]  # the captions' shots, not the opening
    assert [c.text for c in cues] == lines
    for cue, (start, end) in zip(cues, truth, strict=True):
        assert abs(cue.start - start) <= 0.05 and abs(cue.end - end) <= 0.3, (cue, start, end)


def _caption(snap: dict) -> str | None:
    """The lane caption a layout snapshot shows, if any."""
    found = [i["label"] for i in snap["items"] if i.get("lane") == "caption"]
    return found[-1] if found else None


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]+", " ", text.lower()).split())


@pytest.mark.slow  # a manim pass (no video) per scene of the recorded film
def test_the_demo_films_subtitles_are_the_captions_on_screen(tmp_path):
    """The replay demo film (`make demo-film`): its scenes as the film renders them (scene 1
    as its recorded repair), probed for their layout records; at every moment of every cue of
    its subtitles without a voice, the caption on screen is the cue's text or a piece of it,
    and every caption on screen has its cue."""
    folder = data_path("fixtures", "cassettes", "the-heat-equation")
    film = split_film(extract_python_block(json.loads(
        (folder / "codegen.json").read_text(encoding="utf-8"))["response"]))
    repair = extract_python_block(json.loads(
        (folder / "repair-scene-01-1.json").read_text(encoding="utf-8"))["response"])
    codes = [repair] + [s.code for s in film.scenes[1:]]
    from mythloop.mythos.sandbox.layout import probe_scene

    records = []
    for unit, code in zip(film.scenes, codes, strict=True):
        path = tmp_path / f"{unit.label}.py"
        path.write_text(scene_file_text(film.header, code))
        work = tmp_path / unit.label
        work.mkdir()
        records.append(probe_scene(path, unit.name, workdir=work))
    narration, _ = scene_narrations([s.narration for s in film.scenes])
    spans = [float(r["snapshots"][-1]["t"]) for r in records]
    cues = cues_for_scenes([SceneNarration(span, lines, caption_shots(record))
                            for span, lines, record in zip(spans, narration, records,
                                                           strict=True)])
    assert [c.text for c in cues] == [line for lines in narration for line in lines]
    edges = [sum(spans[:i]) for i in range(len(spans) + 1)]
    captioned = 0
    for scene, record in enumerate(records):
        mine = [c for c in cues if edges[scene] - 1e-6 <= c.start < edges[scene + 1]]
        for cue in mine:  # every snapshot inside the cue: its caption, a piece of it, or none
            inside = [_caption(snap) for snap in record["snapshots"]
                      if cue.start <= edges[scene] + snap["t"] <= cue.end]
            shown = {c for c in inside if c is not None}
            assert all(_plain(c) in _plain(cue.text) for c in shown), (cue.text, shown)
            if lane_captions(record):  # (the closing scene: a headline, no caption)
                assert shown, (cue, "no caption on screen")
                captioned += 1
        for snap in record["snapshots"]:  # and no caption on screen without its cue
            caption, t = _caption(snap), edges[scene] + snap["t"]
            if caption is not None:
                assert any(c.start - 0.3 <= t <= c.end + 0.3 and _plain(caption) in
                           _plain(c.text) for c in mine), (caption, t)
    assert captioned >= 12
    # and the film's check has nothing to say about them
    assert all(caption_mismatch(lines, lane_captions(r)) is None
               for lines, r in zip(narration, records, strict=True))


def test_the_recorded_films_and_the_stand_in_caption_their_lines():
    """In the code of both recordings (and their repairs) and of the offline stand-in, every
    scene's captions, in the order written, quote its narration lines."""
    calls = re.compile(r'(?:self\.caption|self\.lane\.show)\(\s*"([^"]+)"'
                       r'|self\.zoom_on\([^,]+,\s*\d+,\s*"([^"]+)"|^\s*\(\d+, "([^"]+)", \w+\),',
                       re.M)
    films = []
    for topic in ("the-heat-equation", "euler-s-identity"):
        folder = data_path("fixtures", "cassettes", topic)
        for name in ("codegen.json", "repair-scene-01-1.json"):
            films.append(extract_python_block(json.loads(
                (folder / name).read_text(encoding="utf-8"))["response"]))
    films.append(extract_python_block(offline_response(
        "codegen", 'INPUT ARTIFACT JSON: {"user_prompt": "the heat equation"}')))
    checked = 0
    for code in films:
        for unit in split_film(code).scenes:
            captions = [next(g for g in m.groups() if g) for m in calls.finditer(unit.code)]
            lines, _ = scene_narrations([unit.narration])
            assert caption_mismatch(lines[0], captions) is None, (unit.name, captions, lines)
            checked += bool(captions)
    assert checked >= 12


# -- in the film: one warning line per scene whose captions are not its lines -------------
_CAPTIONED = '''class CaptionFilm01Quoted(TinyBase):
    NARRATION = "A square appears. It stays put."

    def construct(self):
        self.open_scene()
        lane = CaptionLane(self, font_size=30)
        self.play(FadeIn(Square(color=CORAL)), run_time=0.5)
        lane.show("A square appears.")
        self.wait(0.6)
        lane.show("It stays put.")
        self.wait(0.6)
        end_scene(self, lane)
'''
_UNQUOTED = '''class CaptionFilm02Other(TinyBase):
    NARRATION = "A circle appears. It grows."

    def construct(self):
        self.open_scene()
        lane = CaptionLane(self, font_size=30)
        self.play(FadeIn(Circle(color=BLUE)), run_time=0.5)
        lane.show("Something else entirely")
        self.wait(0.6)
        end_scene(self, lane)
'''


def _cassettes(root: Path, topic: str) -> Path:
    _stage_cassettes(root, topic)
    header = HEADER.format(tag=uuid.uuid4().hex).replace(
        "from manim import *", "from manim import *\nfrom mythloop.scenekit import CaptionLane, "
                               "end_scene", 1)
    write_cassette(root, topic, "codegen", None, "test recording",
                   _fence(join_film(header, [_CAPTIONED, _UNQUOTED])))
    return root


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_scene_whose_captions_are_not_its_lines_is_one_warning(tmp_path, monkeypatch, capsys):
    topic = "tiny scenes captioned"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_cassettes(tmp_path / "cassettes", topic)))
    state = _film(FilmRequest(prompt=topic, backend="replay", render=True,
                              runs_dir=tmp_path / "runs"))
    assert state.is_completed(), state.message  # a warning, not a failure
    manifest = _manifest(state.result().run_dir)
    said = [ln for ln in capsys.readouterr().out.splitlines()
            if ln.startswith("[film] warning: captions")]
    assert len(said) == 1 and said[0].startswith("[film] warning: captions scene-02: "), said
    assert 'caption 1 "Something else entirely" is not line 1 "A circle appears."' in said[0]
    kept = [w for w in manifest["warnings"] if "captions are not its narration lines" in w]
    assert len(kept) == 1 and kept[0].startswith("scene-02 (CaptionFilm02Other)"), kept
    assert all(s["ok"] for s in manifest["scenes"])
    # the quoted scene's cues are its captions, on their shots
    srt = (Path(state.result().run_dir) / "film.srt").read_text()
    assert re.findall(r"\n(A square appears\.|It stays put\.)\n", srt) == \
        ["A square appears.", "It stays put."]
