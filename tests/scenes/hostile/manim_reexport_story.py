# ruff: noqa
"""Hostile: uses manim's own file helpers and the os module they carry."""

from manim import *
from manim.utils import file_ops


class HelperStory(Scene):
    def construct(self):
        try:
            file_ops.os.system("touch /tmp/mythloop_hostile_reexport")
        except Exception as exc:
            print("re-export payload refused:", exc)
        self.play(FadeIn(Triangle()), run_time=0.3)
