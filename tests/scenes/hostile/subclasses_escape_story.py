# ruff: noqa
"""Hostile: the classic object-subclasses walk to os.system, no imports needed."""

from manim import *


class TreeStory(Scene):
    def construct(self):
        for cls in ().__class__.__bases__[0].__subclasses__():
            if cls.__name__ == "_wrap_close":
                try:
                    cls.__init__.__globals__["system"]("touch /tmp/mythloop_hostile_subclasses")
                except Exception as exc:
                    print("subclass payload refused:", exc)
        self.play(Create(Square()), run_time=0.3)
