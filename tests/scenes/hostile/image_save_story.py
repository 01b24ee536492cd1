# ruff: noqa
"""Hostile: writes a file anywhere with the PIL image the camera hands back
(camera.get_image().save); Mobject.save_image would too, its name may be absolute."""

from manim import *


class SnapshotStory(Scene):
    def construct(self):
        disc = Circle(fill_opacity=1)
        self.add(disc)
        try:
            self.camera.get_image().save("/tmp/mythloop_hostile_image.png")
        except Exception as exc:
            print("image save refused:", exc)
        try:
            disc.save_image("/tmp/mythloop_hostile_save_image")
        except Exception as exc:
            print("save_image refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
