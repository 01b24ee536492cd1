"""mythloop.scenekit, the layout-safe way to write a scene: one caption at a time in its lane,
cleared at the scene's end, formulas fitted into the frame (also under a zoom), the bottom
band left to burnt subtitles; verify allows exactly its helpers; `mythloop render --layout`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mythloop.mythos.sandbox.layout import SUBTITLE_SHARE, check_layout, probe_scene
from mythloop.mythos.sandbox.sandbox_policy import SCENE_HELPERS
from mythloop.mythos.sandbox.verify import verify_scene

SCENES = Path(__file__).parent / "scenes" / "scenekit_scenes.py"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return {name: probe_scene(SCENES, name, quality="l", workdir=tmp_path_factory.mktemp(name))
            for name in ("LaneReplaced", "LaneLeftOn", "ZoomFitted", "ZoomFittedMoving",
                         "InSubtitleBand")}


def _captions(snap: dict) -> list[str]:
    return [i["label"] for i in snap["items"] if i.get("lane") == "caption"]


def _inside(box, snap, margin=0.0) -> bool:
    half_w, half_h = snap["frame"][0] / 2, snap["frame"][1] / 2
    return (box[0] >= -half_w + margin and box[2] <= half_w - margin
            and box[1] >= -half_h + margin and box[3] <= half_h - margin)


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_a_caption_is_replaced_never_shown_twice_and_cleared_at_the_end(records):
    snapshots = records["LaneReplaced"]["snapshots"]
    seen = [_captions(s) for s in snapshots]
    assert all(len(c) <= 1 for c in seen)  # never two captions at once, mid-fade included
    shown = [c[0] for c in seen if c]
    assert shown[0] == "the first caption of the scene" and shown[-1] == "a second caption replaces it"
    first_gone = max(i for i, c in enumerate(seen) if c == ["the first caption of the scene"])
    assert all("the first" not in " ".join(c) for c in seen[first_gone + 1:])
    assert snapshots[-1]["at"] == "end" and _captions(snapshots[-1]) == []  # end_scene cleared it
    # the caption sits in its lane above the subtitle band, while the camera zooms too
    for snap in snapshots:
        for item in snap["items"]:
            if item.get("lane") == "caption":
                assert item["box"][1] > -snap["frame"][1] / 2 + SUBTITLE_SHARE * snap["frame"][1]
    assert max(s["camera"][0] for s in snapshots) > 1.5  # it did zoom
    assert check_layout(records["LaneReplaced"]) == []


@pytest.mark.slow
def test_a_caption_left_at_the_end_is_a_finding(records):
    findings = check_layout(records["LaneLeftOn"])
    assert [(f.kind, f.at) for f in findings] == [("caption_left", "end")]
    assert "left behind" in findings[0].what and "end_scene" in findings[0].detail


@pytest.mark.slow
@pytest.mark.parametrize("scene", ["ZoomFitted", "ZoomFittedMoving"])
def test_a_formula_fitted_under_a_zoom_stays_whole_in_the_frame(records, scene):
    record = records[scene]
    zooms = [s["camera"][0] for s in record["snapshots"]] if scene == "ZoomFitted" else \
        [14.2222 / s["frame"][0] for s in record["snapshots"]]
    assert max(zooms) > 1.2  # the camera zoomed in
    for snap in record["snapshots"]:  # mid-move samples too: every formula wholly on screen
        for item in snap["items"]:
            assert _inside(item["box"], snap), (snap["at"], item["label"], item["box"])
            for part in item.get("parts", []):
                assert _inside(part["box"], snap), (snap["at"], part["label"])
    assert check_layout(record) == []


@pytest.mark.slow
def test_the_subtitle_band_counts_as_occupied(records):
    findings = check_layout(records["InSubtitleBand"])
    assert [f.kind for f in findings] == ["subtitle_band"]
    assert "subtitles" in findings[0].detail


def test_scenekit_and_the_layout_check_agree_on_the_band():
    from mythloop import scenekit
    from mythloop.mythos.media.avmux import burnt_band_share

    assert scenekit.SUBTITLE_SHARE == SUBTITLE_SHARE
    assert burnt_band_share(lines=2) <= SUBTITLE_SHARE  # two burnt lines fit the band
    assert scenekit.caption_lane_box()[1] > scenekit.subtitle_band_top()
    assert scenekit.safe_area()[1] > scenekit.caption_lane_box()[3]


def test_fit_shrinks_and_shifts_into_the_safe_area():
    from manim import RIGHT, Rectangle

    from mythloop import scenekit

    xmin, ymin, xmax, ymax = scenekit.safe_area()
    wide = scenekit.fit(Rectangle(width=30, height=1).shift(3 * RIGHT))
    assert wide.width <= xmax - xmin + 1e-6
    assert wide.get_left()[0] >= xmin - 1e-6 and wide.get_right()[0] <= xmax + 1e-6
    small = Rectangle(width=1, height=1).shift(9 * RIGHT)
    assert scenekit.fit(small).width == pytest.approx(1.0)  # never scaled up, only moved in
    assert small.get_right()[0] <= xmax + 1e-6


def test_verify_allows_the_helpers_and_nothing_else_of_mythloop():
    names = ", ".join(sorted(SCENE_HELPERS["mythloop.scenekit"]))
    ok = f"from manim import *\nfrom mythloop.scenekit import {names}\n"
    assert verify_scene(ok).ok
    for bad in ("import mythloop.scenekit\n", "from mythloop.scenekit import np\n",
                "from mythloop.scenekit import *\n", "from mythloop import procs\n",
                "from mythloop.scenekit import fit\nx = fit.__globals__\n",
                "from mythloop.scenekit import fit\nx = fit.config\n"):
        assert not verify_scene("from manim import *\n" + bad).ok, bad


BAD_SCENE = '''from manim import *


class Bad(Scene):
    def construct(self):
        eq = MathTex(r"u_t = \\alpha u_{xx} + \\text{a long tail that runs off both edges}",
                     font_size=72)
        self.play(Write(eq))
        one = Text("one caption", font_size=30).shift(2 * DOWN)
        two = Text("another caption", font_size=30).shift(2 * DOWN)
        self.play(FadeIn(one), FadeIn(two))
        self.wait(0.5)
'''


@pytest.mark.slow  # a sandboxed render
def test_render_layout_lists_the_findings_and_strict_fails(tmp_path):
    scene = tmp_path / "bad_scene.py"
    scene.write_text(BAD_SCENE, encoding="utf-8")

    def render(*extra):
        return subprocess.run([sys.executable, "-m", "mythloop_app.cli", "render", str(scene),
                               "--quiet", "--layout", *extra, "--out", str(tmp_path / "out")],
                              capture_output=True, text=True, timeout=600)

    proc = render()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("Bad.mp4")
    off = [ln for ln in lines if ln.startswith("layout: Bad off_frame")]
    assert off and "left edge" in off[0] and "right edge" in off[0]
    assert any(ln.startswith("layout: Bad overlap") and "'one caption' and 'another caption'"
               in ln for ln in lines)
    # the frames agree on the right, where a glyph is cut (on the left whole glyphs are gone)
    [edge] = [ln for ln in lines if ln.startswith("layout: Bad edge")]
    assert "right edge" in edge
    assert lines[-1].startswith("layout: 3 finding(s)")
    strict = render("--strict")
    assert strict.returncode == 1 and "layout: Bad off_frame" in strict.stdout
    alone = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "render", str(scene),
                            "--strict"], capture_output=True, text=True, timeout=60)
    assert alone.returncode == 2 and "--layout" in alone.stderr
