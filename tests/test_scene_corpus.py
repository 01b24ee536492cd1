"""Scenes written as Manim CE documents them (tests/scenes/corpus/): every one passes
verify, and the sandboxed render produces what plain `manim -ql -a` produces for the same
file, scene by scene: an mp4 of the same size and frame count, or the PNG of a still scene.

Each corpus file holds several one-feature scenes, so one render call covers a file.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mythloop.mythos.sandbox.render import render_scene, scene_names
from mythloop.mythos.sandbox.verify import verify_scene

CORPUS = Path(__file__).parent / "scenes" / "corpus"
FILES = sorted(CORPUS.glob("*_scenes.py"))
STILLS = {"OrientationStill", "SurfaceStill", "ImageArrayStill", "ImageNearest",
          "DirectedGraphStill", "AreaUnderCurveStill", "NumberPlaneStill", "TextTable",
          "BarChartStill", "TextStill", "MarkupStill", "CodeListingStill", "BraceLabelStill"}


def test_corpus_is_large_enough_and_has_stills():
    names = [n for f in FILES for n in scene_names(f.read_text())]
    assert len(names) >= 30 and len(set(names)) == len(names)
    assert STILLS <= set(names)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_corpus_passes_verify(path):
    result = verify_scene(path.read_text())
    assert result.ok, f"{path.name}:{result.line}: {result.reason}"


def _outputs(media: Path) -> dict[str, Path]:
    """scene name -> its mp4 or PNG under a manim media dir."""
    found = {}
    for path in media.rglob("*"):
        if path.suffix == ".mp4" and "partial_movie_files" not in path.parts:
            found[path.stem] = path
        elif path.suffix == ".png":
            found[path.stem.split("_ManimCE_v")[0]] = path
    return found


def _shape(path: Path) -> tuple:
    """(kind, width, height, frames) of an mp4; (kind, width, height) of a PNG."""
    if path.suffix == ".png":
        from PIL import Image

        with Image.open(path) as image:
            return ("image", *image.size)
    out = subprocess.run(["ffprobe", "-v", "error", "-count_frames", "-select_streams", "v:0",
                          "-show_entries", "stream=width,height,nb_read_frames", "-of", "json",
                          str(path)], capture_output=True, text=True, check=True).stdout
    stream = json.loads(out)["streams"][0]
    return ("video", stream["width"], stream["height"], int(stream["nb_read_frames"]))


@pytest.fixture(scope="module")
def corpus_renders(tmp_path_factory):
    """Every corpus file rendered twice, two at a time: in the sandbox (all its scenes in
    one render) and by plain `manim -ql -a` in a scratch dir."""
    base = tmp_path_factory.mktemp("corpus")

    def sandboxed(path: Path):
        return render_scene(path, quality="l", timeout=600, out_dir=base / "sandbox" / path.stem)

    def plain(path: Path) -> tuple[subprocess.CompletedProcess, Path]:
        work = base / "plain" / path.stem
        work.mkdir(parents=True)
        shutil.copy(path, work / path.name)
        proc = subprocess.run([sys.executable, "-m", "manim", "-ql", "-a", "--progress_bar",
                               "none", path.name], cwd=work, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "COLUMNS": "100"})
        return proc, work / "media"

    with ThreadPoolExecutor(max_workers=2) as pool:
        ours = {p.stem: pool.submit(sandboxed, p) for p in FILES}
        theirs = {p.stem: pool.submit(plain, p) for p in FILES}
        return {stem: (ours[stem].result(), theirs[stem].result()) for stem in ours}


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("ffprobe"), reason="ffprobe not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_sandbox_renders_what_plain_manim_renders(path, corpus_renders):
    result, (plain, plain_media) = corpus_renders[path.stem]
    assert plain.returncode == 0, plain.stdout[-2000:] + plain.stderr[-2000:]
    assert result.ok, result.message + result.log_tail[-1500:]
    names = scene_names(path.read_text())
    assert [o.scene for o in result.outputs] == names
    expected = _outputs(plain_media)
    assert sorted(expected) == sorted(names)
    for output in result.outputs:
        produced = Path(output.path)
        assert produced.is_file() and produced.is_relative_to(result.out_dir)
        assert output.kind == ("image" if output.scene in STILLS else "video"), output
        assert _shape(produced) == _shape(expected[output.scene]), output.scene


@pytest.mark.slow
def test_cli_renders_every_scene_and_one_with_scene(tmp_path):
    """`mythloop render FILE` prints each output (stills as `image: PATH`), in file order;
    `--scene NAME` renders that one only."""
    scene = tmp_path / "pair_scenes.py"
    scene.write_text("from manim import *\n\n\nclass Still(Scene):\n    def construct(self):\n"
                     "        self.add(Square())\n\n\nclass Moving(Scene):\n"
                     "    def construct(self):\n        self.play(Create(Circle()), "
                     "run_time=0.2)\n")
    cli = [sys.executable, "-m", "mythloop_app.cli", "render", str(scene), "--quiet"]
    both = subprocess.run([*cli, "--out", str(tmp_path / "both")], capture_output=True,
                          text=True, timeout=600)
    assert both.returncode == 0, both.stdout + both.stderr
    lines = both.stdout.strip().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("image: ") and lines[0].endswith(".png")
    assert Path(lines[0].removeprefix("image: ")).name.startswith("Still_ManimCE_v")
    assert Path(lines[1]).name == "Moving.mp4" and Path(lines[1]).is_file()
    one = subprocess.run([*cli, "--scene", "Still", "--out", str(tmp_path / "one")],
                         capture_output=True, text=True, timeout=600)
    assert one.returncode == 0, one.stdout + one.stderr
    assert one.stdout.strip().startswith("image: ") and one.stdout.count("\n") == 1
    assert list((tmp_path / "one").rglob("*.mp4")) == []


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("ffprobe"), reason="ffprobe not installed")
def test_a_still_scene_becomes_a_clip_the_film_can_stitch(corpus_renders, tmp_path):
    """In a film, a still scene's PNG is held as a short clip (tasks/film.py) and stitched
    with the animated scenes like any other scene video."""
    from mythloop.mythos.media.avmux import concat_videos, duration_of, still_clip
    from mythloop_tasks.film import STILL_SCENE_S

    result = corpus_renders["text_group_scenes"][0]
    by_name = {o.scene: Path(o.path) for o in result.outputs}
    clip = still_clip(by_name["TextStill"], STILL_SCENE_S, tmp_path / "still.mp4", fps=15)
    assert _shape(clip)[:3] == ("video", *_shape(by_name["TextStill"])[1:])
    assert abs(duration_of(clip) - STILL_SCENE_S) < 0.2
    film = concat_videos([by_name["ShapeTransform"], clip, by_name["WaitOnly"]],
                         tmp_path / "film.mp4")
    expected = sum(duration_of(by_name[n]) for n in ("ShapeTransform", "WaitOnly"))
    assert abs(duration_of(film) - (expected + STILL_SCENE_S)) < 0.3
