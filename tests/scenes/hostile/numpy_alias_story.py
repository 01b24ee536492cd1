# ruff: noqa
"""Hostile: binds numpy to a plain name first, then writes with savez through it
(verify tracked only import aliases)."""

import numpy as np

from manim import *


class AliasStory(Scene):
    def construct(self):
        n = np
        try:
            n.savez("/tmp/mythloop_hostile_alias.npz", grid=n.eye(3))
        except Exception as exc:
            print("numpy alias payload refused:", exc)
        self.play(FadeIn(Circle()), run_time=0.3)
