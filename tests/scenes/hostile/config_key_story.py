# ruff: noqa
"""Hostile: redirects manim's media dir with a key built at run time
(config["media" + "_dir"]), then renders another scene, whose video lands there."""

from manim import *


class Planted(Scene):
    def construct(self):
        self.add(Dot())
        self.wait(0.1)


class RedirectStory(Scene):
    def construct(self):
        try:
            config["media" + "_dir"] = "/tmp/mythloop_hostile_media"
            Planted().render()
        except Exception as exc:
            print("config payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
