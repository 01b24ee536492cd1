"""The layout record read as hostile data, the overlap check's spatial index, and the frame
findings from decoded pixels (no render: records and frames are built here)."""

from __future__ import annotations

import itertools
import json
import os
import random
import tracemalloc

import numpy as np
import pytest

from mythloop.mythos.sandbox import layout
from mythloop.mythos.sandbox.layout import MAX_FINDINGS, check_layout, overlapping_pairs
from mythloop.mythos.sandbox.layout_frames import FRAME_H, FRAME_W, Sample, frame_findings
from mythloop.mythos.sandbox.layout_probe import PROBE_VERSION
from mythloop.mythos.sandbox.layout_record import (
    MAX_RECORD_BYTES,
    parse_record,
    read_record,
)

FRAME = [14.2222, 8.0]


def _record(items: list[dict], t: float = 1.0, at: str = "wait 1") -> dict:
    return {"scene": "S", "pixel_height": 480, "probe_version": PROBE_VERSION, "sample_s": 0.25,
            "snapshots": [{"at": at, "t": t, "camera": [1, 0, 0, 0, 0, 0], "frame": FRAME,
                           "items": items}]}


def _text(label: str, box: list[float], **extra) -> dict:
    return {"kind": "text", "label": label, "box": box, "em_px": 20.0, "zoom": 1.0, **extra}


def test_a_valid_record_comes_back_as_its_known_fields():
    raw = _record([_text("hello", [-1, 0, 1, 0.5], secret="x" * 50)])
    raw["extra"] = {"deep": [1, 2, 3]}
    record, problem = parse_record(json.dumps(raw).encode())
    assert problem is None
    assert "extra" not in record and "secret" not in record["snapshots"][0]["items"][0]
    assert check_layout(record) == []


@pytest.mark.parametrize("change, where", [
    (lambda r: r["snapshots"][0]["items"][0].update(label=12345), "items[0].label"),
    (lambda r: r["snapshots"][0].update(at=7), "snapshots[0].at"),
    (lambda r: r["snapshots"][0]["items"][0].update(box=["a", 0, 1, 1]), "box"),
    (lambda r: r["snapshots"][0].update(frame=[0, 8]), "frame"),
    (lambda r: r.update(snapshots={"not": "a list"}), "snapshots"),
    (lambda r: r["snapshots"][0].update(at="play 1 at \x1b]52;c;AAAA\x07"), "snapshots[0].at"),
])
def test_a_wrong_type_is_one_unchecked_finding_not_a_traceback(change, where):
    raw = _record([_text("hello", [-1, 0, 1, 0.5])])
    change(raw)
    record, problem = parse_record(json.dumps(raw).encode())
    assert record is None and problem.kind == "unchecked"
    assert where in problem.detail and "\x1b" not in problem.detail
    assert problem.line().startswith("unchecked at end")


def test_not_json_nan_and_huge_numbers_are_findings():
    assert parse_record(b"\xff\xfe not json")[1].kind == "unchecked"
    raw = json.dumps(_record([_text("x", [0, 0, 1, 1])])).replace("20.0", "NaN")
    assert "em_px" in parse_record(raw.encode())[1].detail
    raw = json.dumps(_record([_text("x", [0, 0, 1e300, 1])]))
    assert "box" in parse_record(raw.encode())[1].detail


def test_control_characters_in_labels_are_replaced():
    record, _ = parse_record(json.dumps(_record([_text("a\x1b[2Jb\u202e", [0, 0, 1, 1])])).encode())
    assert record["snapshots"][0]["items"][0]["label"] == "a?[2Jb?"


def test_a_50_mb_record_is_too_large_and_never_read(tmp_path):
    path = tmp_path / "layout.json"
    with open(path, "wb") as fh:  # 50 MB of a real-looking record
        fh.write(b'{"pixel_height": 480, "probe_version": 5, "snapshots": [')
        fh.write(b'{"at": "end", "t": 0, "frame": [14, 8], "items": []},' * (50_000_000 // 52))
        fh.write(b'{"at": "end", "t": 0, "frame": [14, 8], "items": []}]}')
    tracemalloc.start()
    try:
        record, problem = read_record(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert record is None and problem.detail.startswith("layout record too large")
    assert peak < 1 << 20  # the size was enough: nothing was read


def test_a_record_just_over_the_cap_and_odd_files_are_findings(tmp_path):
    path = tmp_path / "layout.json"
    path.write_bytes(b" " * (MAX_RECORD_BYTES + 1))
    assert "too large" in read_record(path)[1].detail
    assert "no layout record" in read_record(tmp_path / "missing.json")[1].detail
    target = tmp_path / "real.json"
    target.write_text(json.dumps(_record([])))
    (tmp_path / "link.json").symlink_to(target)
    assert read_record(target)[1] is None
    assert read_record(tmp_path / "link.json")[0] is None  # links are not followed
    (tmp_path / "media").symlink_to(tmp_path)  # nor a linked folder
    assert read_record(tmp_path / "media" / "real.json")[0] is None
    os.mkfifo(tmp_path / "fifo.json")
    assert "not a regular file" in read_record(tmp_path / "fifo.json")[1].detail


def test_the_overlap_index_finds_what_all_pairs_find():
    rng = random.Random(7)
    boxes = []
    for _ in range(400):
        x, y = rng.uniform(-7, 7), rng.uniform(-4, 4)
        w, h = rng.choice([(0.3, 0.2), (1.5, 0.4), (6, 1), (0.05, 0.05), (12, 6)])
        boxes.append([x, y, x + w * rng.uniform(0.5, 1), y + h * rng.uniform(0.5, 1)])
    boxes += [[0, 0, 0, 1], [0, 0, 1, 1]]  # a zero-area box overlaps nothing
    found, complete = overlapping_pairs(boxes)
    expected = []
    for i, j in itertools.combinations(range(len(boxes)), 2):
        smaller = min(layout._area(boxes[i]), layout._area(boxes[j]))
        if smaller > 0 and layout._shared(boxes[i], boxes[j]) / smaller > layout.MAX_OVERLAP:
            expected.append((i, j))
    assert complete and [(i, j) for i, j, _ in found] == expected and expected


def test_20000_small_texts_are_judged_without_comparing_all_pairs():
    rng = random.Random(3)
    items = []
    for n in range(20_000):  # spread over the frame's upper part, mostly apart
        x, y = rng.uniform(-7, 6.8), rng.uniform(-2, 3.8)
        items.append(_text(f"t{n}", [x, y, x + 0.1, y + 0.05]))
    items.append(_text("twin a", [0, 0, 1, 0.3]))
    items.append(_text("twin b", [0.1, 0, 1.1, 0.3]))
    record, problem = parse_record(json.dumps(_record(items)).encode())
    assert problem is None
    budget = layout._Budget(10**9)
    found, complete = overlapping_pairs([i["box"] for i in record["snapshots"][0]["items"]],
                                        budget)
    assert complete and (20_000, 20_001) in {(i, j) for i, j, _ in found}
    assert 10**9 - budget.left < 200_000  # all pairs would be 200 million
    findings = check_layout(record)
    assert 0 < len(findings) <= MAX_FINDINGS


def test_texts_piled_in_one_place_stop_at_the_budget():
    boxes = [[0, 0, 0.1, 0.05]] * 3000  # 4.5 million pairs
    budget = layout._Budget(100_000)
    found, complete = overlapping_pairs(boxes, budget)
    assert not complete and budget.left < 0 and found
    items = [_text(f"t{n}", b) for n, b in enumerate(boxes)]
    assert len(check_layout(_record(items))) == MAX_FINDINGS


# --- frames: the authority ---------------------------------------------------------------

def _frame(*rects: tuple[int, int, int, int], bg: int = 12, ink: int = 240) -> np.ndarray:
    """A FRAME_H x FRAME_W RGB frame of colour BG with INK rectangles (row0, col0, row1, col1)."""
    frame = np.full((FRAME_H, FRAME_W, 3), bg, np.uint8)
    for r0, c0, r1, c1 in rects:
        frame[r0:r1, c0:c1] = ink
    return frame


def _px_box(r0: int, c0: int, r1: int, c1: int) -> list[float]:
    """The frame-unit box of a pixel rectangle."""
    fw, fh = FRAME
    return [(c0 / FRAME_W - 0.5) * fw, (0.5 - r1 / FRAME_H) * fh,
            (c1 / FRAME_W - 0.5) * fw, (0.5 - r0 / FRAME_H) * fh]


def test_content_resting_on_the_edge_is_found_whatever_the_record_says():
    cut = (60, 230, 70, FRAME_W)  # runs into the right border
    still = Sample(t=1.0, first=_frame(cut), last=_frame(cut))
    honest = _record([_text("cut", _px_box(*cut))])
    for record in (honest, _record([]), None):
        kinds = [(f.kind, f.what) for f in frame_findings([still], record)]
        assert ("edge", "content at the right edge of the frame") in kinds
    # the same ink sweeping past the border (it moved between the two frames): not a finding
    moving = Sample(t=1.0, first=_frame((60, 200, 70, 240)), last=_frame(cut))
    assert not [f for f in frame_findings([moving], honest) if f.kind == "edge"]


def test_ink_the_record_does_not_claim_is_unexplained():
    text, drawing = (20, 40, 30, 120), (80, 100, 120, 160)
    frame = _frame(text, drawing)
    still = Sample(t=1.0, first=frame, last=frame)
    claims_all = _record([_text("title", _px_box(*text)),
                          {"kind": "shape", "label": "Axes", "box": _px_box(*drawing)}])
    assert frame_findings([still], claims_all) == []
    forged_empty = _record([])
    moved = _record([_text("title", _px_box(100, 40, 110, 120)),
                     {"kind": "shape", "label": "Axes", "box": _px_box(*drawing)}])
    for forged in (forged_empty, moved):
        [finding] = frame_findings([still], forged)
        assert finding.kind == "unexplained" and "across" in finding.detail
    # a frame in motion is not held against the record (its snapshot is a moment away)
    busy = Sample(t=1.0, first=_frame((0, 0, 100, 100)), last=frame)
    assert frame_findings([busy], forged_empty) == []


def test_a_planned_zoom_may_run_its_formula_off_and_nothing_else():
    from mythloop.mythos.sandbox.layout import planned_zooms

    shots = {"shots": [{"beat": 3, "act_number": 1, "verb": "ZOOM_IN", "target": "eq[1]"}]}
    dossier = {"formulas": [{"id": "eq", "latex_parts": ["a", "b", "c"]}]}
    zooms = planned_zooms(shots, dossier)
    whole, target = (50, 0, 90, FRAME_W), (60, 110, 80, 146)  # the formula, its middle part
    frame = _frame(whole)
    still = Sample(t=1.0, first=frame, last=frame)
    item = {**_text("a b c", _px_box(*whole)), "kind": "math", "zoom": 2.5,
            "parts": [{"label": "a", "box": _px_box(50, -40, 90, 100)},
                      {"label": "b", "box": _px_box(*target)},
                      {"label": "c", "box": _px_box(50, 160, 90, 300)}]}
    record = _record([item])
    record["snapshots"][0]["camera"] = [2.5, 0, 0, 0, 0, 0]
    assert frame_findings([still], record, zooms) == []
    assert {f.what for f in frame_findings([still], record)} == {
        "content at the left edge of the frame", "content at the right edge of the frame"}
