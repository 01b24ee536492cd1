"""The model-free layout check: a formula placed off-frame, overlapping or tiny text are
flagged from a real (dry-run) manim pass over fixture scenes; a clean scene is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from mythloop.mythos.sandbox.layout import (
    Finding,
    check_layout,
    findings_table,
    format_findings,
    planned_zooms,
    probe_scene,
    scene_zooms,
    zoom_windows,
)
from mythloop.mythos.sandbox.layout_probe import PROBE_VERSION

SCENES = Path(__file__).parent / "scenes" / "layout_scenes.py"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = {}
    for name in ("Clean", "OffFrame", "Zoomed", "CrossFade", "OneAfterAnother", "ZoomCutsAPart",
                 "ZoomSweepsPast"):
        work = tmp_path_factory.mktemp(name)
        out[name] = probe_scene(SCENES, name, quality="l", workdir=work)
    return out


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_clean_scene_has_no_findings(records):
    record = records["Clean"]
    beats = [s["at"] for s in record["snapshots"] if not s["at"].startswith("play")]
    assert beats == ["start", "wait 1", "wait 2", "end"]  # start: before anything plays
    # and samples during each of its three animations (a second each: four samples apiece)
    during = [s["at"] for s in record["snapshots"] if s["at"].startswith("play")]
    assert {a.split(" at ")[0] for a in during} == {"play 1", "play 2", "play 3"}
    labels = {item["label"] for s in record["snapshots"] for item in s["items"]}
    assert "heat flows from hot to cold" in labels  # texts were seen, and found fine
    assert check_layout(record) == []


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_off_frame_overlap_and_tiny_text_are_flagged(records):
    findings = check_layout(records["OffFrame"])
    kinds = {f.kind: f for f in findings}
    assert set(kinds) == {"off_frame", "overlap", "too_small"}
    assert "u_t" in kinds["off_frame"].what and "right edge" in kinds["off_frame"].detail
    assert "overlapping A" in kinds["overlap"].what and "overlapping B" in kinds["overlap"].what
    assert "tiny footnote" in kinds["too_small"].what
    text = format_findings(findings)
    assert text.count("\n- ") == 3 and "inside the frame" in text


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_camera_zoom_counts_and_fixed_captions_do_not_move(records):
    """At zoom 3 a wide formula leaving the frame around the zoomed term is intended; E = mc^2,
    which fits the unzoomed frame, is wholly off-screen at zoom 3 and flagged; the fixed
    caption stays put."""
    first = records["Zoomed"]["snapshots"][1]  # the first sample of the first animation
    wide = next(i for i in first["items"] if "rod" in i["label"])
    assert wide["zoom"] == 3 and wide["box"][2] > first["frame"][0] / 2  # past the edge
    findings = check_layout(records["Zoomed"])
    assert [(f.kind, f.what) for f in findings] == [("off_frame", "math 'E = mc^2'")]


def test_quality_changes_what_is_readable():
    record = {"pixel_height": 480, "snapshots": [{"at": "end", "t": 1.0, "frame": [14.2, 8.0],
              "items": [{"kind": "text", "label": "small", "box": [0, 0, 1, 0.2],
                         "em_px": 12.0}]}]}
    assert [f.kind for f in check_layout(record)] == ["too_small"]
    record["snapshots"][0]["items"][0]["em_px"] = 27.0  # the same text at 1080p
    assert check_layout(record) == []


@pytest.mark.slow  # two sandboxed renders
def test_sandboxed_render_reports_layout_findings(tmp_path):
    """The probe runs inside the render sandbox; findings come back with the result."""
    from mythloop.mythos.sandbox.render import render_scene

    bad = render_scene(SCENES, scene="OffFrame", quality="l", out_dir=tmp_path / "bad",
                       timeout=240, layout=True)
    assert bad.ok, bad.message
    # the record's findings, and the formula cut by the right edge seen in the frames too
    assert {f.kind for f in bad.layout_findings} == {"off_frame", "overlap", "too_small", "edge"}
    [edge] = [f for f in bad.layout_findings if f.kind == "edge"]
    assert "right edge" in edge.what and edge.at.startswith("frame ")
    assert Path(bad.video_path).is_file()
    assert (tmp_path / "bad" / "media" / "layout.json").is_file()  # the record is kept
    clean = render_scene(SCENES, scene="Clean", quality="l", out_dir=tmp_path / "ok",
                         timeout=240, layout=True)
    assert clean.ok and clean.layout_findings == []


def _blank_mp4(path: Path) -> Path:
    """Two seconds of an empty dark frame (ffmpeg's lavfi source)."""
    import subprocess

    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "color=c=0x0c0c0b:s=320x180:r=15:d=2", "-pix_fmt", "yuv420p", str(path)],
                   check=True, timeout=60)
    return path


def test_scene_cache_keeps_the_probe_record_and_judges_it_on_a_hit(tmp_path):
    import json

    from mythloop.mythos.sandbox.scene_cache import SceneCache

    record = {"pixel_height": 480, "probe_version": PROBE_VERSION, "snapshots": [{"at": "end", "t": 2.0, "frame": [14.2, 8.0],
              "items": [{"kind": "math", "label": "x", "box": [6.5, 0, 7.9, 0.4],
                         "em_px": 30.0, "zoom": 1.0, "unknown": "x" * 1000}]}]}
    (tmp_path / "layout.json").write_text(json.dumps(record))
    video = _blank_mp4(tmp_path / "v.mp4")
    cache = SceneCache(tmp_path / "cache")
    cache.put("k1", video, layout_record=tmp_path / "layout.json")
    cache.put("k2", video)
    # judged again on a hit: the record's off_frame; the (empty) frames add nothing
    [finding] = cache.get_layout("k1")
    assert finding.kind == "off_frame" and "right edge" in finding.detail
    assert "unknown" not in (tmp_path / "cache" / "k1.layout.json").read_text()  # known fields
    assert cache.get_layout("k2") is None  # no record kept: no check to report
    # a record too large or malformed is not kept: a hit renders again
    (tmp_path / "big.json").write_bytes(b" " * (5 << 20))
    (tmp_path / "bad.json").write_text(json.dumps({**record, "pixel_height": "480"}))
    for name in ("big", "bad"):
        cache.put(name, video, layout_record=tmp_path / f"{name}.json")
        assert cache.get(name) is not None and cache.get_layout(name) is None


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_captions_cross_fading_in_one_place_overlap_mid_fade(records):
    [finding] = check_layout(records["CrossFade"])
    assert finding.kind == "overlap" and finding.at.startswith("play")
    assert "first caption" in finding.what and "second caption" in finding.what
    assert 1.5 < finding.t < 2.2  # during the cross-fade, after the first second and the wait
    assert check_layout(records["OneAfterAnother"]) == []  # never both on screen


@pytest.mark.slow  # the records fixture: a manim pass per scene
def test_a_part_cut_by_the_edge_while_zoomed_is_clipped_and_a_sweep_is_not(records):
    findings = check_layout(records["ZoomCutsAPart"])
    assert [(f.kind, f.at.split(" ")[0]) for f in findings] == [("clipped", "wait")]
    assert "partial u}{\\partial t" in findings[0].what and "left edge" in findings[0].detail
    # the edge sweeps over 'a + b' during the move, and at rest it is wholly out: intended
    record = records["ZoomSweepsPast"]
    def cut(snap) -> bool:
        half = snap["frame"][0] / 2
        box = next(i for i in snap["items"] if i["label"] == "a + b")["box"]
        return box[0] < -half < box[2]

    assert any(cut(s) for s in record["snapshots"] if s["at"].startswith("play"))
    assert check_layout(record) == []


def test_findings_from_synthetic_records_need_the_camera_still():
    """A part cut mid-move is not a finding; the same cut with the camera held is."""
    part = {"label": "a", "box": [-7.6, 0.0, -6.6, 1.0]}  # straddles the left edge (-7.11)
    item = {"kind": "math", "label": "a + b", "box": [-7.6, 0, -3, 1], "em_px": 30,
            "zoom": 2.0, "parts": [part]}

    def snap(at, camera):
        return {"at": at, "t": 1.0, "camera": camera, "frame": [14.22, 8.0], "items": [item]}

    moving = {"snapshots": [snap("play 1 at 0.25s", [1.5, 0, 0]),
                            snap("play 1 at 0.50s", [2.0, 0, 0])]}
    assert check_layout(moving) == []
    held = {"snapshots": [snap("play 1 at 0.25s", [2.0, 0, 0]),
                          snap("play 1 at 0.50s", [2.0, 0, 0])]}
    assert [f.kind for f in check_layout(held)] == ["clipped"]


def test_a_record_from_an_older_probe_is_not_judged_on_a_cache_hit(tmp_path):
    import json

    from mythloop.mythos.sandbox.scene_cache import SceneCache

    (tmp_path / "layout.json").write_text(json.dumps({"pixel_height": 480, "snapshots": []}))
    (tmp_path / "v.mp4").write_bytes(b"video")
    cache = SceneCache(tmp_path / "cache")
    cache.put("old", tmp_path / "v.mp4", layout_record=tmp_path / "layout.json")
    assert cache.get("old") is not None and cache.get_layout("old") is None  # render again


# --- planned zooms: the shot list says which zooms are meant ---------------------------------

HEAT_EQ = [r"\frac{\partial u}{\partial t}", "=", r"\alpha",
           r"\frac{\partial^2 u}{\partial x^2}"]


def _plan(*targets: tuple[str, int], act: int = 2) -> tuple[dict, dict]:
    """A shot list zooming into `targets` (formula id, part index) and its dossier."""
    shots = [{"beat": 1, "act_number": act, "verb": "HEADLINE", "target": "One rule"},
             {"beat": 2, "act_number": act, "verb": "SHOW", "target": "heat_eq"}]
    for n, (formula, part) in enumerate(targets):
        shots += [{"beat": 3 + 2 * n, "act_number": act, "verb": "ZOOM_IN",
                   "target": f"{formula}[{part}]", "params": {"zoom": 2.4},
                   "formula_id": formula, "part_index": part, "seconds": 3.3},
                  {"beat": 4 + 2 * n, "act_number": act, "verb": "PULL_BACK", "target": "frame"}]
    dossier = {"formulas": [{"id": "heat_eq", "latex_parts": HEAT_EQ},
                            {"id": "energy", "latex_parts": ["E", "=", "mc^2"]}]}
    return {"shots": shots}, dossier


def test_a_planned_zoom_cutting_its_own_formula_is_intended(records):
    """ZoomCutsAPart zooms into the curvature term and cuts the time derivative: with a shot
    list that plans that zoom the cut is the zoom's look; planning another zoom, it is not."""
    record = records["ZoomCutsAPart"]
    planned = planned_zooms(*_plan(("heat_eq", 3)))
    assert [(z.beat, z.target(), z.part) for z in planned] == [(3, "heat_eq[3]", HEAT_EQ[3])]
    assert check_layout(record, planned) == []
    # the planned beat on the scene's clock: from the move in to the pull-back
    [window] = zoom_windows(record, planned)
    assert window.beat == 3 and window.target == "heat_eq[3]"
    held = [s["t"] for s in record["snapshots"] if s["at"] == "wait 2"]
    assert window.start < held[0] <= window.end
    # a plan that zooms elsewhere (or nowhere) leaves the cut a finding
    elsewhere = planned_zooms(*_plan(("energy", 2)))
    [finding] = check_layout(record, elsewhere)
    assert finding.kind == "clipped" and "partial u}{\\partial t" in finding.what
    assert "plans no zoom" in finding.detail
    assert zoom_windows(record, elsewhere) == []
    assert [f.kind for f in check_layout(record, [])] == ["clipped"]


def _zoom_snapshot(items: list[dict], zoom: float = 2.4) -> list[dict]:
    """The camera holding a zoom for two samples."""
    return [{"at": f"play 3 at {x}s", "t": 5.0 + x, "camera": [zoom, 0, -1.5708, 1.3, 0, 0],
             "frame": [14.22, 8.0], "items": items} for x in (0.25, 0.5)]


def _heat_item(shift: float) -> dict:
    """The heat equation zoomed 2.4x with the curvature term at x = `shift`."""
    boxes = [(-7.5, -2.0, -5.4, 1.8), (-4.6, -0.5, -3.4, -0.1), (-2.7, -0.7, -1.7, 0.1),
             (-1.4, -2.0, 1.4, 2.0)]
    parts = [{"label": " ".join(tex.split()), "box": [b[0] + shift, b[1], b[2] + shift, b[3]]}
             for tex, b in zip(HEAT_EQ, boxes, strict=True)]
    return {"kind": "math", "label": " ".join(HEAT_EQ), "zoom": 2.4, "em_px": 40.0,
            "box": [-7.5 + shift, -2.0, 1.4 + shift, 2.0], "parts": parts}


def test_synthetic_zooms_intended_and_not():
    planned = planned_zooms(*_plan(("heat_eq", 3)))
    # framed as planned: the curvature term centred and whole, the time derivative cut
    framed = {"snapshots": _zoom_snapshot([_heat_item(0.0)])}
    assert check_layout(framed) != [] and check_layout(framed, planned) == []
    # another formula cut by the edge during the same planned zoom is a finding
    energy = {"kind": "math", "label": "E = mc^2", "zoom": 2.4, "em_px": 40.0,
              "box": [5.0, 2.5, 8.0, 3.5], "parts": [
                  {"label": "E", "box": [5.0, 2.5, 5.6, 3.5]},
                  {"label": "=", "box": [5.8, 2.7, 6.3, 3.2]},
                  {"label": "mc^2", "box": [6.5, 2.5, 8.0, 3.5]}]}
    other = {"snapshots": _zoom_snapshot([_heat_item(0.0), energy])}
    [finding] = check_layout(other, planned)
    assert finding.kind == "clipped" and "mc^2" in finding.what and "right edge" in finding.detail
    # the zoom misses its target (the curvature term itself cut at the right edge): a finding
    missed = {"snapshots": _zoom_snapshot([_heat_item(6.5)])}
    assert [f.kind for f in check_layout(missed, planned)] == ["clipped"]
    # the target framed but the zoom planned for another act's scene: nothing is intended
    assert check_layout(framed, planned_zooms(*_plan(("heat_eq", 3)), act=3)) != []


def test_scene_zooms_come_from_the_run_dirs_shot_list(tmp_path):
    import json

    from mythloop.data import data_path
    from mythloop.mythos.code.extract import extract_json_object

    def cassette(key: str) -> dict:
        path = data_path("fixtures", "cassettes", "euler-s-identity", f"{key}.json")
        return extract_json_object(json.loads(path.read_text("utf-8"))["response"])

    (tmp_path / "05_shot_list.json").write_text(json.dumps(cassette("cinematographer")))
    (tmp_path / "04_math_dossier.json").write_text(json.dumps(cassette("math-director")))
    # five acts, five scenes: scene 3 is act 3, Euler's formula toured term by term
    third = scene_zooms(tmp_path, 3, 5)
    assert [(z.beat, z.target()) for z in third] == [
        (10, "euler_formula[0]"), (12, "euler_formula[2]"), (14, "euler_formula[4]")]
    assert third[1].part == r"\cos\theta" and len(third[1].formula) == 5
    assert [z.target() for z in scene_zooms(tmp_path, 5, 5)] == ["identity[0]"]
    # scenes that are not one per act may hold any act's zoom
    assert len(scene_zooms(tmp_path, 2, 7)) == 4
    assert scene_zooms(tmp_path / "missing", 1, 5) == []


def test_a_finding_is_one_typed_record_with_the_manifests_keys():
    from mythloop.mythos.records import SceneRecord

    finding = Finding(kind="clipped", at="play 9 at 0.27s", t=8.13, what="part 'a'",
                      detail="cut")
    record = SceneRecord(label="scene-03", layout=[finding])
    dumped = record.model_dump(mode="json", exclude_unset=True)["layout"]
    assert dumped == [{"kind": "clipped", "at": "play 9 at 0.27s", "t": 8.13,
                       "what": "part 'a'", "detail": "cut"}]
    # an older manifest's dicts load as findings; an unknown kind does not
    assert SceneRecord.model_validate({"layout": dumped}).layout == [finding]
    with pytest.raises(ValueError):
        Finding(kind="blurry", at="end", t=0.0, what="x", detail="y")
    table = findings_table([("scene-03", finding)])
    assert "| scene-03 | clipped | 8.1 s (play 9 at 0.27s) | part 'a' | cut |" in table
    assert format_findings([finding]).endswith(finding.line())


def test_sample_times_run_with_the_scene_clock(records):
    """Each sample during an animation is stamped with the scene time it shows (its play's
    start plus its offset): the times never run backwards."""
    times = [s["t"] for s in records["Clean"]["snapshots"]]
    assert times == sorted(times) and times[-1] > times[0]
