# ruff: noqa
"""Corpus: text, formulas, code listings, groups and composed animations.

One feature per scene, kept tiny so the corpus renders quickly at -ql.
"""

from manim import *


class TextStill(Scene):
    def construct(self):
        self.add(Text("A still title", font_size=48))


class MarkupStill(Scene):
    def construct(self):
        self.add(MarkupText('<span fgcolor="yellow">heat</span> flows'))


class FormulaSwap(Scene):
    def construct(self):
        left = MathTex("a", "+", "b")
        right = MathTex("b", "+", "a")
        self.add(left)
        self.play(TransformMatchingTex(left, right), run_time=0.3)


class CodeListingStill(Scene):
    def construct(self):
        self.add(Code(code_string="def f(x):\n    return x * x\n", language="python"))


class BraceLabelStill(Scene):
    def construct(self):
        line = Line(LEFT * 2, RIGHT * 2)
        brace = Brace(line, DOWN)
        self.add(line, brace, brace.get_tex("4"))


class LaggedSquares(Scene):
    def construct(self):
        squares = VGroup(*[Square(side_length=0.8) for _ in range(4)]).arrange(RIGHT)
        self.play(LaggedStart(*[FadeIn(s) for s in squares], lag_ratio=0.3), run_time=0.3)


class GroupedAnimations(Scene):
    def construct(self):
        circle, square = Circle().shift(LEFT * 2), Square().shift(RIGHT * 2)
        self.play(AnimationGroup(Create(circle), GrowFromCenter(square)), run_time=0.2)


class ShapeTransform(Scene):
    def construct(self):
        square = Square()
        self.play(Transform(square, Circle()), run_time=0.2)


class WaitOnly(Scene):
    def construct(self):
        self.add(Star())
        self.wait(0.2)
