# ruff: noqa
"""Hostile: saves an array through the numpy a manim module imported as `np`
(mobject.geometry.arc.np), a path that never names numpy itself."""

from manim import *


class ArcStory(Scene):
    def construct(self):
        heights = mobject.geometry.arc.np.linspace(0, 1, 8)
        try:
            mobject.geometry.arc.np.save("/tmp/mythloop_hostile_reexport_np.npy", heights)
        except Exception as exc:
            print("re-exported numpy payload refused:", exc)
        self.play(Create(Arc(angle=PI)), run_time=0.3)
