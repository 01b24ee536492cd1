# ruff: noqa
"""Hostile: writes Python code to a file, then has manim's scene loader
(scene.scene.scene_classes_from_file) import and run it: code that never met verify."""

from manim import *

PAYLOAD = (
    "import os\n"
    "os.system('touch /tmp/mythloop_hostile_code_load')\n"
)


class LoaderStory(Scene):
    def construct(self):
        try:
            make_path = type(renderer.shader.SHADER_FOLDER)
            module = make_path("/tmp/mythloop_hostile_loaded_scene.py")
            with module.open("w") as out:
                out.write(PAYLOAD)
            scene.scene.scene_classes_from_file(module, full_list=True)
        except BaseException as exc:
            print("loader payload refused:", exc)
        self.play(FadeIn(Triangle()), run_time=0.3)
