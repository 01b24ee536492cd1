"""Sandboxed render: hostile scenes are contained with verify skipped; benign ones render.

Real manim renders in real subprocesses (slow: ~10 s each on a loaded 2-core box),
run a few at a time from module fixtures.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mythloop.mythos.sandbox.render import RenderLimits, render_scene, scene_names

pytestmark = pytest.mark.slow

SCENES = Path(__file__).parent / "scenes"
HOSTILE = SCENES / "hostile"
SECRET = "sekrit-3b1e-do-not-leak"
MARKER_GLOBS = ("/tmp/mythloop_hostile_*", "/var/tmp/mythloop_hostile_*",
                "/dev/shm/mythloop_hostile_*", "/run/lock/mythloop_hostile_*")
# (scene, audit hook on?) -- the hook-less runs show the OS layers contain on their own
RUNTIME_CASES = [(name, True) for name in (
    "env_secret_story", "write_outside_story", "path_write_story", "spawn_process_story",
    "socket_story", "dynamic_import_story", "encoded_exec_story", "builtins_getattr_story",
    "subclasses_escape_story", "numpy_save_story", "manim_reexport_story", "fork_daemon_story",
    "annotation_exec_story",
)] + [(name, False) for name in (
    "write_outside_story", "spawn_process_story", "socket_story", "fork_daemon_story",
    "env_secret_story",
)]


def _stages(state_dir: Path) -> list[str]:
    """Staging dirs left under the state dir (every render must remove its own)."""
    base = state_dir / "render-stage"
    return sorted(os.listdir(base)) if base.is_dir() else []


def _markers() -> list[str]:
    return sorted(p for pattern in MARKER_GLOBS for p in glob.glob(pattern))


def _render_processes(roots: list[Path], ids: list[str] = ()) -> list[int]:
    """PIDs still carrying one of these render IDS, or whose cwd lies under one of ROOTS."""
    needles = [f"MYTHLOOP_RENDER_ID={i}".encode() for i in ids if i]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
            if any(n in environ for n in needles):
                found.append(int(entry))
                continue
            cwd = os.readlink(f"/proc/{entry}/cwd")
        except OSError:
            continue
        if any(cwd.startswith(str(r)) for r in roots):
            found.append(int(entry))
    return found


class _Listener:
    """A TCP listener on 127.0.0.1 that records whether anything connected."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]

    def connected(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True


@pytest.fixture(scope="module")
def hostile_runs(tmp_path_factory):
    """Render every runtime-payload hostile scene (verify skipped), three at a time."""
    for path in _markers():
        os.remove(path)
    os.environ["MYTHLOOP_TEST_API_KEY"] = SECRET
    base = tmp_path_factory.mktemp("hostile")
    listeners: dict[str, _Listener] = {}
    jobs = []
    for name, hooked in RUNTIME_CASES:
        watch = base / f"{name}-{'hook' if hooked else 'os'}"
        watch.mkdir()
        watch.chmod(0o777)  # writable by anyone: only the sandbox keeps the scene out
        code = (HOSTILE / f"{name}.py").read_text()
        if name == "socket_story":
            listeners[watch.name] = _Listener()
            code = code.replace("47123", str(listeners[watch.name].port))
        (watch / f"{name}.py").write_text(code)
        jobs.append((watch, name, hooked))

    def run(job):
        watch, name, hooked = job
        return watch.name, render_scene(watch / f"{name}.py", out_dir=watch / "out",
                                        timeout=120, audit_hook=hooked)

    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            results = dict(pool.map(run, jobs))
    finally:
        os.environ.pop("MYTHLOOP_TEST_API_KEY", None)
    yield {"results": results, "base": base, "listeners": listeners,
           "watches": {w.name: w for w, _, _ in jobs}}
    for listener in listeners.values():
        listener.sock.close()


def test_hostile_payloads_leave_no_file_outside_dir(hostile_runs, state_dir):
    assert _markers() == []
    assert _stages(state_dir) == []
    for name, watch in hostile_runs["watches"].items():
        scene = name.rsplit("-", 1)[0]
        assert sorted(os.listdir(watch)) == sorted(["out", f"{scene}.py"]), name
        assert not (Path("/root") / ".mythloop_hostile_bashrc").exists()
        assert not (Path("/root") / "mythloop_hostile_home.txt").exists()


def test_hostile_renders_end_and_leave_no_process(hostile_runs):
    for name, result in hostile_runs["results"].items():
        assert result.kind in ("ok", "scene_error"), (name, result.message)
        assert Path(result.out_dir).is_relative_to(hostile_runs["watches"][name])
    ids = [r.render_id for r in hostile_runs["results"].values()]
    assert all(ids)
    assert _render_processes([hostile_runs["base"]], ids) == []


def test_secret_env_var_never_reaches_the_scene(hostile_runs):
    for name, result in hostile_runs["results"].items():
        if not name.startswith("env_secret"):
            continue
        log = Path(result.log_path).read_text()
        assert "LEAKED-ENV" in log  # the payload ran ...
        assert SECRET not in log  # ... and found nothing
        for path in Path(result.out_dir).rglob("*"):
            if path.is_file() and not path.is_symlink():
                assert SECRET.encode() not in path.read_bytes(), path


def test_socket_never_connects(hostile_runs):
    assert hostile_runs["listeners"], "socket scene did not run"
    for name, listener in hostile_runs["listeners"].items():
        assert not listener.connected(), name
        log = Path(hostile_runs["results"][name].log_path).read_text()
        assert "socket refused" in log


def test_audit_hook_reports_what_it_refused(hostile_runs):
    log = Path(hostile_runs["results"]["spawn_process_story-hook"].log_path).read_text()
    assert "sandbox: running 'sh'" in log and "os.system is not allowed" in log
    assert any("audit hook" in note for note in
               hostile_runs["results"]["spawn_process_story-hook"].isolation)


def test_endless_loop_is_killed_at_the_timeout(tmp_path, state_dir):
    lines: list[str] = []
    result = render_scene(HOSTILE / "endless_loop_story.py", out_dir=tmp_path / "out",
                          timeout=20, progress=lines.append)
    assert result.kind == "timeout" and not result.ok
    assert "--timeout" in result.message
    assert _render_processes([tmp_path], [result.render_id]) == []
    assert _stages(state_dir) == []  # the staging dir goes with the killed render
    assert (tmp_path / "out" / "render.log").is_file()
    assert not (tmp_path / "out" / "media").exists()
    # no animation ever starts: the relay still says the render is alive, then how it ended
    assert any("no animation started yet" in line for line in lines), lines
    assert lines[-1].startswith("render: timeout")


def test_memory_bomb_ends_as_resource_limit(tmp_path):
    result = render_scene(HOSTILE / "memory_bomb_story.py", out_dir=tmp_path / "out",
                          timeout=240, limits=RenderLimits(memory_bytes=1536 << 20))
    assert result.kind == "resource_limit", (result.message, result.log_tail[-500:])
    assert _render_processes([tmp_path], [result.render_id]) == []


def _probe(video: str) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries",
                          "format=duration:stream=codec_name,width", "-of", "json", video],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.skipif(not shutil.which("ffprobe"), reason="ffprobe not installed")
def test_benign_scene_renders_to_mp4(tmp_path):
    result = render_scene(SCENES / "benign" / "text_numpy_random_story.py",
                          out_dir=tmp_path / "run", timeout=300)
    assert result.ok, result.message + result.log_tail[-1500:]
    video = Path(result.video_path)
    assert video.is_absolute() and video.is_relative_to(tmp_path / "run" / "media" / "videos")
    info = _probe(str(video))
    assert float(info["format"]["duration"]) > 0.5
    assert info["streams"][0]["width"] == 854  # -ql


@pytest.mark.skipif(not shutil.which("ffprobe"), reason="ffprobe not installed")
def test_cli_render_benign_mathtex_prints_the_mp4(tmp_path):
    out = tmp_path / "cli"
    proc = subprocess.run(
        [sys.executable, "-m", "mythloop_app.cli", "render",
         str(SCENES / "benign" / "mathtex_caption_story.py"), "-q", "l", "--out", str(out),
         "--timeout", "300"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = proc.stdout.strip().splitlines()[-1]
    assert path.endswith("EulerStory.mp4") and Path(path).is_relative_to(out)
    assert float(_probe(path)["format"]["duration"]) > 0.5


def test_scene_error_and_missing_latex_are_told_apart(tmp_path):
    broken = tmp_path / "broken_story.py"
    broken.write_text("from manim import *\n\nclass BrokenStory(Scene):\n"
                      "    def construct(self):\n        self.add(Circle())\n"
                      "        radius = undefined_radius * 2\n")
    needs_tex = tmp_path / "tex_story.py"
    needs_tex.write_text("from manim import *\n\nclass TexStory(Scene):\n"
                         "    def construct(self):\n        self.add(MathTex('x^2'))\n")
    with ThreadPoolExecutor(max_workers=2) as pool:
        err = pool.submit(render_scene, broken, out_dir=tmp_path / "a", timeout=120)
        tex = pool.submit(render_scene, needs_tex, out_dir=tmp_path / "b", timeout=120,
                          env_extra={"PATH": "/nonexistent-bin"})
        err, tex = err.result(), tex.result()
    assert err.kind == "scene_error"
    assert "NameError" in err.message and "undefined_radius" in err.message
    # a failed render leaves its log and no video (not even a partial one) in DIR
    assert Path(err.log_path).read_text().count("undefined_radius") >= 1
    assert list((tmp_path / "a").rglob("*.mp4")) == []
    assert "scene line 6" in err.message
    assert tex.kind == "missing_tool", tex.message
    assert "texlive" in tex.message


def test_cli_render_failure_is_one_line(tmp_path):
    scene = tmp_path / "broken.py"
    scene.write_text("from manim import *\n\nclass Broken(Scene):\n    def construct(self):\n"
                     "        self.add(undefined_thing)\n")
    proc = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "render", str(scene),
                           "--out", str(tmp_path / "o"), "--quiet"], capture_output=True,
                          text=True)
    assert proc.returncode == 1
    assert proc.stdout == ""  # the failure line goes to stderr; stdout holds results only
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "scene_error" in lines[0], proc.stderr
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    nothing = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "render", str(empty),
                              "--out", str(tmp_path / "o2")], capture_output=True, text=True)
    assert nothing.returncode == 2 and nothing.stdout == ""
    assert nothing.stderr.count("\n") == 1 and "no Scene subclass" in nothing.stderr
    assert not (tmp_path / "o2").exists()  # refused before the out dir was made
    missing = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "render",
                              str(tmp_path / "nope.py")], capture_output=True, text=True)
    assert missing.returncode == 2


def test_scene_names_picks_leaf_scenes():
    code = ("from manim import *\nclass Base(ThreeDScene):\n    pass\n"
            "class Final(Base):\n    pass\nclass Helper:\n    pass\n")
    assert scene_names(code) == ["Final"]
    assert scene_names("class A(MovingCameraScene): pass\nclass B(Scene): pass") == ["A", "B"]


SQUARE = ("from manim import *\n\nclass SquareStory(Scene):\n    def construct(self):\n"
          "        square = Square()\n        self.play(Create(square), run_time=0.5)\n"
          "        self.play(square.animate.shift(RIGHT), run_time=0.5)\n")


@pytest.mark.skipif(not shutil.which("ffprobe"), reason="ffprobe not installed")
def test_cli_renders_into_a_private_dir_and_shows_progress(tmp_path, state_dir):
    """--out made by mkdtemp (mode 700, as `mktemp -d`): nobody cannot enter it, yet the
    mp4 lands there, and the terminal sees one line per animation while it renders."""
    scene = tmp_path / "square_story.py"
    scene.write_text(SQUARE)
    private = Path(tempfile.mkdtemp(prefix="mythloop-private-"))
    try:
        assert private.stat().st_mode & 0o777 == 0o700
        proc = subprocess.run(
            [sys.executable, "-m", "mythloop_app.cli", "render", str(scene), "-q", "l",
             "--out", str(private), "--timeout", "300"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        video = Path(proc.stdout.strip())  # stdout holds the path alone
        assert video.is_relative_to(private) and video.name == "SquareStory.mp4"
        assert video.is_file() and float(_probe(str(video))["format"]["duration"]) > 0.5
        assert (private / "render.log").is_file()
        assert list(private.rglob("partial_movie_files")) == []
        progress = proc.stderr.splitlines()
        assert any(ln.startswith("render: animation 1 (Create)") for ln in progress), progress
        assert any(ln.startswith("render: animation 2 (animate)") for ln in progress), progress
        assert progress[-1].startswith("render: done after")
        assert _stages(state_dir) == []
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_render_inside_a_prefect_task_logs_its_progress(tmp_path, prefect_harness):
    """A film's render task passes the run logger (mythloop_tasks.common.run_logger_info) as
    render_scene's progress sink: the lines reach the task run's log. The library itself
    never looks Prefect up."""
    import logging

    from prefect import flow, task

    from mythloop_tasks.common import run_logger_info

    scene = tmp_path / "square_story.py"
    scene.write_text(SQUARE)
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    @task
    def render_stage() -> dict:
        return render_scene(scene, out_dir=tmp_path / "run", timeout=300,
                            progress=run_logger_info()).model_dump()

    @flow
    def film_like() -> dict:
        return render_stage()

    handler, logger = Keep(), logging.getLogger("prefect.task_runs")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # the test settings keep Prefect at WARNING
    try:
        result = film_like()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert result["ok"], result["message"]
    assert any(m.startswith("render: animation 1 (Create)") for m in seen), seen
    assert any(m.startswith("render: done after") for m in seen), seen


def test_a_missing_scene_is_not_swapped_for_another(tmp_path):
    """Manim renders a file's only scene when the one named is missing; that video is not
    the one asked for, so the render fails and DIR gets no mp4."""
    scene = tmp_path / "square_story.py"
    scene.write_text(SQUARE)
    result = render_scene(scene, scene="OtherStory", out_dir=tmp_path / "out", timeout=300)
    assert result.kind == "scene_error" and result.video_path is None, result.message
    assert list((tmp_path / "out").rglob("*.mp4")) == []
