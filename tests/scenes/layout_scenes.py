"""Fixture scenes for the layout check (trusted test code, run with manim --dry_run)."""

from manim import (
    DEGREES,
    DOWN,
    RIGHT,
    UP,
    FadeIn,
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
        cap = Text("heat flows from hot to cold", font_size=28).to_edge(DOWN)
        self.play(FadeIn(cap))
        self.wait(0.5)


class OffFrame(Scene):
    def construct(self):
        eq = MathTex(r"u_t = \alpha u_{xx}", font_size=72).shift(RIGHT * 7)
        small = Text("tiny footnote", font_size=10).to_edge(DOWN)
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
        cap = Text("fixed caption", font_size=28).to_edge(DOWN)
        self.add_fixed_in_frame_mobjects(cap)
        self.play(FadeIn(eq), FadeIn(cap))
        self.wait(0.5)
