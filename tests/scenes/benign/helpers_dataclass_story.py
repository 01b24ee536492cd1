# ruff: noqa
"""Benign: the idioms that must not trip verify (dataclass config, getattr with a
literal name, super().__init__, typing, rate_functions, camera reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from manim import *
from manim.utils.rate_functions import smooth


@dataclass
class Palette:
    text: str = "#faf9f5"
    accents: list[str] = field(default_factory=lambda: ["#d97757", "#6a9bcc"])


class Badge(VGroup):
    def __init__(self, label: str, color: str, **kwargs):
        super().__init__(**kwargs)
        self.add(RoundedRectangle(corner_radius=0.2, width=2, height=0.8, color=color),
                 Text(label, font_size=24))


class BadgeStory(ThreeDScene):
    def construct(self):
        palette = Palette()
        self.set_camera_orientation(phi=0, theta=-90 * DEGREES)
        badges: Sequence[Badge] = [Badge(str(i), c) for i, c in enumerate(palette.accents)]
        row = VGroup(*badges).arrange(RIGHT)
        width = getattr(row, "width", 1.0)
        phi = self.camera.get_phi()
        self.play(FadeIn(row, rate_func=smooth), run_time=0.4)
        self.move_camera(phi=phi + 30 * DEGREES, run_time=0.4)
        if width > 0 and __name__ != "__main__":
            self.wait(0.2)


if __name__ == "__main__":
    print("render with: manim -ql helpers_dataclass_story.py BadgeStory")
