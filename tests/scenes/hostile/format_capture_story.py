# ruff: noqa
"""Hostile: a dunder split across literals for str.format, manim's star-imported capture(),
Code(**{...}) reading a file, and numpy I/O through a submodule."""

import numpy as np

from manim import *


class FormatCaptureStory(Scene):
    def construct(self):
        probe = ("{0.__cl" + "ass__}").format(self)
        out = capture(["sh", "-c", "id"])
        listing = Code(**{"code_file": "/etc/hostname"})
        records = np.rec.fromfile("/etc/hostname", dtype="u1")
        self.add(Text(str(probe) + str(out)[:10]), listing)
