"""Layout-safe building blocks for generated Manim scenes (imported inside the render sandbox).

A generated scene may write `from mythloop.scenekit import CaptionLane, fit, zoom_to_fit,
end_scene` (verify allows exactly these names, see sandbox_policy.SCENE_HELPERS). Standard
library and manim only: the sandboxed render imports it from the installed package.

The frame is cut into lanes, in frame units (the default frame is 14.2 x 8):

    title lane      the top TITLE_SHARE of the frame: a parked headline
    safe area       everything between, SAFE_MARGIN from the sides: formulas, graphs, groups
    caption lane    a CAPTION_HEIGHT band just above the subtitle band: one caption at a time
    subtitle band   the bottom SUBTITLE_SHARE of the frame: kept empty for burnt subtitles

- `CaptionLane(scene)`: `show(text)` fades the previous caption out, then the new one in
  (never two at once), pinned to the frame (camera moves and zooms leave it in place);
  `clear()` fades the current one out.
- `fit(mob)`: scale a formula or group down (never up) and shift it so it lies in the safe
  area of the unzoomed frame.
- `zoom_to_fit(scene, mob, focus=None)`: move the camera (ThreeDScene.move_camera or a
  MovingCameraScene's frame) to zoom in on `focus` (a part of `mob`) as far as `max_zoom`
  allows while the whole of `mob` stays inside the safe area of the zoomed view: no symbol is
  ever cut by the frame edge, and nothing enters the caption lane or the subtitle band.
- `end_scene(scene, lane, keep=[title])`: clear the captions (a scene's captions leave with
  it), fade out everything else but `keep` (what the next scene re-creates as its declared
  state) and hold a beat, so the next scene starts from exactly the frame this one ends on.

The layout check (mythloop.mythos.sandbox.layout) knows these lanes: text entering the
subtitle band is a `subtitle_band` finding, a lane caption still on screen at the scene's
end a `caption_left` one, and what a scene ends on that the next scene does not start from a
`hard_cut` one.
"""

from __future__ import annotations

import numpy as np
from manim import DOWN, UP, FadeIn, FadeOut, Text, UpdateFromAlphaFunc, config

__all__ = ["CaptionLane", "fit", "zoom_to_fit", "end_scene", "safe_area", "caption_lane_box",
           "subtitle_band_top", "SUBTITLE_SHARE", "CAPTION_HEIGHT", "TITLE_SHARE",
           "SAFE_MARGIN", "LANE_TAG"]

SUBTITLE_SHARE = 0.16  # bottom share of the frame height kept free for burnt subtitles
CAPTION_HEIGHT = 0.8  # frame units: the caption lane, just above the subtitle band
CAPTION_GAP = 0.08  # frame units between the subtitle band and the caption lane
TITLE_SHARE = 0.12  # top share of the frame height: the parked headline
SAFE_MARGIN = 0.4  # frame units kept free at the left and right edges
ZOOM_PAD = 0.2  # frame units kept free around a zoomed formula (a box around a part)
LANE_TAG = "mythloop_lane"  # attribute the layout probe reads on a lane caption


def _frame_size() -> tuple[float, float]:
    return float(config.frame_width), float(config.frame_height)


def subtitle_band_top() -> float:
    """The top of the subtitle band, in frame units (y; the frame's centre is 0)."""
    _, height = _frame_size()
    return -height / 2 + SUBTITLE_SHARE * height


def caption_lane_box() -> tuple[float, float, float, float]:
    """(xmin, ymin, xmax, ymax) of the caption lane in frame units."""
    width, _ = _frame_size()
    bottom = subtitle_band_top() + CAPTION_GAP
    return (-width / 2 + SAFE_MARGIN, bottom, width / 2 - SAFE_MARGIN, bottom + CAPTION_HEIGHT)


def safe_area() -> tuple[float, float, float, float]:
    """(xmin, ymin, xmax, ymax) in frame units: below the title lane, above the caption lane,
    SAFE_MARGIN from the sides."""
    width, height = _frame_size()
    top = height / 2 - TITLE_SHARE * height
    return (-width / 2 + SAFE_MARGIN, caption_lane_box()[3] + 0.1, width / 2 - SAFE_MARGIN, top)


def _box(mob) -> tuple[float, float, float, float]:
    points = mob.get_all_points()
    if not len(points):
        center = mob.get_center()
        return (center[0], center[1], center[0], center[1])
    return (float(points[:, 0].min()), float(points[:, 1].min()),
            float(points[:, 0].max()), float(points[:, 1].max()))


def fit(mob, area: tuple[float, float, float, float] | None = None):
    """Scale `mob` down (never up) and shift it so it lies inside `area` (default: the safe
    area of the unzoomed frame). Returns `mob`."""
    xmin, ymin, xmax, ymax = area or safe_area()
    x0, y0, x1, y1 = _box(mob)
    width, height = x1 - x0, y1 - y0
    scale = min(1.0, (xmax - xmin) / width if width > 0 else 1.0,
                (ymax - ymin) / height if height > 0 else 1.0)
    if scale < 1.0:
        mob.scale(scale * 0.999)
        x0, y0, x1, y1 = _box(mob)
    dx = (xmin - x0) if x0 < xmin else (xmax - x1) if x1 > xmax else 0.0
    dy = (ymin - y0) if y0 < ymin else (ymax - y1) if y1 > ymax else 0.0
    if dx or dy:
        mob.shift(np.array([dx, dy, 0.0]))
    return mob


def _zoom_plan(box, focus_box, max_zoom: float, area) -> tuple[float, np.ndarray]:
    """(zoom, frame centre) that frames `focus_box` as closely as `max_zoom` allows with all
    of `box` inside `area` of the zoomed view."""
    xmin, ymin, xmax, ymax = area
    x0, y0, x1, y1 = box
    width, height = max(x1 - x0, 1e-6), max(y1 - y0, 1e-6)
    zoom = max(1.0, min(max_zoom, (xmax - xmin) / width, (ymax - ymin) / height))
    centre = []
    for lo, hi, low_edge, high_edge, target in (
            (x0, x1, xmin, xmax, (focus_box[0] + focus_box[2]) / 2),
            (y0, y1, ymin, ymax, (focus_box[1] + focus_box[3]) / 2)):
        # projected = (p - c) * zoom must stay in [low_edge, high_edge] for p in [lo, hi]
        c_min, c_max = hi - high_edge / zoom, lo - low_edge / zoom
        if c_min > c_max:  # cannot happen once zoom fits; keep the middle to be safe
            c_min = c_max = (c_min + c_max) / 2
        centre.append(min(max(target, c_min), c_max))
    return zoom, np.array([centre[0], centre[1], 0.0])


def zoom_to_fit(scene, mob, focus=None, max_zoom: float = 2.5, run_time: float = 1.0,
                added_anims=(), zoom: float | None = None, pad: float = ZOOM_PAD):
    """Zoom the camera in on `focus` (default: `mob`) while all of `mob` stays in the safe area
    of the zoomed view; `zoom=1` (or a smaller `max_zoom`) pulls back to the whole frame.

    `pad` (frame units before the zoom) is kept free around `mob`, for a box drawn around a
    part. Works with a ThreeDScene (`move_camera(frame_center=..., zoom=...)`) and a
    MovingCameraScene (`camera.frame` moved and resized). Returns the zoom used."""
    frame = getattr(scene.camera, "frame", None)
    if zoom is not None and zoom <= 1.0 + 1e-9:
        target_zoom, centre = 1.0, np.zeros(3)
    else:
        x0, y0, x1, y1 = _box(mob)
        target_zoom, centre = _zoom_plan((x0 - pad, y0 - pad, x1 + pad, y1 + pad),
                                         _box(focus if focus is not None else mob),
                                         zoom or max_zoom, safe_area())
    trackers = getattr(scene.camera, "zoom_tracker", None), \
        getattr(scene.camera, "_frame_center", None)
    if frame is None and None not in trackers:  # a ThreeDScene's camera (cairo)
        _glide(scene, *trackers, target_zoom, centre, run_time, added_anims)
    elif hasattr(scene, "move_camera") and frame is None:
        scene.move_camera(frame_center=centre, zoom=target_zoom, run_time=run_time,
                          added_anims=list(added_anims))
    elif frame is not None:
        width, _ = _frame_size()
        scene.play(frame.animate.set(width=width / target_zoom).move_to(centre), *added_anims,
                   run_time=run_time)
    elif added_anims:
        scene.play(*added_anims, run_time=run_time)
    return target_zoom


def _glide(scene, zoom_tracker, centre_point, zoom: float, centre, run_time: float,
           added_anims) -> None:
    """A ThreeDScene camera move whose view edges move in straight lines: the view's centre
    and its size (1 / zoom) change at the same pace, so what lies inside the view at both ends
    of the move stays inside all along (`move_camera` changes the zoom itself at that pace,
    which lets a formula near an edge poke out mid-move)."""
    start_zoom = float(zoom_tracker.get_value())
    start = np.array(centre_point.get_center(), dtype=float)
    end = np.array(centre, dtype=float)

    def step(point, alpha):
        zoom_tracker.set_value(1.0 / ((1 - alpha) / start_zoom + alpha / zoom))
        point.move_to(start + alpha * (end - start))

    scene.play(UpdateFromAlphaFunc(centre_point, step), *added_anims, run_time=run_time)
    scene.remove(centre_point)  # as move_camera does: a still camera redraws only what moves


class CaptionLane:
    """One caption at a time in the caption lane, pinned to the frame."""

    def __init__(self, scene, font_size: int = 30, color=None) -> None:
        self.scene = scene
        self.font_size = font_size
        self.color = color
        self.current = None

    def _make(self, text: str, color=None):
        colour = color or self.color
        mob = Text(text, font_size=self.font_size) if colour is None else \
            Text(text, font_size=self.font_size, color=colour)
        setattr(mob, LANE_TAG, "caption")
        xmin, ymin, xmax, ymax = caption_lane_box()
        if mob.width > xmax - xmin:
            mob.scale_to_fit_width(xmax - xmin)
        if mob.height > ymax - ymin:
            mob.scale_to_fit_height(ymax - ymin)
        mob.move_to(np.array([0.0, (ymin + ymax) / 2, 0.0]))
        return mob

    def _pin(self, mob) -> None:
        """Fixed in frame: camera moves and zooms leave it where it is."""
        scene = self.scene
        frame = getattr(scene.camera, "frame", None)
        if hasattr(scene, "add_fixed_in_frame_mobjects"):
            scene.add_fixed_in_frame_mobjects(mob)
            scene.remove(mob)
        elif frame is not None:  # a MovingCameraScene: follow the frame
            width, _ = _frame_size()
            offset = mob.get_center().copy()
            size = mob.width

            def follow(m, frame=frame, offset=offset, size=size, width=width):
                ratio = frame.width / width
                m.set(width=size * ratio).move_to(frame.get_center() + offset * ratio)

            mob.add_updater(follow)

    def show(self, text: str, color=None, run_time: float = 0.6):
        """Replace the caption: the previous one fades out, then the new one fades in."""
        new = self._make(text, color)
        self._pin(new)
        if self.current is not None:  # out first: two captions never share the lane
            self.scene.play(FadeOut(self.current, shift=0.1 * DOWN), run_time=0.4 * run_time)
        self.scene.play(FadeIn(new, shift=0.1 * UP), run_time=0.6 * run_time)
        self.current = new
        return new

    def clear(self, run_time: float = 0.4) -> None:
        """Fade the current caption out (nothing when there is none)."""
        if self.current is not None:
            self.scene.play(FadeOut(self.current), run_time=run_time)
            self.current = None


def _shows_something(mob) -> bool:
    return any(len(m.points) for m in mob.get_family())


def end_scene(scene, *lanes: CaptionLane, keep=(), hold: float = 0.4,
              run_time: float = 0.6) -> None:
    """A scene's end: its captions fade out, then everything else on screen but `keep` (what
    the next scene re-creates as its declared state, e.g. a parked title) fades out, and the
    frame holds `hold` seconds. The next scene then starts from exactly what this one ends
    on: nothing vanishes in one frame at the cut, and the last frame (held while the
    narration finishes) carries no stale caption."""
    for lane in lanes:
        lane.clear()
    kept = {id(m) for mob in keep for m in mob.get_family()}
    left = [mob for mob in scene.mobjects
            if id(mob) not in kept and _shows_something(mob)
            and not any(id(m) in kept for m in mob.get_family())]
    if left:
        scene.play(*(FadeOut(mob) for mob in left), run_time=run_time)
    if hold > 0:
        scene.wait(hold)
