# ruff: noqa
"""Hostile: writes an SVG file anywhere with manimpango's text2svg, which manim's
text module holds as MarkupUtils (mobject.text.text_mobject.MarkupUtils)."""

from manim import *


class GlyphStory(Scene):
    def construct(self):
        try:
            mobject.text.text_mobject.MarkupUtils.text2svg(
                "planted", "sans", "NORMAL", "NORMAL", 10, 0, False,
                "/tmp/mythloop_hostile_pango.svg", 0, 0, 100, 100)
        except Exception as exc:
            print("pango payload refused:", exc)
        self.play(Write(Text("glyphs")), run_time=0.3)
