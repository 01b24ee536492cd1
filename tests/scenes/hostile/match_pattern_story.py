# ruff: noqa
"""Hostile: a class pattern looks an attribute up without writing it as one:
`match np: case object(save=store)` binds np.save, then calls it by a plain name."""

import numpy as np

from manim import *


class PatternStory(Scene):
    def construct(self):
        heights = np.linspace(0, 1, 5)
        try:
            match np:
                case object(save=store):
                    store("/tmp/mythloop_hostile_match.npy", heights)
        except Exception as exc:
            print("match payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
