"""Records where a scene's text and formulas are, at each beat end and during animations
(inside the render).

Self-contained on purpose: the render sandbox runs this file's source next to manim
(it may not be able to import mythloop), so it imports only the standard library, numpy
and manim. `install(path)` wraps `Scene.wait`, `Scene.update_to_time` and `Scene.tear_down`;
after every wait, every SAMPLE_S seconds of every animation ("play 3 at 0.50s": what a viewer
sees mid-fade or mid-zoom) and once at the end it notes each visible text-like mobject (Text, MarkupText, Paragraph,
MathTex, Tex, ...) with its box in frame coordinates (the camera's projection applied, so
zoom, moving frames and 3D orientation count; fixed-in-frame mobjects as they are), its
em height in pixels at the render's quality, and every other visible top-level mobject as a
`shape` box (so the parent can hold the record against the rendered frames) with the ink it
puts near a text (`ink`: its strokes as line segments, its filled areas as boxes, only those
whose box meets some text's box), and writes everything as JSON to `path`. A `start`
snapshot holds what the scene shows before its first animation (its declared state).
`mythloop.mythos.sandbox.layout.check_layout` judges the record.
"""

from __future__ import annotations

import json
import os

_EM_PER_FONT_UNIT = 0.0132  # height of "Hg" in frame units per font-size unit (manim CE)
SAMPLE_S = 0.25  # seconds of animation between two samples taken during a play
PROBE_VERSION = 6  # 2: samples during animations; 3: their scene time counted once;
#                   4: lane captions (mythloop.scenekit) tagged; 5: drawings ("shape");
#                   6: a "start" snapshot, and each drawing's ink near a text ("ink")
MAX_PIECES = 120  # ink pieces of one kind kept per drawing (more are merged pairwise)


def install(out_path: str) -> None:
    # Inside the render only: mythloop reads PROBE_VERSION from this module without manim.
    import numpy as np  # noqa: PLC0415
    from manim import (  # noqa: PLC0415
        ImageMobject,
        MarkupText,
        Paragraph,
        Scene,
        SingleStringMathTex,
        Text,
        VMobject,
        config,
    )

    text_types = (Text, MarkupText, Paragraph, SingleStringMathTex)
    snapshots: list[dict] = []

    def label_of(mob) -> str:
        raw = getattr(mob, "original_text", None) or getattr(mob, "tex_string", None) or \
            getattr(mob, "text", None) or type(mob).__name__
        return " ".join(str(raw).split())[:60]

    def visible(mob) -> bool:
        family = mob.get_family()
        return any(m.get_fill_opacity() > 0.05 or m.get_stroke_opacity() > 0.05
                   for m in family if len(m.points))

    def drawn(mob) -> bool:
        """Whether any part of MOB puts pixels on screen (a visible VMobject, an image)."""
        for m in mob.get_family():
            if isinstance(m, ImageMobject):
                return True
            if isinstance(m, VMobject) and len(m.points) and (
                    m.get_fill_opacity() > 0.05 or m.get_stroke_opacity() > 0.05):
                return True
        return False

    def outermost_texts(mobjects):
        found = []

        def walk(mob):
            if isinstance(mob, text_types):
                found.append(mob)
                return
            for sub in mob.submobjects:
                walk(sub)

        for mob in mobjects:
            walk(mob)
        return found

    def frame_of(scene):
        """(project(points) -> 2D points, frame width, frame height) for this camera."""
        camera = scene.camera
        fixed = set(getattr(camera, "fixed_in_frame_mobjects", ()) or ())
        width, height = config.frame_width, config.frame_height
        if hasattr(camera, "project_points"):
            def project(mob, pts):
                return pts if mob in fixed else camera.project_points(pts)
            return project, width, height, fixed
        frame = getattr(camera, "frame", None)
        if frame is not None:
            center = frame.get_center()
            return (lambda mob, pts: pts - center), frame.width, frame.height, fixed
        center = np.array(getattr(camera, "frame_center", (0, 0, 0)))
        return (lambda mob, pts: pts - center), width, height, fixed

    def box_of(flat) -> list[float]:
        return [round(float(v), 4) for v in (flat[:, 0].min(), flat[:, 1].min(),
                                             flat[:, 0].max(), flat[:, 1].max())]

    def parts_of(mob, project) -> list[dict]:
        """A formula's addressable parts (MathTex built from several strings), each boxed."""
        parts = []
        for part in mob.submobjects if len(mob.submobjects) > 1 else ():
            label = getattr(part, "tex_string", None)
            pts = part.get_all_points()
            if label is None or not len(pts) or not visible(part):
                continue
            parts.append({"label": " ".join(str(label).split())[:60],
                          "box": box_of(project(mob, pts))})
        return parts

    def leaves(mob):
        """The drawn pieces of MOB's family, texts (and what they hold) left out."""
        if isinstance(mob, text_types):
            return
        if isinstance(mob, ImageMobject) or (isinstance(mob, VMobject) and len(mob.points)):
            yield mob
        for sub in mob.submobjects:
            yield from leaves(sub)

    def near(boxes, text_boxes):
        """Rows of BOXES (n x 4) that meet some text box."""
        if not len(boxes) or not len(text_boxes):
            return boxes[:0]
        meets = ((boxes[:, None, 0] <= text_boxes[None, :, 2])
                 & (boxes[:, None, 2] >= text_boxes[None, :, 0])
                 & (boxes[:, None, 1] <= text_boxes[None, :, 3])
                 & (boxes[:, None, 3] >= text_boxes[None, :, 1]))
        return boxes[meets.any(axis=1)]

    def capped(rows, merge):
        while len(rows) > MAX_PIECES:  # merged pairwise: an outer bound, never less ink
            if len(rows) % 2:
                rows = np.vstack([rows, rows[-1:]])
            rows = merge(rows[0::2], rows[1::2])
        return [[round(float(v), 3) for v in row] for row in rows]

    def ink_of(mob, project, text_boxes) -> dict:
        """Where MOB's ink lies near the texts: strokes as segments (each cubic curve as two,
        through its middle), filled parts as boxes."""
        lines, areas, width = [], [], 0.0
        for leaf in leaves(mob):
            pts = leaf.get_all_points() if isinstance(leaf, ImageMobject) else leaf.points
            flat = np.asarray(project(mob, pts), dtype=float)[:, :2]
            if isinstance(leaf, ImageMobject) or leaf.get_fill_opacity() > 0.05:
                areas.append([flat[:, 0].min(), flat[:, 1].min(), flat[:, 0].max(),
                              flat[:, 1].max()])
            if isinstance(leaf, VMobject) and leaf.get_stroke_opacity() > 0.05 \
                    and leaf.get_stroke_width() > 0 and len(flat) >= 4:
                curves = flat[: len(flat) // 4 * 4].reshape(-1, 4, 2)
                mid = (curves[:, 0] + 3 * curves[:, 1] + 3 * curves[:, 2] + curves[:, 3]) / 8
                width = max(width, float(leaf.get_stroke_width()) * 0.01)  # cairo's frame units
                lines.append(np.hstack([curves[:, 0], mid]))
                lines.append(np.hstack([mid, curves[:, 3]]))
        segs = np.vstack(lines) if lines else np.zeros((0, 4))
        seg_boxes = np.column_stack([np.minimum(segs[:, 0], segs[:, 2]),
                                     np.minimum(segs[:, 1], segs[:, 3]),
                                     np.maximum(segs[:, 0], segs[:, 2]),
                                     np.maximum(segs[:, 1], segs[:, 3])])
        if len(segs) and len(text_boxes):
            meets = ((seg_boxes[:, None, 0] <= text_boxes[None, :, 2])
                     & (seg_boxes[:, None, 2] >= text_boxes[None, :, 0])
                     & (seg_boxes[:, None, 1] <= text_boxes[None, :, 3])
                     & (seg_boxes[:, None, 3] >= text_boxes[None, :, 1]))
            segs = segs[meets.any(axis=1)]
        else:
            segs = segs[:0]
        area_rows = near(np.array(areas, dtype=float).reshape(-1, 4), text_boxes)

        def join_boxes(a, b):
            return np.column_stack([np.minimum(a[:, 0], b[:, 0]), np.minimum(a[:, 1], b[:, 1]),
                                    np.maximum(a[:, 2], b[:, 2]), np.maximum(a[:, 3], b[:, 3])])

        def join_lines(a, b):  # two segments in a row of a path become one chord
            return np.column_stack([a[:, :2], b[:, 2:]])

        return {"lines": capped(segs, join_lines), "areas": capped(area_rows, join_boxes),
                "width": round(width, 4)}

    def camera_state(scene) -> list[float]:
        """Zoom, frame centre and orientation: equal in two samples = the camera held still."""
        camera = scene.camera
        values = []
        for name in ("get_zoom", "get_phi", "get_theta"):
            getter = getattr(camera, name, None)
            values.append(float(getter()) if getter else 0.0)
        frame = getattr(camera, "frame", None)
        center = (frame.get_center() if frame is not None else
                  getattr(camera, "frame_center", (0.0, 0.0, 0.0)))
        values.extend(float(v) for v in np.asarray(center, dtype=float).ravel()[:3])
        return [round(v, 4) for v in values]

    def snapshot(scene, at: str, when: float | None = None) -> None:
        project, width, height, fixed = frame_of(scene)
        px_per_unit = config.pixel_height / height
        items = []
        for mob in outermost_texts(scene.mobjects):
            if not visible(mob):
                continue
            pts = mob.get_all_points()
            if not len(pts):
                continue
            flat = project(mob, pts)
            xmin, ymin = float(flat[:, 0].min()), float(flat[:, 1].min())
            xmax, ymax = float(flat[:, 0].max()), float(flat[:, 1].max())
            font = getattr(mob, "font_size", None)
            if mob not in fixed and hasattr(scene.camera, "get_zoom"):
                zoom = float(scene.camera.get_zoom())
            else:
                zoom = 1.0
            em_units = (float(font) * _EM_PER_FONT_UNIT * zoom if font else
                        (ymax - ymin) / max(1, label_of(mob).count("\\\\") + 1))
            item = {
                "kind": "math" if isinstance(mob, SingleStringMathTex) else "text",
                "label": label_of(mob),
                "box": [round(v, 4) for v in (xmin, ymin, xmax, ymax)],
                "em_px": round(em_units * px_per_unit, 2),
                "zoom": round(zoom, 3),
            }
            lane = getattr(mob, "mythloop_lane", None)  # mythloop.scenekit's caption lane
            if isinstance(lane, str):
                item["lane"] = lane[:20]
            if item["kind"] == "math":
                parts = parts_of(mob, project)
                if parts:
                    item["parts"] = parts
            items.append(item)
        # every other drawing (axes, arrows, surfaces, images, groups) as a box: the parent
        # holds the record against the rendered frames, and ink must be accounted for
        text_boxes = np.array([i["box"] for i in items], dtype=float).reshape(-1, 4)
        for mob in scene.mobjects:
            try:  # a mobject of any kind (trackers, points) must never stop the render
                if isinstance(mob, text_types) or not drawn(mob):
                    continue
                pts = mob.get_all_points()
                if len(pts):
                    items.append({"kind": "shape", "label": type(mob).__name__[:40],
                                  "box": box_of(project(mob, pts)),
                                  "ink": ink_of(mob, project, text_boxes)})
            except Exception:  # noqa: BLE001, S112 - the probe only observes
                continue
        if when is None:
            when = float(getattr(scene.renderer, "time", 0.0))
        snapshots.append({"at": at, "t": round(when, 3), "camera": camera_state(scene),
                          "frame": [round(width, 4), round(height, 4)], "items": items})

    original_wait = Scene.wait
    original_tear_down = Scene.tear_down
    original_update = Scene.update_to_time
    original_progression = Scene.get_time_progression
    plays = {"count": 0, "next": SAMPLE_S, "last_t": None}

    def update_to_time(self, t):
        result = original_update(self, t)
        if plays["last_t"] is None or t <= plays["last_t"]:  # a new play starts
            plays["count"] += 1
            plays["next"] = SAMPLE_S
        plays["last_t"] = t
        run_time = float(getattr(self, "duration", 0.0) or 0.0)
        if t + 1e-6 >= plays["next"] and t < run_time - 1e-6:
            while plays["next"] <= t + 1e-6:
                plays["next"] += SAMPLE_S
            # the scene time of this sample: a rendered play has added a frame per earlier
            # step (the renderer's clock is at start + t already); a skipped one (a dry run
            # of cached or skipped animations) added its whole run time before the first step
            clock = float(getattr(self.renderer, "time", 0.0))
            start = clock - run_time if getattr(self.renderer, "skip_animations", False) else clock - t
            snapshot(self, f"play {plays['count']} at {t:.2f}s", when=start + t)
        return result

    def get_time_progression(self, run_time, *args, **kwargs):
        progression = original_progression(self, run_time, *args, **kwargs)
        if self.renderer.skip_animations and not kwargs.get("override_skip_animations"):
            # a dry run jumps to each animation's end: visit the sample times on the way
            times = [k * SAMPLE_S for k in range(1, int(run_time / SAMPLE_S) + 1)
                     if k * SAMPLE_S < run_time - 1e-6] + [run_time]
            progression.close()
            progression = _Steps(times)
        return progression

    original_play = Scene.play

    def play(self, *args, **kwargs):
        if not any(s["at"] == "start" for s in snapshots[:1]):
            snapshot(self, "start", when=0.0)  # the declared state, before anything plays
        return original_play(self, *args, **kwargs)

    def wait(self, *args, **kwargs):
        result = original_wait(self, *args, **kwargs)
        count = sum(1 for s in snapshots if s["at"].startswith("wait")) + 1
        snapshot(self, f"wait {count}")
        return result

    def tear_down(self):
        if not any(s["at"] == "start" for s in snapshots[:1]):
            snapshot(self, "start", when=0.0)  # a still scene: what it shows from the start
        snapshot(self, "end")
        record = {"scene": type(self).__name__, "pixel_height": config.pixel_height,
                  "probe_version": PROBE_VERSION, "sample_s": SAMPLE_S,
                  "snapshots": snapshots}
        tmp = f"{out_path}.tmp"
        text = json.dumps(record)  # in one piece: json.dump to a file encodes in pure Python
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, out_path)
        return original_tear_down(self)

    Scene.play = play  # type: ignore[method-assign]
    Scene.wait = wait  # type: ignore[method-assign]
    Scene.tear_down = tear_down  # type: ignore[method-assign]
    Scene.update_to_time = update_to_time  # type: ignore[method-assign]
    Scene.get_time_progression = get_time_progression  # type: ignore[method-assign]


class _Steps(list):
    """The times a dry-run animation visits (a list with the progress bar's close())."""

    def close(self) -> None:
        pass
