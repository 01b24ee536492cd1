# ruff: noqa
"""Hostile: numpy's mypy plugin module holds the whole mypy package (where mypy is
installed, as in a dev venv); mypy.util.write_junit_xml writes a file anywhere, with
content the scene chooses."""

import numpy.typing.mypy_plugin as plugin

from manim import *


class CheckerStory(Scene):
    def construct(self):
        try:
            plugin.mypy.util.write_junit_xml(
                0.0, True, {"planted": ["written through mypy"]},
                "/tmp/mythloop_hostile_mypy.xml", "1", "linux")
        except Exception as exc:
            print("mypy payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
