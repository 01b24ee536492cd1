# ruff: noqa
"""Benign: a formula with a caption, on warm paper (light art direction)."""

from manim import *

PAPER = ManimColor("#f4efe4")
INK = "#1f1e1c"


class EulerStory(Scene):
    def construct(self):
        self.camera.background_color = PAPER
        formula = MathTex(r"e^{i\pi}", "+", "1", "=", "0", color=INK).scale(1.4)
        caption = Text("Five constants, one line", font_size=30, color=INK).to_edge(DOWN)
        self.play(Write(formula), run_time=0.6)
        self.play(Indicate(formula[0], color="#d97757"), FadeIn(caption), run_time=0.5)
        self.wait(0.3)
