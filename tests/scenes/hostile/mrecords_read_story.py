# ruff: noqa
"""Hostile: reads a file outside the render with numpy.ma.mrecords.fromtextfile and
shows its first field on screen."""

import numpy.ma.mrecords as records

from manim import *


class TableStory(Scene):
    def construct(self):
        shown = "nothing"
        try:
            table = records.fromtextfile("/etc/os-release", delimiter="=")
            shown = str(table.dtype.names)
        except Exception as exc:
            shown = f"mrecords payload refused: {exc}"
        print("leaked:", shown)
        self.play(Write(Text(shown[:40], font_size=24)), run_time=0.3)
