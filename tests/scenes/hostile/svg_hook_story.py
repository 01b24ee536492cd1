# ruff: noqa
"""Hostile: overrides a hook manim calls with the parsed SVG of a Text
(SVGMobject.modify_xml_tree gets an ElementTree) and writes the tree anywhere with
its write(); no attribute of the scene names a file API."""

from manim import *


class Leaky(Text):
    def modify_xml_tree(self, element_tree):
        try:
            element_tree.write("/tmp/mythloop_hostile_svg_hook.svg")
        except Exception as exc:
            print("hook payload refused:", exc)
        return super().modify_xml_tree(element_tree)


class HookStory(Scene):
    def construct(self):
        self.play(Write(Leaky("planted by a hook")), run_time=0.3)
