"""Layout check of a rendered scene, without a model.

`layout_probe` (run inside the render) records where every text and formula (and each part
of a formula) is at each beat end and every quarter second of every animation; `check_layout`
turns that record into findings a person would notice on screen:

- off_frame: part of a text/formula lies outside the visible frame (more than 1% of the
  frame's width or height beyond an edge); while the camera is zoomed in (zoom > 1, the
  charter's "zoom into the term being explained"), the rest of a formula leaving the frame is
  intended, so a zoomed item counts only when none of it is ever on screen;
- clipped: while the camera holds a zoom, a part of a formula (one of its MathTex strings) is
  cut in two by the frame edge: half a symbol on screen reads as a mistake, unless the shot
  list plans that zoom: when the camera holds a zoom that frames a ZOOM_IN target of the
  scene's act (the target part wholly on screen, near the frame centre), the rest of that
  target's formula running off the edge is the intended look of the zoom. `planned_zooms`
  reads the targets from the cinematographer's shot list and the math dossier; `zoom_windows`
  places each on the scene's clock (the probe's times of the held zoom that frames it);
- overlap: two texts/formulas cover each other (their boxes share more than 15% of the
  smaller one's area), at a beat end or mid-animation (a caption cross-fading into the next);
- too_small: a text line is shorter than 14 pixels (from "H" to "g") at the render's
  quality, hard to read on a laptop screen;
- subtitle_band: a text/formula enters the bottom SUBTITLE_SHARE of the frame, the band
  burnt subtitles take (`--burn-subtitles`): the band counts as occupied in every film;
- caption_left: a caption of `mythloop.scenekit`'s caption lane is still on screen at the
  scene's end (the next scene would start under it, or the held last frame keeps it while
  the next sentence is spoken); `end_scene` clears it;
- crossed: a drawing's ink runs through a text or a formula part for two samples in a row
  (a quarter second or more): a stroke reaching into its box (the stroke's width counted),
  or a filled part covering part of it; a text wholly inside a drawing's box and clear of
  its strokes (a term in its box, a label in a plot) or wholly on one filled part (a label
  on its panel) is meant (docs/sandbox.md, "Drawings over text and cuts between scenes");
- hard_cut (`scene_cuts`, two consecutive scenes' records): what a scene ends on is not
  what the next one starts from, so it vanishes (or appears) in one frame; `end_scene`
  fades out all but what the next scene re-creates.

The record is the scene's own word: `layout_record.read_record` reads it as hostile data
and `layout_frames.judge` holds it against the rendered frames (`edge`, `unexplained`,
`unchecked`). Items of kind `shape` (drawings: axes, arrows, surfaces) explain ink and,
with their `ink` near texts (probe version 6), are judged against the texts (`crossed`). Overlaps are found with a grid of buckets, not
all pairs, and at most MAX_FINDINGS findings are kept.

`mythloop.scenekit` is the layout-safe way to write a scene (a caption lane above the
subtitle band, `fit` into the safe area, `zoom_to_fit`, `end_scene`); its lanes are the ones
this check assumes (SUBTITLE_SHARE is the same number in both modules).

Findings go into the film manifest, and with `--layout-repair` into one scoped repair of
the scene with the findings as the error.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from mythloop import procs

__all__ = ["Finding", "FindingKind", "MAX_FINDINGS", "overlapping_pairs", "PlannedZoom", "ZoomWindow", "check_layout",
           "findings_table", "format_findings", "scene_cuts", "planned_zooms", "scene_zooms", "zoom_windows",
           "probe_source", "probe_scene", "MIN_EM_PX", "MAX_OVERLAP", "EDGE_TOLERANCE",
           "SUBTITLE_SHARE"]

MIN_EM_PX = 14.0
MAX_OVERLAP = 0.15
EDGE_TOLERANCE = 0.01
CROSS_EPS = 0.01  # frame units of a stroke's ink inside a text's box that touch it (0.6 px at 480p)
CROSS_MARGIN = 0.15  # share of a text box's smaller side a filled area's box may overlap
CUT_MATCH = 0.15  # frame units: an item re-created by the next scene lies within this
CENTRED = 0.25  # a zoom frames a target whose centre lies within this share of the frame size

SUBTITLE_SHARE = 0.16  # bottom share of the frame height burnt subtitles take (scenekit's)

FindingKind = Literal["off_frame", "clipped", "overlap", "too_small", "subtitle_band",
                      "caption_left", "crossed", "hard_cut", "edge", "unexplained",
                      "unchecked"]
"""The first eight come from the probe's record, a hint the scene could forge (`hard_cut`
from two scenes' records, by `scene_cuts`); `edge` and `unexplained` from the rendered frames (layout_frames: content resting at the frame's edge,
ink the record does not account for); `unchecked`: the record or the frames could not be
used (missing, too large, malformed, too crowded to judge)."""

MAX_FINDINGS = 50  # per scene: enough for a repair prompt, bounded whatever the record says
MAX_PAIR_CHECKS = 250_000  # box pairs the overlap check compares in one record (~1 s)


class Finding(BaseModel):
    """One layout finding: what a viewer would notice, where and when in the scene.

    The one type findings travel as: the render's result, the scene cache's judgement, the
    manifest's `scenes[i].layout` (the same five keys as ever), the summary artifact's table
    and the repair's error text (`format_findings`)."""

    model_config = ConfigDict(frozen=True)

    kind: FindingKind
    at: str  # the probe's snapshot: "wait 3", "play 9 at 0.27s" or "end"
    t: float  # scene time in seconds
    what: str
    detail: str

    def line(self) -> str:
        return f"{self.kind} at {self.at} (t={self.t:.1f}s): {self.what}: {self.detail}"

    def as_dict(self) -> dict:
        return self.model_dump(mode="json")


class PlannedZoom(BaseModel):
    """A ZOOM_IN of the shot list: the formula part the camera is to frame."""

    model_config = ConfigDict(frozen=True)

    beat: int | str
    act: int | None = None
    formula_id: str
    part_index: int
    part: str  # the target part's LaTeX (the dossier's latex_parts[part_index])
    formula: list[str]  # all of the formula's parts

    def target(self) -> str:
        return f"{self.formula_id}[{self.part_index}]"


class ZoomWindow(BaseModel):
    """A planned zoom placed on the scene's clock: the held zoom of the record framing it."""

    beat: int | str
    target: str  # "formula_id[part_index]"
    start: float  # scene seconds, the zoom's first sample to its last
    end: float


def _area(box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _shared(a, b) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def _beyond(box, half_w: float, half_h: float) -> dict[str, float]:
    xmin, ymin, xmax, ymax = box
    return {"left": -half_w - xmin, "right": xmax - half_w,
            "bottom": -half_h - ymin, "top": ymax - half_h}


class _Budget:
    """Box pairs the overlap check may still compare (shared by a record's snapshots)."""

    def __init__(self, checks: int) -> None:
        self.left = checks


def overlapping_pairs(boxes: Sequence[Sequence[float]], budget: _Budget | None = None
                      ) -> tuple[list[tuple[int, int, float]], bool]:
    """Pairs (i, j, share) of BOXES (xmin, ymin, xmax, ymax) that share more than
    MAX_OVERLAP of the smaller one's area, i < j, in (i, j) order; and whether every pair
    was compared (False when BUDGET ran out: thousands of boxes piled in one place).

    A grid of square buckets about the size of a typical box: each box goes into the
    buckets it covers, and only boxes sharing a bucket are compared, each pair once (in the
    bucket where their common part begins); a box covering more than 16 buckets is compared
    with every other box. Linear in the number of boxes when they are spread out.
    """
    budget = budget or _Budget(MAX_PAIR_CHECKS)
    live = [n for n, b in enumerate(boxes) if _area(b) > 0]
    if len(live) < 2:
        return [], True
    sizes = sorted(max(boxes[n][2] - boxes[n][0], boxes[n][3] - boxes[n][1]) for n in live)
    cell = max(sizes[len(sizes) // 2], 1e-3)
    buckets: dict[tuple[int, int], list[int]] = {}
    first: dict[int, tuple[int, int]] = {}
    big: list[int] = []
    for n in live:
        x0, y0, x1, y1 = boxes[n]
        cx0, cy0, cx1, cy1 = (int(x0 // cell), int(y0 // cell), int(x1 // cell),
                              int(y1 // cell))
        if (cx1 - cx0 + 1) * (cy1 - cy0 + 1) > 16:
            big.append(n)
            continue
        first[n] = (cx0, cy0)
        for cx in range(cx0, cx1 + 1):
            for cy in range(cy0, cy1 + 1):
                buckets.setdefault((cx, cy), []).append(n)
    found: list[tuple[int, int, float]] = []

    def compare(a: int, b: int) -> None:
        smaller = min(_area(boxes[a]), _area(boxes[b]))
        share = _shared(boxes[a], boxes[b]) / smaller
        if share > MAX_OVERLAP:
            found.append((min(a, b), max(a, b), share))

    for (cx, cy), members in buckets.items():
        for k, a in enumerate(members):
            for b in members[k + 1:]:
                # each pair once: in the bucket where both boxes are, first
                if (max(first[a][0], first[b][0]), max(first[a][1], first[b][1])) != (cx, cy):
                    continue
                budget.left -= 1
                if budget.left < 0:
                    return sorted(found), False
                compare(a, b)
    big_set = set(big)
    for a in big:
        for b in live:
            if b == a or (b in big_set and b < a):
                continue
            budget.left -= 1
            if budget.left < 0:
                return sorted(found), False
            compare(a, b)
    return sorted(found), True


def _gone(box, half_w: float, half_h: float) -> bool:
    xmin, ymin, xmax, ymax = box
    return xmin > half_w or xmax < -half_w or ymin > half_h or ymax < -half_h


def _tex_key(tex: str) -> str:
    """LaTeX as the probe labels it (spaces folded, 60 characters), without spaces."""
    return re.sub(r"\s+", "", " ".join(str(tex).split())[:60])


def _number(value) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def planned_zooms(shot_list: dict, dossier: dict, act: int | None = None) -> list[PlannedZoom]:
    """The ZOOM_IN targets of the shot list (of one act, or all), each with its formula's
    parts from the math dossier; shots whose target is no dossier formula part are left out."""
    formulas = {str(f.get("id")): f for f in (dossier or {}).get("formulas") or []
                if isinstance(f, dict)}
    zooms = []
    for shot in (shot_list or {}).get("shots") or []:
        if not isinstance(shot, dict) or str(shot.get("verb", "")).upper() != "ZOOM_IN":
            continue
        shot_act = _number(shot.get("act_number"))
        if act is not None and shot_act != act:
            continue
        formula_id, index = shot.get("formula_id"), _number(shot.get("part_index"))
        match = re.fullmatch(r"\s*([\w.-]+)\s*\[\s*(\d+)\s*\]\s*", str(shot.get("target") or ""))
        if (formula_id is None or index is None) and match:
            formula_id, index = match.group(1), int(match.group(2))
        parts = (formulas.get(str(formula_id)) or {}).get("latex_parts") or []
        if index is None or not 0 <= index < len(parts):
            continue
        zooms.append(PlannedZoom(beat=shot.get("beat"), act=shot_act,
                                 formula_id=str(formula_id), part_index=index,
                                 part=str(parts[index]), formula=[str(p) for p in parts]))
    return zooms


def scene_zooms(run_dir: Path, scene_index: int, scene_count: int) -> list[PlannedZoom]:
    """The planned zooms a film's scene may hold: its act's when the film has one scene per
    act of the shot list (scene i is act i), else every act's; [] without a shot list."""
    try:
        shot_list = json.loads((Path(run_dir) / "05_shot_list.json").read_text("utf-8"))
        dossier = json.loads((Path(run_dir) / "04_math_dossier.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    acts = sorted({a for a in (_number(s.get("act_number")) for s in
                               shot_list.get("shots") or [] if isinstance(s, dict))
                   if a is not None})
    act = acts[scene_index - 1] if len(acts) == scene_count and 0 < scene_index <= len(acts) \
        else None
    return planned_zooms(shot_list, dossier, act)


def _zoom_of(snap: dict) -> float:
    camera = snap.get("camera") or []
    return float(camera[0]) if camera and camera[0] else 1.0


def _framed(snap: dict, zooms: Sequence[PlannedZoom]) -> tuple[PlannedZoom, int] | None:
    """The planned zoom this snapshot frames (its target part wholly on screen, nearest the
    frame centre) and the index of the item holding it; None when it frames none."""
    width, height = snap["frame"]
    best = None
    for n, item in enumerate(snap.get("items", [])):
        parts = {_tex_key(p["label"]): p["box"] for p in item.get("parts", [])}
        for zoom in zooms:
            box = parts.get(_tex_key(zoom.part))
            if box is None or any(d > 0 for d in _beyond(box, width / 2, height / 2).values()):
                continue
            cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
            if abs(cx) > CENTRED * width or abs(cy) > CENTRED * height:
                continue
            if best is None or cx * cx + cy * cy < best[0]:
                best = (cx * cx + cy * cy, zoom, n)
    return None if best is None else (best[1], best[2])


def _episodes(snapshots: list[dict]) -> list[list[int]]:
    """Runs of consecutive snapshots with the camera zoomed in (moves included)."""
    runs: list[list[int]] = []
    for i, snap in enumerate(snapshots):
        if _zoom_of(snap) > 1.0 + 1e-6:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
    return runs


def _episode_targets(snapshots: list[dict], zooms: Sequence[PlannedZoom]
                     ) -> dict[int, tuple[PlannedZoom, list[int]]]:
    """Snapshot index -> (the planned zoom its zoom episode frames, that episode)."""
    found: dict[int, tuple[PlannedZoom, list[int]]] = {}
    if not zooms:
        return found
    for run in _episodes(snapshots):
        held = [i for i in run if i > 0 and snapshots[i - 1].get("camera") ==
                snapshots[i].get("camera")] or run[-1:]
        target = next((hit[0] for hit in (_framed(snapshots[i], zooms) for i in held) if hit),
                      None)
        if target is not None:
            for i in run:
                found[i] = (target, run)
    return found


def zoom_windows(record: dict, zooms: Sequence[PlannedZoom]) -> list[ZoomWindow]:
    """Each planned zoom the scene holds, on the scene's clock: when the camera holds a zoom
    that frames the target, from its first sample to its last."""
    snapshots = record.get("snapshots", [])
    seen: dict[int, ZoomWindow] = {}
    for target, run in _episode_targets(snapshots, zooms).values():
        seen.setdefault(run[0], ZoomWindow(
            beat=target.beat, target=target.target(),
            start=float(snapshots[run[0]].get("t", 0.0)),
            end=float(snapshots[run[-1]].get("t", 0.0))))
    return [seen[k] for k in sorted(seen)]


def _at_rest(snap: dict, previous: dict | None) -> bool:
    """A beat end, or a sample during an animation while the camera holds still."""
    if not snap["at"].startswith("play"):
        return True
    return previous is not None and previous.get("camera") == snap.get("camera") is not None


def _grown(box, by: float) -> tuple[float, float, float, float]:
    return box[0] - by, box[1] - by, box[2] + by, box[3] + by


def _inner(box) -> tuple[float, float, float, float]:
    """BOX shrunk by CROSS_MARGIN of its smaller side (a filled area's box is an outer bound
    of its ink: a tilted patch of a surface fills less than its box)."""
    return _grown(box, -CROSS_MARGIN * min(box[2] - box[0], box[3] - box[1]))


def _segment_meets(seg, box) -> bool:
    """Whether the segment (x0, y0, x1, y1) passes through BOX (Liang-Barsky clipping)."""
    x0, y0, x1, y1 = seg
    dx, dy = x1 - x0, y1 - y0
    low, high = 0.0, 1.0
    for p, q in ((-dx, x0 - box[0]), (dx, box[2] - x0), (-dy, y0 - box[1]), (dy, box[3] - y0)):
        if p == 0:
            if q < 0:
                return False
            continue
        r = q / p
        if p < 0:
            low = max(low, r)
        else:
            high = min(high, r)
        if low > high:
            return False
    return True


def _inside(box, outer) -> bool:
    return outer[0] <= box[0] and outer[1] <= box[1] and box[2] <= outer[2] \
        and box[3] <= outer[3]


def _crossings(items: Sequence[dict]) -> list[tuple[dict, str, str]]:
    """(drawing, text's name, how) for each text (or formula part) a drawing's ink runs
    through: a stroke whose ink (its width counted) reaches into the text's box, or a
    filled area covering part of the text's inner box (a text wholly on one filled area, a
    label on its panel, is meant). A text wholly inside a drawing's box and clear of its
    strokes (a term in its box, a label in a plot) is not crossed."""
    texts = []
    for item in items:
        if item.get("kind") == "shape":
            continue
        parts = item.get("parts") or []
        if parts:
            texts += [(p["box"], f"part '{p['label']}' of {item['kind']} '{item['label']}'")
                      for p in parts]
        else:
            texts.append((item["box"], f"{item['kind']} '{item['label']}'"))
    found = []
    for shape in items:
        ink = shape.get("ink") if shape.get("kind") == "shape" else None
        if not ink:
            continue
        for box, name in texts:
            if _area(box) <= 0:
                continue
            # a stroke's ink is its line and half its width either side: it touches the text
            # when it reaches more than CROSS_EPS into the text's (tight) box
            reach = _grown(box, float(ink.get("width", 0.0)) / 2 - CROSS_EPS)
            inner = _inner(box)
            if any(_segment_meets(seg, reach) for seg in ink.get("lines", ())):
                found.append((shape, name, "a line of it runs through"))
            elif any(_shared(area, inner) > 0 and not _inside(box, area)
                     for area in ink.get("areas", ())):
                found.append((shape, name, "a filled part of it covers part of"))
    return found


def check_layout(record: dict, zooms: Sequence[PlannedZoom] | None = None) -> list[Finding]:
    """Findings from a probe record, once per (kind, text) at its first occurrence.

    Snapshots are beat ends (`wait N`, `end`) and samples during animations (`play N at Xs`).
    What moves with the camera is judged only while the camera holds still (a frame edge
    sweeping over a formula mid-move is the move, not a layout fault); two texts covering
    each other are judged in every snapshot, since a cross-fade shows both at once.
    `zooms`: the scene's planned zooms (`scene_zooms`); a part of the formula a held zoom
    frames as planned is not `clipped` by that zoom (without a plan every cut part is).
    """
    findings: list[Finding] = []
    seen: set[tuple] = set()

    def add(kind: FindingKind, snap: dict, what: str, detail: str) -> None:
        if (kind, what) in seen or len(findings) >= MAX_FINDINGS:
            return
        seen.add((kind, what))
        findings.append(Finding(kind=kind, at=snap["at"], t=float(snap.get("t", 0.0)),
                                what=what, detail=detail))

    snapshots = record.get("snapshots", [])
    # an item wholly outside a zoomed view is intended, unless the viewer never sees it at all
    shown: set[str] = set()
    for snap in snapshots:
        width, height = snap["frame"]
        for item in snap.get("items", []):
            if item.get("kind") != "shape" and not _gone(item["box"], width / 2, height / 2):
                shown.add(item["label"])
    previous = None
    budget, crowded = _Budget(MAX_PAIR_CHECKS), False
    crossed_before: dict[tuple[str, str], dict] = {}  # crossing -> its first snapshot
    for snap in snapshots:
        if len(findings) >= MAX_FINDINGS:
            break
        width, height = snap["frame"]
        half_w, half_h = width / 2, height / 2
        tol_w, tol_h = EDGE_TOLERANCE * width, EDGE_TOLERANCE * height
        items = [i for i in snap.get("items", []) if i.get("kind") != "shape"]
        rest = _at_rest(snap, previous)
        previous = snap
        # the formula whose planned target this held zoom frames (its other parts may run off)
        framed = _framed(snap, zooms) if zooms and rest and _zoom_of(snap) > 1.0 + 1e-6 \
            else None
        for n, item in enumerate(items):
            zoomed = item.get("zoom", 1.0) > 1.0 + 1e-6
            over = {edge: d for edge, d in _beyond(item["box"], half_w, half_h).items()
                    if d > (tol_w if edge in ("left", "right") else tol_h)}
            if over and zoomed:
                # zoomed into a formula, the rest of it leaving the frame is intended: what
                # counts is a part of it cut in two by the edge, or an item never seen at all
                gone = _gone(item["box"], half_w, half_h)
                over = over if gone and item["label"] not in shown else {}
                intended = framed is not None and framed[1] == n
                for part in item.get("parts", []) if rest and not intended else ():
                    cut = {edge: d for edge, d in _beyond(part["box"], half_w, half_h).items()
                           if d > (tol_w if edge in ("left", "right") else tol_h)}
                    if cut and not _gone(part["box"], half_w, half_h):
                        edges = ", ".join(f"{d:.2f} units past the {edge} edge"
                                          for edge, d in sorted(cut.items()))
                        add("clipped", snap, f"part '{part['label']}' of {item['kind']} "
                                             f"'{item['label']}'",
                            f"cut by the frame while zoomed in ({edges}"
                            + ("; the shot list plans no zoom that frames this formula here"
                               if zooms else "")
                            + "); frame the zoom so each part is wholly in or wholly out")
            if over and rest:
                edges = ", ".join(f"{d:.2f} units past the {edge} edge"
                                  for edge, d in sorted(over.items()))
                add("off_frame", snap, f"{item['kind']} '{item['label']}'", edges)
            band_top = -half_h + SUBTITLE_SHARE * height
            if rest and item["box"][1] < band_top - tol_h and item["box"][3] > -half_h \
                    and not _gone(item["box"], half_w, half_h):
                add("subtitle_band", snap, f"{item['kind']} '{item['label']}'",
                    f"reaches {band_top - item['box'][1]:.2f} units into the bottom "
                    f"{100 * SUBTITLE_SHARE:.0f}% of the frame, where burnt subtitles go; "
                    "keep it above (mythloop.scenekit's caption lane and fit do)")
            if snap["at"] == "end" and item.get("lane") == "caption":
                add("caption_left", snap, f"{item['kind']} '{item['label']}'",
                    "the caption is still on screen at the scene's end; clear it "
                    "(mythloop.scenekit.end_scene) so it leaves with its scene")
            if rest and item.get("em_px", MIN_EM_PX) < MIN_EM_PX:
                add("too_small", snap, f"{item['kind']} '{item['label']}'",
                    f"{item['em_px']:.0f} px tall at {record.get('pixel_height', '?')}p "
                    f"(readable from {MIN_EM_PX:.0f} px)")
        # a drawing through a text that lasts (two samples in a row, a quarter second or
        # more): a text gliding past a drawing on its way is the move, not the layout
        crossing = {}
        for shape, name, how in _crossings(snap.get("items", [])):
            crossing[(shape["label"], name)] = how
            if (shape["label"], name) in crossed_before:
                first = crossed_before[(shape["label"], name)]
                add("crossed", first, f"{shape['label']} over {name}",
                    f"{how} the text (a box or drawing must enclose its own term or stay "
                    "clear of a text; move one of them)")
        crossed_before = {key: crossed_before.get(key, snap) for key in crossing}
        if crowded:
            continue
        pairs, complete = overlapping_pairs([item["box"] for item in items], budget)
        for i, j, share in pairs:
            add("overlap", snap, f"'{items[i]['label']}' and '{items[j]['label']}'",
                f"they cover {100 * share:.0f}% of the smaller one"
                + (" (while one fades into the other)" if snap["at"].startswith("play")
                   else ""))
        if not complete:
            crowded = True
            add("unchecked", snap, "the overlap check",
                f"{len(items)} texts lie so close together that not every pair could be "
                f"compared (at most {MAX_PAIR_CHECKS}); use fewer texts")
    return findings


def _scene_edge(record: dict, at: str) -> dict | None:
    snaps = [s for s in record.get("snapshots", []) if s.get("at") == at]
    return (snaps[-1] if at == "end" else snaps[0]) if snaps else None


def _on_screen(snap: dict) -> list[dict]:
    width, height = snap["frame"]
    return [i for i in snap.get("items", []) if not _gone(i["box"], width / 2, height / 2)]


def _same(a: dict, b: dict) -> bool:
    return a.get("kind") == b.get("kind") and a.get("label") == b.get("label") and all(
        abs(x - y) <= CUT_MATCH for x, y in zip(a["box"], b["box"], strict=True))


def _names(items: Sequence[dict]) -> str:
    names = [f"{i['kind']} '{i['label']}'" for i in items[:3]]
    return ", ".join(names) + (f" and {len(items) - 3} more" if len(items) > 3 else "")


def scene_cuts(records: Sequence[tuple[str, dict | None]]) -> list[tuple[str, Finding]]:
    """Hard cuts between consecutive scenes of a film: (the ending scene's label, finding)
    when what it shows at its end is not what the next scene shows before its first
    animation (its `start` snapshot, probe version 6), so the picture changes in one frame.
    A scene that fades what it leaves (mythloop.scenekit.end_scene), or whose next scene
    re-creates it in place (the film's declared state), cuts nothing. Records without a
    `start` or `end` snapshot (an older probe, a failed scene) are not judged."""
    found = []
    for (label, record), (_, following) in zip(records, records[1:], strict=False):
        end = _scene_edge(record or {}, "end")
        start = _scene_edge(following or {}, "start")
        if end is None or start is None:
            continue
        left, right = _on_screen(end), _on_screen(start)
        gone = [a for a in left if not any(_same(a, b) for b in right)]
        new = [b for b in right if not any(_same(a, b) for a in left)]
        if not gone and not new:
            continue
        what = "; ".join(part for part in (
            f"{_names(gone)} vanish(es) in one frame" if gone else "",
            f"{_names(new)} appear(s) in one frame" if new else "") if part)
        found.append((label, Finding(
            kind="hard_cut", at="end", t=float(end.get("t", 0.0)),
            what="the cut to the next scene",
            detail=f"{what}; fade out what the scene leaves (mythloop.scenekit.end_scene) "
                   "or start the next scene from exactly what this one ends on")))
    return found


def findings_table(rows: Sequence[tuple[str, Finding]], limit: int = 40) -> list[str]:
    """The summary artifact's markdown table: one row per (scene label, finding)."""
    if not rows:
        return []

    def cell(text: str) -> str:
        return str(text).replace("|", "/")

    return ([f"**Layout check:** {len(rows)} finding(s)", "",
             "| scene | kind | at (scene time) | what | detail |", "|---|---|---|---|---|"]
            + [f"| {label} | {f.kind} | {f.t:.1f} s ({f.at}) | {cell(f.what)} | "
               f"{cell(f.detail)} |" for label, f in rows[:limit]]
            + [""])


def format_findings(findings: Sequence[Finding]) -> str:
    """The error text a scoped repair gets: one finding a line, with what to change."""
    if not findings:
        return ""
    return ("Layout check of the rendered scene (keep every text and formula inside the frame, "
            "apart from each other and from boxes and drawings that are not theirs, above the "
            "subtitle band, and at least font_size 24 at 480p; mythloop.scenekit's "
            "CaptionLane, fit, zoom_to_fit and end_scene do this):\n"
            + "\n".join(f"- {f.line()}" for f in findings))


def probe_source() -> str:
    """The probe's source, for the render sandbox to run beside manim."""
    return (Path(__file__).with_name("layout_probe.py")).read_text(encoding="utf-8")


def probe_scene(scene_file: Path, scene_name: str, *, quality: str = "l",
                workdir: Path, timeout: float = 300.0) -> dict:
    """Run a TRUSTED scene once without writing video (manim --dry_run) under the probe and
    return its record. Untrusted scene code goes through the render sandbox instead."""
    out = workdir / "layout.json"
    driver = (probe_source() + "\nimport runpy, sys\n"
              f"install({str(out)!r})\n"
              f"sys.argv = ['manim', 'render', '--dry_run', '-q{quality}', "
              f"{str(scene_file)!r}, {scene_name!r}]\n"
              "runpy.run_module('manim', run_name='__main__', alter_sys=True)\n")
    proc = procs.run([sys.executable, "-c", driver], cwd=workdir, timeout=timeout,
                     env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"layout probe of {scene_name} failed (exit {proc.returncode}): "
                           + " | ".join(tail))
    return json.loads(out.read_text(encoding="utf-8"))
