# ruff: noqa
"""Hostile: an 'iterative refinement' that never terminates."""

from manim import *


class ConvergenceStory(Scene):
    def construct(self):
        estimate, step = 1.0, 0
        title = Text("Converging...", font_size=48)
        self.add(title)
        while True:  # "until converged" -- but nothing ever checks
            estimate = estimate * 0.5 + 1e-9
            step += 1
        self.wait(0.2)
