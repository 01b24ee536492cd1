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


SCENE_1_BROKEN = '''class TinyFilm01Square(TinyBase):
    def construct(self):
        self.open_scene()
        self.add(Sqare(color=CORAL))
        self.wait(1)
'''


def _api_runs(flow_run_id: str, names: set[str]) -> dict:
    """The flow run's task runs by name, read from the Prefect API (stored from events, so
    polled until NAMES are there and none is Running)."""
    import uuid

    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId
    from waiting import settle

    with get_client(sync_client=True) as client:
        runs = settle(lambda: client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[uuid.UUID(flow_run_id)])), limit=200), 60,
            until=lambda found: names <= {run.name for run in found} and all(
                run.state_type.value != "RUNNING" for run in found))
    return {run.name: run for run in runs}


@pytest.mark.usefixtures("prefect_harness")
def test_a_film_resumed_after_sigterm_redoes_no_finished_render_or_repair(tmp_path,
                                                                        monkeypatch):
    """Scene 1 fails, is repaired and rendered; SIGTERM while scene 2 renders. In the UI
    (the Prefect API the command reports to): scene 1's first render Failed with its error in
    its log, scene 2's render and scene 2 Crashed. The printed resume line then finishes the
    film with no model call (its repair's recording removed: a call would fail the scene) and
    no render of scene 1."""
    from prefect.settings import PREFECT_API_URL
    from test_film_scenes import SCENE_1, SCENE_3, _tiny_cassettes
    from test_interrupts import SLOW_SCENE_2

    topic = "tiny scenes resumed after sigterm"
    cassettes = _tiny_cassettes(tmp_path / "cassettes", topic, SCENE_1,
                                scenes=(SCENE_1_BROKEN, SLOW_SCENE_2, SCENE_3),
                                repaired="scene-01")
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(cassettes))
    api = PREFECT_API_URL.value()
    state = tmp_path / "state"
    runs = tmp_path / "runs"
    args = ["film", topic, "--backend", "replay", "--render", "-q", "l", "--render-workers",
            "1", "--render-timeout", "600", "--runs-dir", str(runs)]
    proc = _start(args, state, "film", api_url=api)

    def scene_2_rendering():
        return (list(runs.glob("mythos/*/scenes/scene-01.mp4")) and _rendering(state)
                and not list(runs.glob("mythos/*/scenes/scene-02.mp4")))

    try:
        _wait_for("scene-02's render after scene-01's repair", scene_2_rendering, proc)
        code = _sigterm(proc)
        err = _text(state, "film", "err")
        assert code == 143, err[-3000:]
        _no_process_left(state)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(RESUME_PREFIX), lines
    (run_dir,) = (runs / "mythos").iterdir()
    first = json.loads((run_dir / "manifest.json").read_text())
    assert [r["scene"] for r in first["repairs"]] == [1]

    names = {"scene-01", "render-scene-01", "repair-scene-01-1",
             "render-scene-01 (after repair-1)", "scene-02", "render-scene-02"}
    before = _api_runs(first["prefect_flow_run_id"], names)
    states = {name: before[name].state_type.value for name in names}
    assert states == {"scene-01": "COMPLETED", "render-scene-01": "FAILED",
                      "repair-scene-01-1": "COMPLETED",
                      "render-scene-01 (after repair-1)": "COMPLETED",
                      "scene-02": "CRASHED", "render-scene-02": "CRASHED"}, states
    assert not [name for name in before if "scene-03" in name]  # queued: never started
    assert "timeout:600s" in before["render-scene-02"].tags  # the render's own deadline

    # the resume: no model call may answer (scene 1's recorded repair is gone) ...
    (cassettes / "tiny-scenes-resumed-after-sigterm" / "repair-scene-01-1.json").unlink()
    raw_reply = run_dir / "scenes" / "repair-scene-01-1.raw.txt"
    replied = raw_reply.stat().st_mtime_ns
    again = subprocess.run([EXE, *shlex.split(lines[0][len(RESUME_PREFIX):])[1:]],
                           env=_env(state) | {"PREFECT_API_URL": api},
                           capture_output=True, text=True, timeout=900)
    _kill_leftovers(state)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (run_dir / "film.mp4").is_file()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["model_calls"] == 0
    assert raw_reply.stat().st_mtime_ns == replied
    assert [(r["scene"], r["reused"]) for r in manifest["repairs"]] == [(1, True)]
    # ... and scene 1 renders nothing: its failed first render and its repaired one are
    # read back; scene 2 (stopped mid-render) and scene 3 (never started) render
    renders = sorted((r["scene"], r["attempt"], r["kind"], r["cache"])
                     for r in manifest["renders"])
    assert renders == [(1, 0, "scene_error", "hit"), (1, 1, "ok", "hit"),
                       (2, 0, "ok", "miss"), (3, 0, "ok", "miss")], renders
    assert "no model call" in again.stdout
    after = _api_runs(manifest["prefect_flow_run_id"], names | {"scene-03"})
    assert after["render-scene-01"].state_type.value == "FAILED"  # the same failure, read back
    assert {after[name].state_type.value for name in after
            if name != "render-scene-01"} == {"COMPLETED"}
