# ruff: noqa
"""Hostile: overwrites an existing file through numpy's DataSource, reached with
getattr(np, "lib") so that no attribute written in the chain names I/O (issue 50)."""

import numpy as np

from manim import *


class LedgerStory(Scene):
    def construct(self):
        try:
            opener = getattr(np, "lib").npyio.DataSource(None)
            with opener.open("/tmp/mythloop_hostile_datasource", "w") as out:
                out.write("overwritten through DataSource\n")
        except Exception as exc:
            print("DataSource payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
