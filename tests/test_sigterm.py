"""SIGTERM (what `kill`, systemd and `docker stop` send, to the command's pid alone) takes the
Ctrl-C path: `render` and `film` mid-render, `sweep` mid-round. Each exits 143 with the one
resume line, no traceback and no "Crash detected!", and leaves no process: the sandboxed
render (its own session) goes too. An interrupted render is not recorded as a scene error.

Real processes throughout (the CLI, its temporary Prefect server, the sandbox); every test
has its own state folder and kills whatever is left of it at the end. How fast they exit is
measured by hand (the issue's 10 s), not asserted here.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_interrupts import (
    EXE,
    RESUME_PREFIX,
    SWEEP,
    _alive,
    _descendants,
    _env,
    _kill_leftovers,
    _no_process_left,
    _rendering,
    _run_states,
    _start,
    _text,
    _typed,
    _wait_for,
)

pytestmark = pytest.mark.slow

BUSY_SCENE = """from manim import *


class BusyStory(Scene):
    def construct(self):
        self.add(Circle())
        total = 0
        for i in range(10 ** 10):
            total += i
        self.add(Square())
"""


def _sigterm(proc: subprocess.Popen) -> int:
    """SIGTERM to the command's pid only (not its group, unlike a terminal's Ctrl-C)."""
    os.kill(proc.pid, signal.SIGTERM)
    try:
        return proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the command did not exit within 120 s of SIGTERM")


def _render_tree(proc: subprocess.Popen, state: Path) -> dict[int, str]:
    return _wait_for("the sandboxed render", lambda: _descendants(proc.pid)
                     if _rendering(state) else None, proc)


def test_sigterm_mid_render_ends_the_sandbox(tmp_path):
    state = tmp_path / "state"
    scene = tmp_path / "busy_story.py"
    scene.write_text(BUSY_SCENE, encoding="utf-8")
    args = ["render", str(scene), "--out", str(tmp_path / "out"), "--timeout", "600",
            "--quiet"]
    proc = _start(args, state, "render")
    try:
        tree = _render_tree(proc, state)
        code = _sigterm(proc)
        err = _text(state, "render", "err")
        assert code == 143, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        assert [x for x in err.splitlines() if x.strip()] == [
            RESUME_PREFIX + shlex.join([_typed(), *args])]
        assert [cmd for pid, cmd in tree.items() if _alive(pid)] == []  # unshare, init, manim
        stages = state / "render-stage"
        assert not stages.is_dir() or list(stages.iterdir()) == []
        assert not list((tmp_path / "out").rglob("*.mp4"))
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)


def _end_render_sessions() -> None:
    """End this process's sandboxed renders (warm workers included), whole trees."""
    from mythloop import procs

    for pid, cmd in _descendants(os.getpid()).items():
        if "sandbox_init" in cmd or "unshare" in cmd:
            procs.kill_tree(pid, grace=1.0)


def _render_in_flight() -> bool:
    from mythloop.mythos.sandbox import render_pool

    pool = render_pool.current_pool()
    if pool is not None and render_pool.warm_enabled():
        with pool.cond:
            return any(w.renders and w.alive() for w in pool.busy)
    return any("sandbox_init" in cmd for cmd in _descendants(os.getpid()).values())


def test_an_interrupted_render_is_not_a_scene_error(tmp_path):
    """In the library: a render whose sandbox ends because the process is stopping reports
    `interrupted` (the film spends no repair on it)."""
    import threading
    import time

    from mythloop import procs
    from mythloop.mythos.sandbox.render import render_scene

    scene = tmp_path / "busy_story.py"
    scene.write_text(BUSY_SCENE, encoding="utf-8")
    box: dict = {}
    worker = threading.Thread(target=lambda: box.update(
        result=render_scene(scene, out_dir=tmp_path / "out", timeout=600)))
    worker.start()
    try:
        # the render itself in flight: warm workers left idle by earlier tests also run
        # sandbox_init, so their presence says nothing about this render
        _wait_for("the sandboxed render", _render_in_flight,
                  type("P", (), {"poll": staticmethod(lambda: None)})(), timeout=300)
        procs.STOPPING.set()  # what the CLI's signal handler does first
        _end_render_sessions()  # then it ends every child session (here: the render's only,
        worker.join(timeout=120)  # not the session's Prefect test server)
    finally:
        procs.STOPPING.clear()
        _end_render_sessions()
        worker.join(timeout=30)
        time.sleep(0)
    result = box["result"]
    assert result.kind == "interrupted" and not result.ok, result.message
    assert "not a scene error" in result.message
    from mythloop_flows.film import NO_REPAIR_KINDS

    assert "interrupted" in NO_REPAIR_KINDS


def _render_records(node) -> list[dict]:
    """Every render record (a dict with a "kind" and a "scene") anywhere in a manifest."""
    if isinstance(node, dict):
        own = [node] if "kind" in node and "scene" in node else []
        return own + [r for value in node.values() for r in _render_records(value)]
    if isinstance(node, list):
        return [r for value in node for r in _render_records(value)]
    return []


def test_sigterm_mid_film_render_leaves_nothing_running(tmp_path):
    state = tmp_path / "state"
    args = ["film", "the heat equation", "--backend", "replay", "--render", "-q", "l",
            "--runs-dir", str(tmp_path / "runs")]
    proc = _start(args, state, "film")
    try:
        tree = _render_tree(proc, state)
        code = _sigterm(proc)
        err = _text(state, "film", "err")
        assert code == 143, err[-3000:]
        assert "Traceback" not in err and "Crash detected" not in err, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        (run_dir,) = (tmp_path / "runs" / "mythos").iterdir()
        assert lines == [RESUME_PREFIX + shlex.join([_typed(), *args, "--resume",
                                                     str(run_dir)])], err[-3000:]
        _no_process_left(state)
        assert [cmd for pid, cmd in tree.items() if _alive(pid)] == []  # the render too
        assert _run_states(state, "flow_run") == ["CRASHED"]
        assert "RUNNING" not in _run_states(state, "task_run")
        # The replay's scene 1 fails by itself in under a second (its recorded repair); with two
        # workers that failure may land before the signal. Any other scene error would be the
        # signal's doing.
        for manifest in (tmp_path / "runs").rglob("manifest.json"):
            errors = [r for r in _render_records(json.loads(manifest.read_text(encoding="utf-8")))
                      if r.get("kind") == "scene_error"]
            assert all(r["scene"] == 1 and r["attempt"] == 0 and r["returncode"] == 1
                       and "TypeError" in r["message"] for r in errors), errors
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)

    # the resume line continues the film in the same run dir
    rerun = subprocess.run([EXE, *shlex.split(lines[0][len(RESUME_PREFIX):])[1:]],
                           env=_env(state), capture_output=True, text=True, timeout=1800)
    _kill_leftovers(state)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"run dir: {run_dir}" in rerun.stdout
    assert list((tmp_path / "runs" / "mythos").iterdir()) == [run_dir]
    assert (run_dir / "film.mp4").is_file()


def test_sigterm_mid_sweep_prints_the_resume_line(tmp_path):
    state = tmp_path / "state"
    results = tmp_path / "results"
    proc = _start([*SWEEP, "--results-dir", str(results)], state, "sweep")
    try:
        progress = results / "c0-rep1" / "progress.json"

        def round_1_under_way():
            try:
                return json.loads(progress.read_text())["completed_rounds"] == [0]
            except (OSError, ValueError, KeyError):
                return False

        _wait_for("c0-rep1 round 1 done", round_1_under_way, proc)
        code = _sigterm(proc)
        err = _text(state, "sweep", "err")
        assert code == 143, err[-3000:]
        assert "Traceback" not in err and "Crash detected" not in err, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith(RESUME_PREFIX), err[-3000:]
        assert f"--results-dir {results}" in lines[0]
        _no_process_left(state)
        assert "RUNNING" not in _run_states(state, "flow_run")
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)


def test_the_mythloop_script_is_this_checkout():
    """The tests above run `mythloop` from the venv: it must import this tree's code."""
    out = subprocess.run([EXE, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    probe = subprocess.run([sys.executable, "-c", "import mythloop_app, sys; "
                            "print(mythloop_app.__file__)"], capture_output=True, text=True)
    assert Path(probe.stdout.strip()).resolve().is_relative_to(
        Path(__file__).resolve().parents[1])


def test_sigterm_stops_serve_then_the_server(tmp_path):
    state = tmp_path / "state"
    server = _start(["server"], state, "server")
    serve = None
    try:
        record = state / "server.json"
        _wait_for("mythloop server", lambda: record.exists(), server, timeout=300)
        serve = _start(["serve"], state, "serve")
        _wait_for("serving", lambda: "Ctrl-C stops serving" in _text(state, "serve", "out"),
                  serve, timeout=300)
        code = _sigterm(serve)
        assert code == 0, _text(state, "serve", "err")[-3000:]
        assert _text(state, "serve", "out").splitlines()[-1] == "stopped serving"
        assert _text(state, "serve", "out").count("stopped serving") == 1  # said once
        assert "Traceback" not in _text(state, "serve", "err")
        assert server.poll() is None
        code = _sigterm(server)
        assert code == 0, _text(state, "server", "err")[-3000:]
        assert "Prefect server stopped." in _text(state, "server", "out")
        assert not record.exists()
        _no_process_left(state)
    finally:
        for proc in (serve, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
        _kill_leftovers(state)


def test_no_render_starts_once_the_process_is_stopping(tmp_path):
    """A render asked for after Ctrl-C / SIGTERM (a flow thread that had not yet seen it)
    starts no worker and no sandbox, and reports `interrupted`."""
    from mythloop import procs
    from mythloop.mythos.sandbox import render_pool
    from mythloop.mythos.sandbox.render import render_scene

    scene = tmp_path / "busy_story.py"
    scene.write_text(BUSY_SCENE, encoding="utf-8")
    pool = render_pool.current_pool()
    started = pool.started if pool is not None else 0
    procs.STOPPING.set()
    try:  # (a short timeout: were the render to start, the test ends soon and fails)
        result = render_scene(scene, out_dir=tmp_path / "out", timeout=30)
    finally:
        procs.STOPPING.clear()
    assert result.kind == "interrupted" and not result.ok, result.message
    pool = render_pool.current_pool()
    assert (pool.started if pool is not None else 0) == started
    assert not list((tmp_path / "out").rglob("*.mp4"))
