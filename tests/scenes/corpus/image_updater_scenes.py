# ruff: noqa
"""Corpus: images built from arrays in memory, updaters, always_redraw, ValueTracker.

One feature per scene, kept tiny so the corpus renders quickly at -ql.
"""

from manim import *


class ImageArrayStill(Scene):
    def construct(self):
        image = ImageMobject(np.uint8([[0, 100, 30, 200], [255, 0, 5, 33]]))
        image.height = 4
        self.add(image)


class ImageGradient(Scene):
    def construct(self):
        pixels = np.zeros((16, 32, 3), dtype=np.uint8)
        pixels[:, :, 0] = np.linspace(0, 255, 32).astype(np.uint8)
        pixels[:, :, 2] = 128
        image = ImageMobject(pixels).scale(8)
        self.play(FadeIn(image), run_time=0.2)


class ImageNearest(Scene):
    def construct(self):
        image = ImageMobject(np.uint8([[0, 255], [255, 0]]))
        image.set_resampling_algorithm(RESAMPLING_ALGORITHMS["nearest"])
        image.height = 3
        self.add(image)


class DtUpdater(Scene):
    def construct(self):
        dot = Dot(LEFT)
        dot.add_updater(lambda m, dt: m.shift(RIGHT * dt))
        self.add(dot)
        self.wait(0.2)


class AlwaysRedrawLine(Scene):
    def construct(self):
        dot = Dot(RIGHT)
        line = always_redraw(lambda: Line(ORIGIN, dot.get_center()))
        self.add(line, dot)
        self.play(dot.animate.shift(UP), run_time=0.2)


class TrackerNumber(Scene):
    def construct(self):
        tracker = ValueTracker(0)
        number = Integer(0).add_updater(lambda m: m.set_value(tracker.get_value()))
        self.add(number)
        self.play(tracker.animate.set_value(5), run_time=0.2)


class TrackerRedraw(Scene):
    def construct(self):
        tracker = ValueTracker(1)
        circle = always_redraw(lambda: Circle(radius=tracker.get_value()))
        self.add(circle)
        self.play(tracker.animate.set_value(2), run_time=0.2)


class TracedDot(Scene):
    def construct(self):
        dot = Dot(RIGHT)
        path = TracedPath(dot.get_center, stroke_color=YELLOW)
        self.add(path, dot)
        self.play(Rotating(dot, angle=PI, about_point=ORIGIN), run_time=0.3)


class AlphaFunction(Scene):
    def construct(self):
        square = Square()

        def grow(mob, alpha):
            mob.become(Square(side_length=1 + alpha))

        self.play(UpdateFromAlphaFunc(square, grow), run_time=0.2)


class BecomeUpdater(Scene):
    def construct(self):
        tracker = ValueTracker(0)
        arc = Arc(angle=0.1)
        arc.add_updater(lambda m: m.become(Arc(angle=0.1 + tracker.get_value())))
        self.add(arc)
        self.play(tracker.animate.set_value(PI), run_time=0.2)
