# ruff: noqa
"""Hostile: loads libc through numpy's ctypeslib (reached through a plain alias of
numpy) and creates a file with its creat(): any C function is then reachable."""

import numpy as np

from manim import *


class LibraryStory(Scene):
    def construct(self):
        n = np
        try:
            libc = n.ctypeslib.load_library("libc.so.6", "/lib/x86_64-linux-gnu/")
            libc.creat(b"/tmp/mythloop_hostile_ctypes", 0o644)
        except Exception as exc:
            print("ctypes payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
