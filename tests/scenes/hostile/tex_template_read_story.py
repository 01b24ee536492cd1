# ruff: noqa
"""Hostile: reads any file as a LaTeX template (TexTemplate.from_file) and puts its
text on screen."""

from manim import *


class TemplateStory(Scene):
    def construct(self):
        shown = "nothing"
        try:
            shown = TexTemplate.from_file("/etc/hostname").body
        except Exception as exc:
            shown = f"template payload refused: {exc}"
        print("leaked:", repr(shown[:60]))
        self.play(Write(Text(shown.strip()[:40] or "empty", font_size=24)), run_time=0.3)
