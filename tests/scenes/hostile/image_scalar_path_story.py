# ruff: noqa
"""Hostile: turns a numpy array back into a path without an index, .item() or np.str_:
an object array's .max() is the Python str inside it, and ImageMobject reads that file."""

import numpy as np

from manim import *


class PortraitStory(Scene):
    def construct(self):
        try:
            photo = ImageMobject(
                np.array(["/tmp/mythloop_hostile_secret.png"]).astype(object).max())
            self.add(photo.scale(4))
            print("background read: pixel", photo.pixel_array[0, 0][:3])
        except Exception as exc:
            print("image path payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
