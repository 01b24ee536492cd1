# ruff: noqa
"""Corpus: graphs (networks and plots), tables, charts and parametric curves.

One feature per scene, kept tiny so the corpus renders quickly at -ql.
"""

from manim import *


class CircularGraph(Scene):
    def construct(self):
        graph = Graph([1, 2, 3, 4], [(1, 2), (2, 3), (3, 4), (4, 1)], layout="circular")
        self.play(Create(graph), run_time=0.3)


class DirectedGraphStill(Scene):
    def construct(self):
        graph = DiGraph([1, 2, 3], [(1, 2), (2, 3)], layout="tree", root_vertex=1)
        self.add(graph)


class GraphMoveVertex(Scene):
    def construct(self):
        graph = Graph([1, 2], [(1, 2)], layout={1: LEFT, 2: RIGHT})
        self.add(graph)
        self.play(graph[2].animate.move_to(UP * 2), run_time=0.2)


class AxesPlot(Scene):
    def construct(self):
        axes = Axes(x_range=[-2, 2], y_range=[0, 4], tips=False)
        curve = axes.plot(lambda x: x ** 2, color=BLUE)
        self.add(axes)
        self.play(Create(curve), run_time=0.2)


class AreaUnderCurveStill(Scene):
    def construct(self):
        axes = Axes(x_range=[0, 3], y_range=[0, 3], tips=False)
        curve = axes.plot(lambda x: 0.3 * x ** 2)
        self.add(axes, curve, axes.get_area(curve, x_range=[0, 2], opacity=0.5))


class NumberPlaneStill(Scene):
    def construct(self):
        self.add(NumberPlane(), Vector([1, 2]))


class TextTable(Scene):
    def construct(self):
        table = Table([["one", "two"], ["three", "four"]], include_outer_lines=True)
        self.add(table.scale(0.6))


class MathTableCreate(Scene):
    def construct(self):
        table = MathTable([[1, 2], [3, 4]])
        self.play(Create(table), run_time=0.3)


class BarChartStill(Scene):
    def construct(self):
        chart = BarChart(values=[1, 3, 2], bar_names=["a", "b", "c"], y_range=[0, 4, 1])
        self.add(chart)


class Lissajous(Scene):
    def construct(self):
        curve = ParametricFunction(lambda t: np.array([np.sin(2 * t), np.sin(3 * t), 0]),
                                   t_range=[0, TAU])
        self.play(Create(curve.scale(2)), run_time=0.3)
