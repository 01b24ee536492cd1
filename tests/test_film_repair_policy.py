"""A repair never costs a rendered scene: when the layout repair of a scene that rendered
cannot help (no recording, so no repair is asked for, or repaired code that fails to
render), the scene keeps its video, the manifest records the finding (and the failed repair),
and the film is finished."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_film_scenes import SCENE_1, SCENE_2_FIXED, _film, _manifest, _tiny_cassettes
from test_film_watchable import SCENE_3_OFF_FRAME

from mythloop.mythos.media.avmux import duration_of
from mythloop.mythos.plan.request import FilmRequest

SCENE_3_REPAIR_BROKEN = SCENE_3_OFF_FRAME.replace("Square(", "Sqare(")


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
@pytest.mark.parametrize("case", ["no recording", "repair fails to render"])
def test_a_failed_layout_repair_keeps_the_rendered_scene(tmp_path, monkeypatch, capsys, case):
    topic = f"tiny scenes kept {case}"
    # "no recording": the only recorded repair is for another scene
    repaired = "scene-09" if case == "no recording" else "scene-03"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_tiny_cassettes(
        tmp_path / "cassettes", topic, SCENE_3_REPAIR_BROKEN,
        scenes=(SCENE_1, SCENE_2_FIXED, SCENE_3_OFF_FRAME), repaired=repaired)))
    state = _film(FilmRequest(prompt=topic, backend="replay", render=True, layout_repair=True,
                              runs_dir=tmp_path / "runs"))
    assert state.is_completed(), state.message
    result = state.result()
    run_dir = Path(result.run_dir)
    manifest = _manifest(run_dir)
    third = manifest["scenes"][2]
    # the scene keeps the video it rendered before the repair, and the code it came from
    assert third["ok"] is True and Path(third["video"]).is_file()
    assert third["video"] == str(run_dir / "scenes" / "scene-03.mp4")
    assert "far too far right" in Path(third["file"]).read_text()
    assert "Sqare(" not in Path(third["file"]).read_text()
    # the finding (and the failed repair) are on record
    assert [f["kind"] for f in third["layout"]] == ["off_frame"]
    if case == "no recording":  # no model and no recording: no repair is asked for
        assert not third.get("failed_repair") and not manifest.get("repairs")
    else:
        failed = third["failed_repair"]
        assert failed["attempt"] == 1 and "off_frame" in failed["finding"]
        assert "Sqare" in failed["error"]
    # the film is whole: three scenes stitched, one warning naming the scene
    film = Path(result.video_path)
    assert film.is_file() and not manifest.get("failed") and not manifest.get("failed_scenes")
    assert abs(duration_of(film) - sum(s["duration"] for s in manifest["scenes"])) <= 0.5
    [warning] = manifest["warnings"]
    assert "scene-03 (TinyFilm03Formula)" in warning
    out = capsys.readouterr().out.splitlines()
    assert sum(warning in line for line in out) == 1
    # and one line per layout finding (scene, time, what)
    assert sum(line.startswith("[film] warning: layout scene-03 t=") for line in out) == 1
    assert "MissingCassette" not in "\n".join(out)


def test_summary_shows_the_poster_links_and_findings_with_their_time(tmp_path):
    import subprocess

    from mythloop.mythos.records import FilmManifest
    from mythloop.mythos.summary import watch_lines as _watch_lines

    poster = tmp_path / "poster.png"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=640x360:duration=1", "-frames:v", "1", str(poster)],
                   check=True)
    data = FilmManifest.model_validate({
        "video_path": str(tmp_path / "film.mp4"), "poster": str(poster),
        "subtitles": {"srt": str(tmp_path / "film.srt"), "vtt": str(tmp_path / "film.vtt"),
                      "cues": 3},
        "scenes": [{"label": "scene-02", "layout": [
            {"kind": "clipped", "at": "wait 4", "t": 13.4, "what": "part 'a|b'",
             "detail": "cut"}],
            "failed_repair": {"attempt": 1, "error": "no recording"}}]})
    text = "\n".join(_watch_lines(data, None, None))
    assert text.startswith("![poster](data:image/jpeg;base64,")  # shown without a server
    assert len(text.split(")", 1)[0]) < 60_000  # a thumbnail, not the full frame
    # with serve's preview server: its poster.png, an image of its own (Prefect's default
    # UI shows the text of a link as written, so an image inside one reads as raw markdown)
    served = "http://127.0.0.1:4201/runs/mythos/x/poster.png"
    lines = _watch_lines(data, "http://127.0.0.1:4201/runs/mythos/x/film.mp4", served)
    assert lines[:4] == [f"![poster]({served})", "",
                         "**[Watch the film](http://127.0.0.1:4201/runs/mythos/x/film.mp4)**", ""]
    assert not any("[![" in line for line in lines)
    assert f"`{tmp_path / 'film.srt'}`" in text and f"`{tmp_path / 'film.vtt'}`" in text
    assert "| scene-02 | clipped | 13.4 s (wait 4) | part 'a&#124;b' | cut |" in text
    assert "Kept after a failed repair:** scene-02 (repair-1: no recording)" in text


def test_summary_names_the_models_above_the_steps_not_in_a_column(tmp_path):
    """A model's label can be a sentence: the steps table holds no such column (the UI clips
    it); one model is named once above it, several get short names the table uses."""
    from mythloop.mythos.records import FilmManifest
    from mythloop.mythos.summary import film_summary
    from mythloop.textsafe import md_text

    long = "hand-written reference recording (authored by hand, not produced by a model)"
    one = film_summary(FilmManifest.model_validate({"stages": [
        {"stage": "intent", "seconds": 1.0, "model": long},
        {"stage": "codegen", "seconds": 2.0, "model": long}]}), tmp_path).markdown
    assert "| step | seconds | cached | retried |\n|---|---|---|---|\n| intent | 1.0 |" in one
    shown = md_text(long)  # (as markdown shows it as text)
    assert one.count(shown) == 1 and f"**Model of every step:** {shown}" in one
    two = film_summary(FilmManifest.model_validate({"stages": [
        {"stage": "intent", "seconds": 1.0, "model": long},
        {"stage": "codegen", "seconds": 2.0, "model": "sonnet"}]}), tmp_path).markdown
    assert "| intent | 1.0 |  |  | M1 |" in two and "| codegen | 2.0 |  |  | M2 |" in two
    assert f"- M1: {shown}\n- M2: sonnet" in two
