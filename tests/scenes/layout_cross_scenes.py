"""Fixture scenes for drawings over text and cuts between scenes (trusted test code, run with
manim --dry_run). The flagged cases are the film's: a box around one term of the heat
equation cutting the alpha beside it, a tilted 3D surface and its time axis running through
the caption; the allowed ones: a box around a term with room, axes with their own labels, a
label on its panel."""

import numpy as np
from manim import (
    DEGREES,
    DOWN,
    PI,
    UP,
    Axes,
    Create,
    FadeIn,
    Line,
    MathTex,
    Rectangle,
    Scene,
    Surface,
    SurroundingRectangle,
    Text,
    ThreeDScene,
    VGroup,
)

from mythloop.scenekit import CaptionLane, end_scene, fit

HEAT = [r"\frac{\partial u}{\partial t}", "=", r"\alpha", r"\frac{\partial^2 u}{\partial x^2}"]


class BoxCutsAlpha(Scene):
    """The film's box around the curvature term: its left side runs through the alpha."""

    def construct(self):
        eq = fit(MathTex(*HEAT, font_size=72))
        self.add(eq)
        self.play(Create(SurroundingRectangle(eq[3], buff=0.12)), run_time=0.5)
        self.wait(0.3)


class AllowedDrawings(Scene):
    """A box around the time derivative with the equals sign well clear, axes with their
    numbers and axis labels, a label on a filled panel, a lane caption below the plot:
    nothing runs through a text."""

    def construct(self):
        eq = MathTex(HEAT[0], r"\;=\;", *HEAT[2:], font_size=48).to_edge(UP, buff=0.3)
        axes = Axes(x_range=[0, 4, 1], y_range=[0, 2, 1], x_length=7, y_length=3)
        axes.add_coordinates()
        labels = axes.get_axis_labels(x_label="x", y_label="u")
        fit(VGroup(axes, labels))
        self.add(eq)
        self.play(Create(SurroundingRectangle(eq[0], buff=0.1)), run_time=0.5)
        panel = Rectangle(width=2.2, height=0.7).set_fill("#333333", opacity=1)
        panel.move_to(axes.c2p(3, 1.6))
        note = Text("a panel", font_size=28).move_to(panel)
        lane = CaptionLane(self)
        self.play(FadeIn(axes), FadeIn(labels), FadeIn(panel), FadeIn(note), run_time=0.5)
        lane.show("position along the rod")
        self.wait(0.3)
        end_scene(self, lane)


class SurfaceThroughCaption(ThreeDScene):
    """The film's landscape: tilted, the surface and its time axis run through the caption."""

    def construct(self):
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES)
        origin = np.array([-3.0, -1.6, 0.0])

        def to_space(x, t, u):
            return origin + np.array([x / PI * 6.0, t / 1.5 * 3.6, u / 1.4 * 2.0])

        frame = VGroup(Line(to_space(0, 0, 0), to_space(PI, 0, 0)),
                       Line(to_space(0, 0, 0), to_space(0, 1.5, 0)),
                       Line(to_space(0, 0, 0), to_space(0, 0, 1.4)))
        surface = Surface(lambda x, t: to_space(x, t, np.exp(-t) * np.sin(x)),
                          u_range=[0, PI], v_range=[0, 1.5], resolution=(8, 4),
                          fill_opacity=0.85, stroke_width=0)
        lane = CaptionLane(self)
        self.add(frame, surface)
        lane.show("Seen from above: position across, time going up the page")
        self.move_camera(phi=62 * DEGREES, theta=-55 * DEGREES, run_time=1.6)
        self.wait(0.3)


class EndsWithGraph(Scene):
    """Ends with its title and graph on screen (no end_scene): the next scene cuts."""

    def construct(self):
        title = Text("Bumps cool", font_size=32).to_edge(UP)
        axes = Axes(x_range=[0, 3, 1], y_range=[0, 1, 1], x_length=6, y_length=2)
        self.play(FadeIn(title), Create(axes), run_time=0.5)
        self.wait(0.3)


class StartsFromTitle(Scene):
    """Starts from the previous scene's title (its declared state), then fades in more."""

    def construct(self):
        self.add(Text("Bumps cool", font_size=32).to_edge(UP))
        self.play(FadeIn(Text("dips warm", font_size=32).shift(DOWN)), run_time=0.5)
        self.wait(0.3)


class EndsFaded(Scene):
    """The same end, left through end_scene, keeping the title the next scene starts from."""

    def construct(self):
        title = Text("Bumps cool", font_size=32).to_edge(UP)
        axes = Axes(x_range=[0, 3, 1], y_range=[0, 1, 1], x_length=6, y_length=2)
        self.play(FadeIn(title), Create(axes), run_time=0.5)
        self.wait(0.3)
        end_scene(self, keep=[title])
