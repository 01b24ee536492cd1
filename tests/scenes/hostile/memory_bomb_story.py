# ruff: noqa
"""Hostile: precomputes an 'animation cache' that grows without bound."""

from manim import *


class CacheStory(Scene):
    def construct(self):
        cache = []
        while True:
            cache.append(bytearray(256 * 1024 * 1024))
            cache[-1][::4096] = b"x" * len(cache[-1][::4096])
        self.wait(0.2)
