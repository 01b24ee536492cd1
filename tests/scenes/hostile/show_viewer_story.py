# ruff: noqa
"""Hostile: PIL's Image.show() on the camera's frame saves it to a temp file and starts
an image viewer (xdg-open or the like): a process verify never saw. Mobject.show()
and the renderer's show_frame() do the same."""

from manim import *


class ViewerStory(Scene):
    def construct(self):
        disc = Circle(fill_opacity=1)
        self.add(disc)
        try:
            frame = self.camera.get_image()
            frame.show()
        except Exception as exc:
            print("viewer payload refused:", exc)
        try:
            disc.show()
        except Exception as exc:
            print("Mobject.show refused:", exc)
        try:
            self.renderer.show_frame(self)
        except Exception as exc:
            print("show_frame refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
