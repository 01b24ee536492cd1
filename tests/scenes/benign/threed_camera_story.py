# ruff: noqa
"""A short ThreeDScene: a headline, a formula, a tilt with move_camera and back."""

from manim import *

BG = "#0c0c0b"
TEXT = "#faf9f5"
CORAL = "#d97757"


class CameraTiltStory(ThreeDScene):
    def construct(self):
        self.camera.background_color = BG
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES)
        headline = Text("Area grows as r squared", font_size=64, color=TEXT)
        self.add_fixed_in_frame_mobjects(headline)
        self.play(FadeIn(headline), run_time=0.4)
        formula = MathTex(r"A = \pi r^2", color=CORAL).next_to(headline, DOWN)
        self.add_fixed_in_frame_mobjects(formula)
        self.play(Write(formula), run_time=0.5)
        axes = ThreeDAxes(x_range=[-2, 2], y_range=[-2, 2], z_range=[-1, 1])
        self.play(Create(axes), run_time=0.4)
        self.move_camera(phi=60 * DEGREES, theta=-45 * DEGREES, run_time=0.6)
        self.wait(0.6)
        self.move_camera(phi=0, theta=-90 * DEGREES, run_time=0.4)
