"""Fixture scenes for the layout check (trusted test code, run with manim --dry_run)."""

from manim import (
    DEGREES,
    DOWN,
    LEFT,
    ORIGIN,
    RIGHT,
    UP,
    FadeIn,
    FadeOut,
    MathTex,
    Scene,
    Text,
    ThreeDScene,
    Write,
)


class Clean(Scene):
    def construct(self):
        title = Text("The heat equation", font_size=48).to_edge(UP)
        eq = MathTex(r"u_t = \alpha u_{xx}", font_size=48)
        self.play(Write(title))
        self.play(Write(eq))
        self.wait(0.5)
        cap = Text("heat flows from hot to cold", font_size=28).to_edge(DOWN, buff=1.5)
        self.play(FadeIn(cap))
        self.wait(0.5)


class OffFrame(Scene):
    def construct(self):
        eq = MathTex(r"u_t = \alpha u_{xx}", font_size=72).shift(RIGHT * 7)
        small = Text("tiny footnote", font_size=10).to_edge(DOWN, buff=1.5)
        a = Text("overlapping A", font_size=36)
        b = Text("overlapping B", font_size=36).shift(0.1 * DOWN)
        self.play(FadeIn(eq), FadeIn(small), FadeIn(a), FadeIn(b))
        self.wait(0.5)


class Zoomed(ThreeDScene):
    def construct(self):
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES, zoom=3)
        # zoomed in on alpha: the rest of the formula leaves the frame, as intended
        wide = MathTex(r"u_t = \alpha \, u_{xx} \quad \text{on the rod}", font_size=48)
        self.play(FadeIn(wide))
        self.wait(0.5)
        self.remove(wide)
        eq = MathTex(r"E = mc^2", font_size=48).shift(RIGHT * 3.5)
        cap = Text("fixed caption", font_size=28).to_edge(DOWN, buff=1.5)
        self.add_fixed_in_frame_mobjects(cap)
        self.play(FadeIn(eq), FadeIn(cap))
        self.wait(0.5)


class CrossFade(Scene):
    """A caption cross-fades into the next in the same place: mid-fade both are on screen."""

    def construct(self):
        first = Text("the first caption here", font_size=30).to_edge(DOWN, buff=1.5)
        self.play(FadeIn(first))
        self.wait(0.5)
        second = Text("a second caption there", font_size=30).to_edge(DOWN, buff=1.5)
        self.play(FadeIn(second), FadeOut(first), run_time=0.6)
        self.wait(0.5)


class OneAfterAnother(Scene):
    """The same captions, the first gone before the second comes: never both at once."""

    def construct(self):
        first = Text("the first caption here", font_size=30).to_edge(DOWN, buff=1.5)
        self.play(FadeIn(first))
        self.wait(0.5)
        second = Text("a second caption there", font_size=30).to_edge(DOWN, buff=1.5)
        self.play(FadeOut(first), run_time=0.3)
        self.play(FadeIn(second), run_time=0.3)
        self.wait(0.5)


class ZoomCutsAPart(ThreeDScene):
    """Zoomed into the curvature term, the time derivative is cut in two by the left edge."""

    def construct(self):
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES)
        eq = MathTex(r"\frac{\partial u}{\partial t}", "=", r"\alpha",
                     r"\frac{\partial^2 u}{\partial x^2}", font_size=72)
        self.add(eq)
        self.wait(0.3)
        self.move_camera(frame_center=eq[3].get_center(), zoom=2.4, run_time=1.0)
        self.wait(0.5)
        self.move_camera(frame_center=ORIGIN, zoom=1.0, run_time=1.0)


class ZoomSweepsPast(ThreeDScene):
    """A zoom onto one formula sweeps the frame edge across another on the way (the move),
    then holds with every part wholly in or wholly out: intended."""

    def construct(self):
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES)
        left = MathTex("a", "+", "b", font_size=60).shift(4 * LEFT)
        right = MathTex("c", "=", "d", font_size=60).shift(3 * RIGHT)
        self.add(left, right)
        self.wait(0.3)
        self.move_camera(frame_center=right.get_center(), zoom=3.0, run_time=2.0,
                         rate_func=lambda t: t)
        self.wait(0.5)
        self.move_camera(frame_center=ORIGIN, zoom=1.0, run_time=1.0)
        self.wait(0.3)
