# ruff: noqa
r"""Hostile: has latex read a file into a formula with \input built by \csname, a
spelling the LaTeX check did not know."""

from manim import *


class FormulaStory(Scene):
    def construct(self):
        try:
            leak = MathTex(r"\text{\csname input\endcsname{/etc/hostname}}")
            self.add(leak)
        except Exception as exc:
            print("csname payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
