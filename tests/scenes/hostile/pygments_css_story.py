# ruff: noqa
"""Hostile: writes a file anywhere through pygments, which manim's Code module
holds: an HtmlFormatter with full=True writes its cssfile."""

from manim import *


class HighlightStory(Scene):
    def construct(self):
        code = mobject.text.code_mobject
        try:
            code.highlight("x = 1", code.get_lexer_by_name("python"),
                           code.HtmlFormatter(full=True, cssfile="/tmp/mythloop_hostile_pygments.css"))
        except Exception as exc:
            print("pygments payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
