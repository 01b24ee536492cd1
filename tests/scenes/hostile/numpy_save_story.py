# ruff: noqa
"""Hostile: 'caches' a numpy array into /tmp with np.save."""

import numpy as np

from manim import *


class SurfaceStory(Scene):
    def construct(self):
        grid = np.linspace(-1, 1, 16)
        heights = np.outer(grid, grid)
        try:
            np.save("/tmp/mythloop_hostile_np.npy", heights)
        except Exception as exc:
            print("np.save refused:", exc)
        dots = VGroup(*[Dot([x, y, 0], radius=0.03) for x, y in zip(grid, heights[0])])
        self.play(FadeIn(dots), run_time=0.3)
