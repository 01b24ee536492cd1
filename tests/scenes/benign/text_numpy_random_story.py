# ruff: noqa
"""Benign: seeded random dots, numpy geometry, itertools/functools helpers, Text."""

import functools
import itertools
import math
import random

import numpy as np
from manim import *

PAPER = "#f4efe4"
INK = "#1f1e1c"


@functools.lru_cache(maxsize=None)
def ring(n: int) -> tuple:
    return tuple((math.cos(TAU * k / n), math.sin(TAU * k / n), 0.0) for k in range(n))


class ScatterStory(Scene):
    def construct(self):
        self.camera.background_color = PAPER
        random.seed(7)
        rng = np.random.default_rng(7)
        title = Text("Random points, fixed seed", font_size=40, color=INK).to_edge(UP)
        points = [np.array(p) * 2 for p in ring(12)]
        jitter = rng.normal(0, 0.1, size=(12, 3)) * np.array([1, 1, 0])
        dots = VGroup(*[Dot(p + j, color=random.choice(["#d97757", "#6a9bcc", "#788c5d"]))
                        for p, j in zip(points, jitter)])
        edges = VGroup(*[Line(a.get_center(), b.get_center(), stroke_width=1, color=INK)
                         for a, b in itertools.pairwise(dots)])
        self.play(FadeIn(title), run_time=0.3)
        self.play(LaggedStart(*[GrowFromCenter(d) for d in dots], lag_ratio=0.05), run_time=0.6)
        self.play(Create(edges), run_time=0.5)
        self.wait(0.2)
