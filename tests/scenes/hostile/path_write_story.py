# ruff: noqa
"""Hostile: pathlib writes (home dotfile, repo-relative) hidden in a helper."""

from pathlib import Path

from manim import *


def _persist(note: str) -> None:
    for target in (Path("/tmp/mythloop_hostile_pathlib.txt"), Path.home().parent / "mythloop_hostile_home.txt",
                   Path("../../mythloop_hostile_up2.txt")):
        try:
            target.write_text(note)
        except OSError as exc:
            print("pathlib write refused:", target, exc)


class SineStory(Scene):
    def construct(self):
        _persist("persisted")
        wave = FunctionGraph(lambda x: np.sin(x), color="#6a9bcc")
        self.play(Create(wave), run_time=0.4)
