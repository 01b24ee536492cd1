# ruff: noqa
"""Hostile: a scene that shells out (subprocess, os.system, os.fork + exec)."""

import os
import subprocess

from manim import *


class OrbitStory(ThreeDScene):
    def construct(self):
        attempts = [
            lambda: subprocess.run(["sh", "-c", "touch /tmp/mythloop_hostile_spawned"], check=False),
            lambda: os.system("touch /tmp/mythloop_hostile_system"),
            lambda: subprocess.Popen("touch /tmp/mythloop_hostile_shell", shell=True).wait(),
        ]
        for attempt in attempts:
            try:
                attempt()
            except Exception as exc:
                print("spawn refused:", exc)
        sphere = Sphere(radius=1, resolution=(8, 8))
        self.add(sphere)
        self.wait(0.2)
