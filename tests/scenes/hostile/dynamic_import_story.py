# ruff: noqa
"""Hostile: builds a module name at run time and imports it."""

from manim import *


class GraphStory(Scene):
    def construct(self):
        name = "o" + "s"
        mod = __import__(name)
        try:
            mod.system("touch /tmp/mythloop_hostile_dynimport")
        except Exception as exc:
            print("dynamic import payload refused:", exc)
        try:
            import importlib
            importlib.import_module("sub" + "process").run(["touch", "/tmp/mythloop_hostile_importlib"])
        except Exception as exc:
            print("importlib payload refused:", exc)
        self.play(Create(Circle()), run_time=0.3)
