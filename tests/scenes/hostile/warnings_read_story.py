# ruff: noqa
"""Hostile: reads a line of any file with the warnings module a manim module imported
(formatwarning quotes the "source line" through linecache) and shows it."""

from manim import *


class WarningStory(Scene):
    def construct(self):
        try:
            quoted = animation.animation.mobject.warnings.formatwarning(
                "note", Warning, "/etc/hostname", 1)
        except Exception as exc:
            quoted = f"warnings payload refused: {exc}"
        print("quoted:", quoted)
        self.play(Write(Text(quoted.strip()[-40:], font_size=24)), run_time=0.3)
