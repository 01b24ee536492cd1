"""Fixture scenes written with mythloop.scenekit (trusted test code, run with manim --dry_run)."""

from manim import DEGREES, DOWN, MathTex, MovingCameraScene, Text, ThreeDScene

from mythloop.scenekit import CaptionLane, end_scene, fit, zoom_to_fit

WIDE = [r"\frac{\partial u}{\partial t}", "=", r"\alpha", r"\frac{\partial^2 u}{\partial x^2}",
        r"\quad\text{on a rod}"]


class LaneReplaced(ThreeDScene):
    """Two captions one after the other, a zoom between them, then the scene's end."""

    def construct(self):
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES)
        lane = CaptionLane(self)
        eq = fit(MathTex(*WIDE, font_size=60))
        self.add(eq)
        lane.show("the first caption of the scene")
        self.wait(0.3)
        zoom_to_fit(self, eq, focus=eq[0], max_zoom=2.5)
        lane.show("a second caption replaces it")
        self.wait(0.3)
        end_scene(self, lane)


class LaneLeftOn(ThreeDScene):
    """A caption still up when the scene ends (no end_scene)."""

    def construct(self):
        lane = CaptionLane(self)
        lane.show("left behind")
        self.wait(0.3)


class ZoomFitted(ThreeDScene):
    """A formula wider than the zoomed view would allow: zoom_to_fit zooms less, and no part is
    cut; a too-wide formula is fitted into the frame first."""

    def construct(self):
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES)
        eq = fit(MathTex(*WIDE, font_size=140))  # wider than the frame before fit
        self.add(eq)
        self.wait(0.3)
        zoom_to_fit(self, eq, focus=eq[3], max_zoom=3.0)
        self.wait(0.5)
        zoom_to_fit(self, eq, zoom=1)
        self.remove(eq)
        small = fit(MathTex(r"\alpha", "+", r"\beta", font_size=48).shift(2 * DOWN))
        self.add(small)
        zoom_to_fit(self, small, focus=small[0], max_zoom=3.0)
        self.wait(0.5)


class ZoomFittedMoving(MovingCameraScene):
    """The same with a MovingCameraScene: its frame moves and shrinks; the caption follows."""

    def construct(self):
        lane = CaptionLane(self)
        eq = fit(MathTex(*WIDE, font_size=60))
        self.add(eq)
        lane.show("a caption that stays put")
        zoom_to_fit(self, eq, focus=eq[3], max_zoom=3.0)
        self.wait(0.5)
        end_scene(self, lane)


class InSubtitleBand(ThreeDScene):
    """Text in the bottom band burnt subtitles take."""

    def construct(self):
        self.add(Text("a caption at the very bottom", font_size=30).to_edge(DOWN, buff=0.3))
        self.wait(0.3)
