# ruff: noqa
"""Corpus: the camera as Manim CE documents it (moving-camera frames, zoom, 3D).

One feature per scene, kept tiny (run_time 0.2-0.3 s) so the corpus renders quickly at -ql.
"""

from manim import *


class FrameAnimate(MovingCameraScene):
    def construct(self):
        dot = Dot(RIGHT * 2)
        self.add(Square(), dot)
        self.play(self.camera.frame.animate.scale(0.5).move_to(dot), run_time=0.2)


class FrameSaveRestore(MovingCameraScene):
    def construct(self):
        self.add(Circle())
        self.camera.frame.save_state()
        self.play(self.camera.frame.animate.set(width=4), run_time=0.2)
        self.play(Restore(self.camera.frame), run_time=0.2)


class FrameFollowsDot(MovingCameraScene):
    def construct(self):
        frame = self.camera.frame
        dot = Dot()
        self.add(NumberPlane(), dot)
        frame.add_updater(lambda f: f.move_to(dot))
        self.play(dot.animate.shift(RIGHT), run_time=0.2)
        frame.clear_updaters()


class ZoomedDisplay(ZoomedScene):
    def __init__(self, **kwargs):
        super().__init__(zoom_factor=0.3, zoomed_display_height=1, zoomed_display_width=3,
                         **kwargs)

    def construct(self):
        dot = Dot().shift(UL * 2)
        image = ImageMobject(np.uint8([[0, 100, 30, 200], [255, 0, 5, 33]])).scale(3)
        self.add(image, dot)
        self.zoomed_camera.frame.move_to(dot)
        self.activate_zooming()
        self.play(self.get_zoomed_display_pop_out_animation(), run_time=0.2)
        self.play(self.zoomed_camera.frame.animate.shift(RIGHT), run_time=0.2)


class OrientationStill(ThreeDScene):
    def construct(self):
        self.set_camera_orientation(phi=70 * DEGREES, theta=30 * DEGREES)
        self.add(ThreeDAxes(), Cube(side_length=1, fill_opacity=0.6))


class MoveCamera(ThreeDScene):
    def construct(self):
        self.add(ThreeDAxes())
        self.move_camera(phi=60 * DEGREES, theta=-45 * DEGREES, run_time=0.2)


class AmbientRotation(ThreeDScene):
    def construct(self):
        self.set_camera_orientation(phi=60 * DEGREES)
        self.add(Sphere(radius=1, resolution=(6, 6)))
        self.begin_ambient_camera_rotation(rate=1)
        self.wait(0.2)
        self.stop_ambient_camera_rotation()


class SurfaceStill(ThreeDScene):
    def construct(self):
        self.set_camera_orientation(phi=65 * DEGREES, theta=-60 * DEGREES)
        surface = Surface(lambda u, v: np.array([u, v, 0.3 * np.sin(u) * np.cos(v)]),
                          u_range=[-2, 2], v_range=[-2, 2], resolution=(6, 6))
        self.add(surface)
