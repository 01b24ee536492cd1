# ruff: noqa
"""Hostile: has the camera read an image file outside the render as its background
(camera.background_image + init_background), so the file ends up in the video."""

from manim import *


class BackdropStory(Scene):
    def construct(self):
        try:
            self.camera.background_image = "/tmp/mythloop_hostile_secret.png"
            self.camera.init_background()
            print("background read:", self.camera.background.shape,
                  int(self.camera.background[0, 0, 0]))
        except Exception as exc:
            print("background payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
