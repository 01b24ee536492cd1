"""Layout check of a rendered scene, without a model.

`layout_probe` (run inside the render) records where every text and formula (and each part
of a formula) is at each beat end and every quarter second of every animation; `check_layout`
turns that record into findings a person would notice on screen:

- off_frame: part of a text/formula lies outside the visible frame (more than 1% of the
  frame's width or height beyond an edge); while the camera is zoomed in (zoom > 1, the
  charter's "zoom into the term being explained"), the rest of a formula leaving the frame is
  intended, so a zoomed item counts only when none of it is ever on screen;
- clipped: while the camera holds a zoom, a part of a formula (one of its MathTex strings) is
  cut in two by the frame edge: half a symbol on screen reads as a mistake;
- overlap: two texts/formulas cover each other (their boxes share more than 15% of the
  smaller one's area), at a beat end or mid-animation (a caption cross-fading into the next);
- too_small: a text line is shorter than 14 pixels (from "H" to "g") at the render's
  quality, hard to read on a laptop screen.

Findings go into the film manifest, and with `--layout-repair` into one scoped repair of
the scene with the findings as the error.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from mythloop import procs

__all__ = ["Finding", "check_layout", "format_findings", "probe_source", "probe_scene",
           "MIN_EM_PX", "MAX_OVERLAP", "EDGE_TOLERANCE"]

MIN_EM_PX = 14.0
MAX_OVERLAP = 0.15
EDGE_TOLERANCE = 0.01


@dataclass(frozen=True)
class Finding:
    kind: str  # off_frame | clipped | overlap | too_small
    at: str  # "wait 3" or "end"
    t: float  # scene time in seconds
    what: str
    detail: str

    def line(self) -> str:
        return f"{self.kind} at {self.at} (t={self.t:.1f}s): {self.what}: {self.detail}"

    def as_dict(self) -> dict:
        return asdict(self)


def _area(box) -> float:
    return max(0.0, box[2] - box[0]) * max(0.0, box[3] - box[1])


def _shared(a, b) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def _beyond(box, half_w: float, half_h: float) -> dict[str, float]:
    xmin, ymin, xmax, ymax = box
    return {"left": -half_w - xmin, "right": xmax - half_w,
            "bottom": -half_h - ymin, "top": ymax - half_h}


def _gone(box, half_w: float, half_h: float) -> bool:
    xmin, ymin, xmax, ymax = box
    return xmin > half_w or xmax < -half_w or ymin > half_h or ymax < -half_h


def _at_rest(snap: dict, previous: dict | None) -> bool:
    """A beat end, or a sample during an animation while the camera holds still."""
    if not snap["at"].startswith("play"):
        return True
    return previous is not None and previous.get("camera") == snap.get("camera") is not None


def check_layout(record: dict) -> list[Finding]:
    """Findings from a probe record, once per (kind, text) at its first occurrence.

    Snapshots are beat ends (`wait N`, `end`) and samples during animations (`play N at Xs`).
    What moves with the camera is judged only while the camera holds still (a frame edge
    sweeping over a formula mid-move is the move, not a layout fault); two texts covering
    each other are judged in every snapshot, since a cross-fade shows both at once.
    """
    findings: list[Finding] = []
    seen: set[tuple] = set()

    def add(kind: str, snap: dict, what: str, detail: str) -> None:
        if (kind, what) in seen:
            return
        seen.add((kind, what))
        findings.append(Finding(kind, snap["at"], float(snap.get("t", 0.0)), what, detail))

    snapshots = record.get("snapshots", [])
    # an item wholly outside a zoomed view is intended, unless the viewer never sees it at all
    shown: set[str] = set()
    for snap in snapshots:
        width, height = snap["frame"]
        for item in snap.get("items", []):
            if not _gone(item["box"], width / 2, height / 2):
                shown.add(item["label"])
    previous = None
    for snap in snapshots:
        width, height = snap["frame"]
        half_w, half_h = width / 2, height / 2
        tol_w, tol_h = EDGE_TOLERANCE * width, EDGE_TOLERANCE * height
        items = snap.get("items", [])
        rest = _at_rest(snap, previous)
        previous = snap
        for item in items:
            zoomed = item.get("zoom", 1.0) > 1.0 + 1e-6
            over = {edge: d for edge, d in _beyond(item["box"], half_w, half_h).items()
                    if d > (tol_w if edge in ("left", "right") else tol_h)}
            if over and zoomed:
                # zoomed into a formula, the rest of it leaving the frame is intended: what
                # counts is a part of it cut in two by the edge, or an item never seen at all
                gone = _gone(item["box"], half_w, half_h)
                over = over if gone and item["label"] not in shown else {}
                for part in item.get("parts", []) if rest else ():
                    cut = {edge: d for edge, d in _beyond(part["box"], half_w, half_h).items()
                           if d > (tol_w if edge in ("left", "right") else tol_h)}
                    if cut and not _gone(part["box"], half_w, half_h):
                        edges = ", ".join(f"{d:.2f} units past the {edge} edge"
                                          for edge, d in sorted(cut.items()))
                        add("clipped", snap, f"part '{part['label']}' of {item['kind']} "
                                             f"'{item['label']}'",
                            f"cut by the frame while zoomed in ({edges}); frame the zoom so "
                            "each part is wholly in or wholly out")
            if over and rest:
                edges = ", ".join(f"{d:.2f} units past the {edge} edge"
                                  for edge, d in sorted(over.items()))
                add("off_frame", snap, f"{item['kind']} '{item['label']}'", edges)
            if rest and item.get("em_px", MIN_EM_PX) < MIN_EM_PX:
                add("too_small", snap, f"{item['kind']} '{item['label']}'",
                    f"{item['em_px']:.0f} px tall at {record.get('pixel_height', '?')}p "
                    f"(readable from {MIN_EM_PX:.0f} px)")
        for i, first in enumerate(items):
            for second in items[i + 1:]:
                smaller = min(_area(first["box"]), _area(second["box"]))
                if smaller > 0 and _shared(first["box"], second["box"]) / smaller > MAX_OVERLAP:
                    add("overlap", snap, f"'{first['label']}' and '{second['label']}'",
                        f"they cover {100 * _shared(first['box'], second['box']) / smaller:.0f}% "
                        "of the smaller one"
                        + (" (while one fades into the other)" if snap["at"].startswith("play")
                           else ""))
    return findings


def format_findings(findings: list[Finding]) -> str:
    """The error text a scoped repair gets: one finding a line, with what to change."""
    if not findings:
        return ""
    return ("Layout check of the rendered scene (keep every text and formula inside the frame, "
            "apart from each other, and at least font_size 24 at 480p):\n"
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
