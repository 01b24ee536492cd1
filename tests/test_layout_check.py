"""The model-free layout check: a formula placed off-frame, overlapping or tiny text are
flagged from a real (dry-run) manim pass over fixture scenes; a clean scene is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from mythloop.mythos.sandbox.layout import check_layout, format_findings, probe_scene

SCENES = Path(__file__).parent / "scenes" / "layout_scenes.py"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = {}
    for name in ("Clean", "OffFrame", "Zoomed", "CrossFade", "OneAfterAnother", "ZoomCutsAPart",
                 "ZoomSweepsPast"):
        work = tmp_path_factory.mktemp(name)
        out[name] = probe_scene(SCENES, name, quality="l", workdir=work)
    return out


def test_clean_scene_has_no_findings(records):
    record = records["Clean"]
    beats = [s["at"] for s in record["snapshots"] if not s["at"].startswith("play")]
    assert beats == ["wait 1", "wait 2", "end"]
    # and samples during each of its three animations (a second each: four samples apiece)
    during = [s["at"] for s in record["snapshots"] if s["at"].startswith("play")]
    assert {a.split(" at ")[0] for a in during} == {"play 1", "play 2", "play 3"}
    labels = {item["label"] for s in record["snapshots"] for item in s["items"]}
    assert "heat flows from hot to cold" in labels  # texts were seen, and found fine
    assert check_layout(record) == []


def test_off_frame_overlap_and_tiny_text_are_flagged(records):
    findings = check_layout(records["OffFrame"])
    kinds = {f.kind: f for f in findings}
    assert set(kinds) == {"off_frame", "overlap", "too_small"}
    assert "u_t" in kinds["off_frame"].what and "right edge" in kinds["off_frame"].detail
    assert "overlapping A" in kinds["overlap"].what and "overlapping B" in kinds["overlap"].what
    assert "tiny footnote" in kinds["too_small"].what
    text = format_findings(findings)
    assert text.count("\n- ") == 3 and "inside the frame" in text


def test_camera_zoom_counts_and_fixed_captions_do_not_move(records):
    """At zoom 3 a wide formula leaving the frame around the zoomed term is intended; E = mc^2,
    which fits the unzoomed frame, is wholly off-screen at zoom 3 and flagged; the fixed
    caption stays put."""
    first = records["Zoomed"]["snapshots"][0]
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


def test_sandboxed_render_reports_layout_findings(tmp_path):
    """The probe runs inside the render sandbox; findings come back with the result."""
    from mythloop.mythos.sandbox.render import render_scene

    bad = render_scene(SCENES, scene="OffFrame", quality="l", out_dir=tmp_path / "bad",
                       timeout=240, layout=True)
    assert bad.ok, bad.message
    assert {f["kind"] for f in bad.layout_findings} == {"off_frame", "overlap", "too_small"}
    assert Path(bad.video_path).is_file()
    assert (tmp_path / "bad" / "media" / "layout.json").is_file()  # the record is kept
    clean = render_scene(SCENES, scene="Clean", quality="l", out_dir=tmp_path / "ok",
                         timeout=240, layout=True)
    assert clean.ok and clean.layout_findings == []


def test_scene_cache_keeps_the_probe_record_and_judges_it_on_a_hit(tmp_path):
    import json

    from mythloop.mythos.sandbox.scene_cache import SceneCache

    record = {"pixel_height": 480, "probe_version": 2, "snapshots": [{"at": "end", "t": 2.0, "frame": [14.2, 8.0],
              "items": [{"kind": "math", "label": "x", "box": [6.5, 0, 7.9, 0.4],
                         "em_px": 30.0, "zoom": 1.0}]}]}
    (tmp_path / "layout.json").write_text(json.dumps(record))
    (tmp_path / "v.mp4").write_bytes(b"video")
    cache = SceneCache(tmp_path / "cache")
    cache.put("k1", tmp_path / "v.mp4", layout_record=tmp_path / "layout.json")
    cache.put("k2", tmp_path / "v.mp4")
    [finding] = cache.get_layout("k1")
    assert finding["kind"] == "off_frame" and "right edge" in finding["detail"]
    assert cache.get_layout("k2") is None  # no record kept: no check to report


def test_captions_cross_fading_in_one_place_overlap_mid_fade(records):
    [finding] = check_layout(records["CrossFade"])
    assert finding.kind == "overlap" and finding.at.startswith("play")
    assert "first caption" in finding.what and "second caption" in finding.what
    assert 1.5 < finding.t < 2.2  # during the cross-fade, after the first second and the wait
    assert check_layout(records["OneAfterAnother"]) == []  # never both on screen


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
