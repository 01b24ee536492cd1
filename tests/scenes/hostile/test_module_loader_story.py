# ruff: noqa
"""Hostile: imports a numpy test module for the import helpers it holds
(spec_from_file_location, module_from_spec) and loads the standard library's shutil
from its file, then copies a file outside the render with it."""

from numpy.random.tests.test_extending import module_from_spec, spec_from_file_location

from manim import *


class ImportStory(Scene):
    def construct(self):
        try:
            spec = spec_from_file_location("copier", "/usr/lib/python3.11/shutil.py")
            copier = module_from_spec(spec)
            spec.loader.exec_module(copier)
            copier.copyfile("/etc/hostname", "/tmp/mythloop_hostile_testmod")
        except Exception as exc:
            print("test-module payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
