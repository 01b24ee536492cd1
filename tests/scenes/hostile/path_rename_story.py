# ruff: noqa
"""Hostile: gets a pathlib.Path from a Text mobject (its SVG's get_file_path()), makes
another from its type, and moves a file outside the render with rename()."""

from manim import *


class RenameStory(Scene):
    def construct(self):
        label = Text("moving")
        try:
            make_path = type(label.get_file_path())
            make_path("/tmp/mythloop_hostile_victim").rename("/tmp/mythloop_hostile_moved")
        except Exception as exc:
            print("rename payload refused:", exc)
        self.play(Write(label), run_time=0.3)
