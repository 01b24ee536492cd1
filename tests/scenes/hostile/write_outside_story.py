# ruff: noqa
"""Hostile: a scene that plants files outside its render directory."""

from manim import *


class ParabolaStory(Scene):
    def construct(self):
        axes = Axes(x_range=[-3, 3], y_range=[0, 9])
        curve = axes.plot(lambda x: x**2, color="#d97757")
        for target in ("/tmp/mythloop_hostile_outside.txt", "../escaped_by_scene.txt",
                       "/root/.mythloop_hostile_bashrc", "/var/tmp/mythloop_hostile_var.txt",
                       "/dev/shm/mythloop_hostile_shm.txt"):
            try:
                with open(target, "w") as fh:
                    fh.write("planted by a scene\n")
            except OSError as exc:
                print("write refused:", target, exc)
        self.play(Create(axes), Create(curve), run_time=0.5)
