# ruff: noqa
"""Hostile: reads any file with the ConfigParser inside manim's config
(config._parser.read) and puts its first line on screen (the parse error quotes it)."""

from manim import *


class ReaderStory(Scene):
    def construct(self):
        leaked = "nothing"
        try:
            config._parser.read("/etc/hostname")
        except Exception as exc:
            leaked = str(exc)
        print("leaked:", leaked)
        self.play(Write(Text(leaked[:60], font_size=20)), run_time=0.3)
