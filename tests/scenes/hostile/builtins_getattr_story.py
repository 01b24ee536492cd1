# ruff: noqa
"""Hostile: reaches eval through __builtins__ with a string-built name."""

from manim import *


class LimitStory(Scene):
    def construct(self):
        table = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
        run = table["ev" + "al"]
        try:
            run("__import__('o'+'s').system('touch /tmp/mythloop_hostile_builtins')")
        except Exception as exc:
            print("builtins payload refused:", exc)
        fn = getattr(table, "get")
        self.play(Write(MathTex(r"\lim_{x \to 0} \frac{\sin x}{x} = 1")), run_time=0.4)
