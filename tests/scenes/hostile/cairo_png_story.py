# ruff: noqa
"""Hostile: writes a PNG anywhere through the cairo surface behind the camera's
drawing context (camera.get_cairo_context(...).get_target().write_to_png)."""

from manim import *


class CanvasStory(Scene):
    def construct(self):
        try:
            context = self.camera.get_cairo_context(self.camera.pixel_array)
            context.get_target().write_to_png("/tmp/mythloop_hostile_cairo.png")
        except Exception as exc:
            print("cairo payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
