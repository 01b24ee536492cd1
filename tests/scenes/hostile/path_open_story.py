# ruff: noqa
"""Hostile: makes a pathlib.Path from the type of a Path manim keeps
(renderer.shader.SHADER_FOLDER) and writes a file with its open()."""

from manim import *


class ShaderStory(Scene):
    def construct(self):
        try:
            make_path = type(renderer.shader.SHADER_FOLDER)
            with make_path("/tmp/mythloop_hostile_path_open").open("w") as out:
                out.write("written through a Path manim holds\n")
        except Exception as exc:
            print("Path payload refused:", exc)
        self.play(FadeIn(Square()), run_time=0.3)
