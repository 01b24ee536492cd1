"""What a viewer sees beyond text against text: a drawing's ink through a text (a box
around one term cutting the symbol beside it, a tilted 3D surface and its axis through the
caption) and a hard cut between two scenes (a scene ending on its picture, the next one
starting without it). Real (dry-run) manim passes under the probe, and synthetic records."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mythloop.mythos.sandbox.layout import check_layout, probe_scene, scene_cuts
from mythloop.mythos.sandbox.layout_record import parse_record

SCENES = Path(__file__).parent / "scenes" / "layout_cross_scenes.py"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    return {name: probe_scene(SCENES, name, quality="l", workdir=tmp_path_factory.mktemp(name))
            for name in ("BoxCutsAlpha", "AllowedDrawings",
                         "SurfaceThroughCaption", "EndsWithGraph", "StartsFromTitle",
                         "EndsFaded")}


def _kinds(findings, kind):
    return [f for f in findings if f.kind == kind]


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_a_box_cutting_the_symbol_beside_its_term_is_crossed_and_one_with_room_is_not(records):
    [crossed] = _kinds(check_layout(records["BoxCutsAlpha"]), "crossed")
    assert crossed.what.startswith("SurroundingRectangle over part '\\alpha'")
    # the term it encloses is not crossed: only the neighbour is named
    assert "partial^2" not in crossed.what.split(" of math")[0]


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_a_tilted_surface_and_its_axis_run_through_the_caption(records):
    record = records["SurfaceThroughCaption"]
    crossed = _kinds(check_layout(record), "crossed")
    assert {f.what.split(" over ")[0] for f in crossed} == {"Surface", "VGroup"}
    assert all("time going up the page" in f.what for f in crossed)
    assert all(f.at.startswith("play") for f in crossed)  # while the camera tilts
    # the surface's box is the projected one: tilting moves it down the frame
    def surface_bottom(snap):
        return next(i["box"][1] for i in snap["items"] if i["label"] == "Surface")
    snaps = record["snapshots"]
    assert min(surface_bottom(s) for s in snaps) < surface_bottom(snaps[0]) - 0.3


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_a_box_with_room_axes_and_their_labels_a_panel_and_a_caption_below_are_fine(records):
    assert check_layout(records["AllowedDrawings"]) == []
    labels = {i["label"] for s in records["AllowedDrawings"]["snapshots"] for i in s["items"]}
    assert {"a panel", "x", "u", "Axes", "Rectangle", "SurroundingRectangle",
            "position along the rod"} <= labels  # all of it was seen


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_a_scene_ending_on_its_picture_is_a_hard_cut_and_end_scene_keeps_only_the_title(records):
    first = records["StartsFromTitle"]["snapshots"][0]
    assert first["at"] == "start" and [i["label"] for i in first["items"]] == ["Bumps cool"]
    [(label, cut)] = scene_cuts([("one", records["EndsWithGraph"]),
                                 ("two", records["StartsFromTitle"])])
    assert label == "one" and cut.kind == "hard_cut" and cut.at == "end"
    assert "'Axes' vanish" in cut.detail and "Bumps cool" not in cut.detail
    # end_scene fades everything but what the next scene starts from
    end = records["EndsFaded"]["snapshots"][-1]
    assert end["at"] == "end" and [i["label"] for i in end["items"]] == ["Bumps cool"]
    assert scene_cuts([("one", records["EndsFaded"]), ("two", records["StartsFromTitle"])]) == []


def _snap(at, items, t=1.0):
    return {"at": at, "t": t, "frame": [14.22, 8.0], "items": items}


def _held(items):
    """A record whose two snapshots show ITEMS (a crossing must last two samples)."""
    return {"snapshots": [_snap("wait 1", items, t=0.5), _snap("end", items)]}


def _text(label, box):
    return {"kind": "text", "label": label, "box": box, "em_px": 30.0}


def _shape(label, box, lines=(), areas=(), width=0.04):
    return {"kind": "shape", "label": label, "box": box,
            "ink": {"lines": list(lines), "areas": list(areas), "width": width}}


def test_a_stroke_crosses_by_its_ink_and_a_panel_holds_its_label():
    word = _text("word", [0.0, 0.0, 1.0, 0.3])
    grazing = _shape("Line", [1.02, -1, 1.02, 1], lines=[[1.02, -1, 1.02, 1]])  # 0.02 clear
    assert check_layout(_held([word, grazing])) == []
    through = _shape("Line", [0.9, -1, 0.9, 1], lines=[[0.9, -1, 0.9, 1]])
    [f] = check_layout(_held([word, through]))
    assert f.kind == "crossed" and f.what == "Line over text 'word'" and f.at == "wait 1"
    # one sample only: a text gliding past a line on its way
    assert check_layout({"snapshots": [_snap("play 1 at 0.25s", [word, through]),
                                       _snap("end", [word])]}) == []
    panel = _shape("Rectangle", [-0.2, -0.2, 1.2, 0.5], areas=[[-0.2, -0.2, 1.2, 0.5]])
    assert check_layout(_held([word, panel])) == []
    half = _shape("Surface", [0.5, -1, 3, 1], areas=[[0.5, -1, 3, 1]])
    assert [f.kind for f in check_layout(_held([word, half]))] == ["crossed"]
    # a record of an older probe (no ink) is not judged for crossings
    old = {k: v for k, v in through.items() if k != "ink"}
    assert check_layout(_held([word, old])) == []


def test_cuts_need_both_records_and_forged_ink_is_checked():
    end = {"snapshots": [_snap("end", [_text("title", [-1, 3, 1, 3.5])])]}
    assert scene_cuts([("a", end), ("b", None)]) == []
    assert scene_cuts([("a", end), ("b", {"snapshots": [_snap("wait 1", [])]})]) == []
    start = {"snapshots": [_snap("start", [_text("title", [-1, 3.05, 1, 3.55])], t=0.0)]}
    assert scene_cuts([("a", end), ("b", start)]) == []  # re-created in place
    moved = {"snapshots": [_snap("start", [_text("title", [-1, 2.5, 1, 3.0])], t=0.0)]}
    [(label, cut)] = scene_cuts([("a", end), ("b", moved)])
    assert label == "a" and "'title' vanish" in cut.detail and "'title' appear" in cut.detail
    record, problem = parse_record(
        b'{"pixel_height": 480, "probe_version": 6, "snapshots": [{"at": "start", "t": 0,'
        b' "frame": [14.2, 8], "items": [{"kind": "shape", "label": "x", "box": [0, 0, 1, 1],'
        b' "ink": {"lines": [[0, 0, "1", 1]]}}]}]}')
    assert record is None and "ink.lines" in problem.detail


@pytest.mark.slow  # two sandboxed renders
def test_render_layout_reports_the_box_through_alpha_and_the_cuts_of_a_file(tmp_path,
                                                                            state_dir):
    """`mythloop render FILE --layout` (the sandboxed render, the verdict with its frames):
    the box through the alpha, and the cut after the scene that leaves it on screen."""
    film = tmp_path / "film.py"
    source = SCENES.read_text()
    film.write_text(source.split("class AllowedDrawings")[0]
                    + "class EndsWithGraph" + source.split("class EndsWithGraph")[1]
                    .split("class StartsFromTitle")[0])
    proc = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "render", str(film), "-q",
                           "l", "--layout", "--strict", "--quiet", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("layout:")]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert [" ".join(line.split()[1:3]) for line in lines[:-1]] == [
        "BoxCutsAlpha crossed", "BoxCutsAlpha hard_cut"]  # the last scene ends the film
    assert "SurroundingRectangle over part '\\alpha'" in lines[0]
    assert "'SurroundingRectangle' vanish(es) in one frame" in lines[1]
    assert lines[-1].startswith("layout: 2 finding(s)")
