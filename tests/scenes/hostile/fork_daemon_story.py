# ruff: noqa
"""Hostile: forks a detached daemon meant to outlive the render."""

import os
import time

from manim import *


class PersistenceStory(Scene):
    def construct(self):
        try:
            if os.fork() == 0:
                os.setsid()
                if os.fork() == 0:
                    time.sleep(600)
                os._exit(0)
        except Exception as exc:
            print("fork refused:", exc)
        self.play(Create(Circle()), run_time=0.3)
