"""Ctrl-C, as a terminal sends it (SIGINT to the whole foreground process group), against the
real CLI: `sweep` mid-round, `film` mid-render, `server` and `serve`. Each ends with one line
(a hang is given 120 s; how fast it ends is no test's bound), leaves no process and no run
Running, and the temporary Prefect server of a sweep or film (in a session of its own) records
the crash before it is stopped, last.

Every test has its own state folder, so its own `.mythloop/prefect/prefect.db`."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import settle, wait_for

pytestmark = pytest.mark.slow

EXE = str(Path(sys.executable).with_name("mythloop"))


def _typed() -> str:
    """How the resume line names the command started as EXE: as typed (EXE's path), or the
    bare name when PATH finds that very file; either way it runs as printed."""
    found = shutil.which("mythloop")
    return "mythloop" if found and os.path.samefile(found, EXE) else EXE
SWEEP = ["sweep", "--rounds", "2", "--replicates", "2", "--noise", "0.3"]
RESUME_PREFIX = "interrupted; rerun the same command to resume: "


def _env(state: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env.update({"MYTHLOOP_STATE_DIR": str(state), "PREFECT_HOME": str(state / "prefect")})
    return env


def _start(args: list[str], state: Path, name: str,
           api_url: str | None = None) -> subprocess.Popen:
    """The CLI in a session of its own: its group stands for the terminal's foreground group.
    API_URL: the Prefect API it reports to (else a temporary server of its own)."""
    state.mkdir(parents=True, exist_ok=True)
    env = _env(state) | ({"PREFECT_API_URL": api_url} if api_url else {})
    return subprocess.Popen([EXE, *args], env=env, stdin=subprocess.DEVNULL,
                            stdout=open(state / f"{name}.out", "wb"),
                            stderr=open(state / f"{name}.err", "wb"),
                            start_new_session=True)


def _text(state: Path, name: str, stream: str) -> str:
    """What the command printed; a failure with the threads' stacks when its orderly stop got
    stuck and the stop deadline ended it (runtime._stop_deadline)."""
    text = (state / f"{name}.{stream}").read_text(errors="replace")
    if "stopping took over" in text:
        stacks = [path.read_text(errors="replace")
                  for path in sorted((state / "logs").glob("stop-stacks-*.txt"))]
        pytest.fail("the command's stop got stuck and its deadline ended it:\n"
                    + text[-2000:] + "\n" + "\n".join(stacks)[-12000:])
    return text


def _processes_of(state: Path) -> list[str]:
    """Live processes whose environment names this state folder (the CLI and all it started)."""
    marker = f"MYTHLOOP_STATE_DIR={state}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError, IndexError):
            if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:160])
    return found


def _kill_leftovers(state: Path) -> None:
    marker = f"MYTHLOOP_STATE_DIR={state}".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    os.kill(int(entry.name), signal.SIGKILL)


def _wait_for(what: str, check, proc: subprocess.Popen, timeout: float = 900.0):
    return wait_for(check, timeout, what, alive=proc, interval=0.05)


def _ctrl_c(proc: subprocess.Popen) -> int:
    """SIGINT to the command's whole process group; its exit code."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        code = proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the command did not exit within 120 s of Ctrl-C")
    return code



def _ctrl_c_ends_cleanly(proc: subprocess.Popen, state: Path, command: str) -> None:
    """Ctrl-C: the command exits 130 and leaves no process behind."""
    code = _ctrl_c(proc)
    err = _text(state, command, "err")
    assert code == 130, err[-3000:]
    _no_process_left(state)


def _no_process_left(state: Path) -> None:
    assert settle(lambda: _processes_of(state), 30, until=lambda left: not left,
                  interval=0.2) == []  # a process may still be being reaped


def _run_states(state: Path, table: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(state / "prefect" / "prefect.db")) as db:
        return [row[0] for row in db.execute(f"select state_type from {table}")]


def _comparable(metrics_path: Path) -> dict:
    """Everything the analysis computed; only the run's own metadata (paths, times) differs."""
    metrics = json.loads(metrics_path.read_text())
    metrics.pop("sweep", None)
    return metrics


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A clean 2-replicate sweep through the CLI and its temporary server."""
    state = tmp_path_factory.mktemp("whole")
    try:
        result = subprocess.run([EXE, *SWEEP, "--results-dir", str(state / "results")],
                                env=_env(state), capture_output=True, text=True, timeout=1800)
    finally:
        _kill_leftovers(state)
    return state, result


def test_a_clean_sweep_prints_no_traceback_and_keeps_its_runs(uninterrupted):
    state, result = uninterrupted
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "Error" not in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in (state / "prefect" / "server.log").read_text(errors="replace")
    # The temporary server drained before it stopped: every run stored, none left Running.
    flows = _run_states(state, "flow_run")
    assert sorted(flows) == ["COMPLETED"] * 5  # the sweep and its 4 condition runs
    tasks = _run_states(state, "task_run")
    assert tasks and set(tasks) == {"COMPLETED"}
    # The hint tells where those runs are and how to see them.
    hint = result.stdout.strip().splitlines()[-1]
    assert str(state / "prefect") in hint and "`mythloop server`" in hint
    assert _processes_of(state) == []


def test_ctrl_c_mid_round_ends_the_sweep_and_the_rerun_finishes_it(tmp_path, uninterrupted):
    state = tmp_path / "state"
    results = tmp_path / "results"
    proc = _start([*SWEEP, "--results-dir", str(results)], state, "sweep")
    try:
        progress = results / "c0-rep1" / "progress.json"

        def round_1_under_way():
            with contextlib.suppress(OSError, ValueError, KeyError):
                return json.loads(progress.read_text())["completed_rounds"] == [0]
            return False

        _wait_for("c0-rep1 round 0 done", round_1_under_way, proc)
        code = _ctrl_c(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)

    err = _text(state, "sweep", "err")
    assert code == 130, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(RESUME_PREFIX), err[-3000:]
    _no_process_left(state)
    assert not (results / "metrics.json").exists()
    flows = _run_states(state, "flow_run")
    assert "RUNNING" not in flows and "CRASHED" in flows, flows
    assert "RUNNING" not in _run_states(state, "task_run")

    # The printed command, run as is, resumes and finishes the sweep.
    resume = shlex.split(lines[0].removeprefix(RESUME_PREFIX))
    assert resume[0] == _typed() and resume[1:] == [*SWEEP, "--results-dir", str(results)]
    rerun = subprocess.run(resume, env=_env(state), capture_output=True,  # as printed
                           text=True, timeout=1800)
    _kill_leftovers(state)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "already complete, skipped" in rerun.stdout
    whole_state, whole = uninterrupted
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert _comparable(results / "metrics.json") == _comparable(
        whole_state / "results" / "metrics.json")
    assert "RUNNING" not in _run_states(state, "flow_run")


def _descendants(pid: int) -> dict[int, str]:
    """The command's process tree ({pid: command line}); the sandboxed render carries a
    scrubbed environment, so it is found by parentage, not by the state folder. The whole
    command line: the part a test looks for (the server's `...:create_app`) comes after the
    checkout's paths, which are longer in a clean clone under a temporary folder."""
    from mythloop.procs import descendant_pids

    found = {}
    for child in descendant_pids(pid):
        with contextlib.suppress(OSError):
            found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(
                b"\0", b" ").decode(errors="replace")
    return found


def _rendering(state: Path) -> bool:
    """A render is under way: its staging dir exists (warm workers, which a film starts
    before its first render, run sandbox_init too, so a process list cannot tell)."""
    from mythloop.mythos.sandbox.render import STAGE_PREFIX

    return any((state / "render-stage").glob(f"{STAGE_PREFIX}*"))


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_ctrl_c_mid_render_ends_the_film_and_its_render(tmp_path):
    state = tmp_path / "state"
    args = ["film", "the heat equation", "--backend", "replay", "--render", "-q", "l",
            "--runs-dir", str(tmp_path / "runs")]
    proc = _start(args, state, "film")
    try:
        tree = _wait_for("the render", lambda: _descendants(proc.pid) if _rendering(state)
                         else None, proc)
        code = _ctrl_c(proc)
        err = _text(state, "film", "err")
        assert code == 130, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        (run_dir,) = (tmp_path / "runs" / "mythos").iterdir()  # resumed in its own run dir
        assert lines == [RESUME_PREFIX + shlex.join([_typed(), *args, "--resume",
                                                     str(run_dir)])], err[-3000:]
        _no_process_left(state)
        # nor a mount: the renders' staging bind is undone on the way out (procs.hard_exit)
        from mythloop.mythos.sandbox.footprint import is_mount_point

        assert not is_mount_point(state / "render-stage"), "the staging bind outlived the film"
        assert [cmd for pid, cmd in tree.items() if _alive(pid)] == []  # the render too
        assert _run_states(state, "flow_run") == ["CRASHED"]
        assert "RUNNING" not in _run_states(state, "task_run")
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)


def test_ctrl_c_stops_serve_then_the_server(tmp_path):
    state = tmp_path / "state"
    server = _start(["server"], state, "server")
    serve = None
    try:
        record = state / "server.json"
        _wait_for("mythloop server", lambda: record.exists(), server, timeout=300)
        serve = _start(["serve"], state, "serve")
        _wait_for("serving", lambda: "Ctrl-C stops serving" in _text(state, "serve", "out"),
                  serve, timeout=300)
        code = _ctrl_c(serve)
        assert code == 0, _text(state, "serve", "err")[-3000:]
        assert _text(state, "serve", "out").splitlines()[-1] == "stopped serving"
        assert _text(state, "serve", "out").count("stopped serving") == 1  # said once
        assert "Traceback" not in _text(state, "serve", "err")
        assert server.poll() is None  # its own session: the server is not touched

        code = _ctrl_c(server)
        assert code == 0, _text(state, "server", "err")[-3000:]
        assert "Prefect server stopped." in _text(state, "server", "out")
        assert not record.exists()
        _no_process_left(state)
    finally:
        for proc in (serve, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
        _kill_leftovers(state)


def _task_run_names(state: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(state / "prefect" / "prefect.db")) as db:
        return [row[0] for row in db.execute("select name from task_run")]


def _task_run_states(state: Path) -> dict[str, str]:
    with contextlib.closing(sqlite3.connect(state / "prefect" / "prefect.db")) as db:
        return dict(db.execute("select name, state_type from task_run"))


BUSY_SCENE_1 = '''class TinyFilm01Busy(TinyBase):
    def construct(self):
        self.open_scene()
        total = 0
        while total >= 0:
            total += 1
        self.add(Square(color=CORAL))
'''


def test_ctrl_c_mid_scene_starts_no_queued_scene(tmp_path, monkeypatch):
    """One scene at a time (--render-workers 1): Ctrl-C while scene-01 renders. Scenes 02 and
    03 were queued on the task runner and never start: no task run, scene file or render."""
    from test_film_scenes import SCENE_2_FIXED, SCENE_3, _tiny_cassettes

    topic = "tiny scenes stopped"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_tiny_cassettes(
        tmp_path / "cassettes", topic, SCENE_2_FIXED, scenes=(BUSY_SCENE_1, SCENE_2_FIXED,
                                                              SCENE_3), repaired="scene-09")))
    state = tmp_path / "state"
    runs = tmp_path / "runs"
    proc = _start(["film", topic, "--backend", "replay", "--render", "-q", "l",
                   "--render-workers", "1", "--render-timeout", "600", "--runs-dir",
                   str(runs)], state, "film")
    try:
        _wait_for("scene-01's render", lambda: _rendering(state), proc)
        _ctrl_c_ends_cleanly(proc, state, "film")
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)
    names = _task_run_names(state)
    assert {"scene-01", "verify-scene-01", "render-scene-01"} <= set(names), names
    # the render Ctrl-C ended and its scene are Crashed, as runs under way are: not a
    # Completed render of a Failed scene
    states = _task_run_states(state)
    assert (states["render-scene-01"], states["scene-01"]) == ("CRASHED", "CRASHED"), states
    assert states["verify-scene-01"] == "COMPLETED"
    assert not [name for name in names if "scene-02" in name or "scene-03" in name], names
    (run_dir,) = (runs / "mythos").iterdir()
    assert (run_dir / "scenes" / "scene-01.py").is_file()
    assert not list((run_dir / "scenes").glob("scene-0[23]*")), "a queued scene started"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {render["scene"] for render in manifest.get("renders", [])} <= {1}
    assert "RUNNING" not in _run_states(state, "task_run")


SLOW_SCENE_2 = '''class TinyFilm02Slow(TinyBase):
    def construct(self):
        self.open_scene()
        total = 0
        while total < 60_000_000:
            total += 1
        self.add(Circle(color=BLUE))
        self.wait(1)
'''


def test_the_printed_resume_line_of_a_fresh_film_continues_it(tmp_path, monkeypatch):
    """A film started with --fresh, Ctrl-C while scene 2 renders (scene 1 rendered): the
    printed line, run as printed, continues that run dir: no --fresh in it, no stage file
    written again, scene 1 not rendered again, and the film completes."""
    from test_film_scenes import SCENE_1, SCENE_3, _tiny_cassettes

    topic = "tiny scenes resumed"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_tiny_cassettes(
        tmp_path / "cassettes", topic, SCENE_3, scenes=(SCENE_1, SLOW_SCENE_2, SCENE_3),
        repaired="scene-09")))
    state = tmp_path / "state"
    runs = tmp_path / "runs"
    args = ["film", topic, "--backend", "replay", "--render", "-q", "l", "--fresh",
            "--render-workers", "1", "--render-timeout", "600", "--runs-dir", str(runs)]
    proc = _start(args, state, "film")

    def scene_2_rendering():
        done = list(runs.glob("mythos/*/scenes/scene-01.mp4"))
        rendering = _rendering(state)
        return done and rendering and not list(runs.glob("mythos/*/scenes/scene-02.mp4"))

    try:
        _wait_for("scene-02's render after scene-01's", scene_2_rendering, proc)
        _ctrl_c_ends_cleanly(proc, state, "film")
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)
    lines = [line for line in _text(state, "film", "err").splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(RESUME_PREFIX), lines
    printed = shlex.split(lines[0].removeprefix(RESUME_PREFIX))
    (run_dir,) = (runs / "mythos").iterdir()
    assert "--fresh" not in printed and printed[-2:] == ["--resume", str(run_dir)]
    assert printed[:1] == [_typed()]
    kept = {path: path.stat().st_mtime_ns for path in run_dir.rglob("*")
            if path.is_file() and path.name != "manifest.json"  # scenes 2-3: not finished
            and not any(part.startswith(("scene-02", "scene-03"))
                        for part in path.relative_to(run_dir).parts)
            and path.suffix not in (".log", ".jsonl")}
    assert run_dir / "scenes" / "scene-01.mp4" in kept
    assert len(kept) >= 8  # the six stages' files, codegen's, scene 1's

    again = subprocess.run([EXE, *printed[1:]], env=_env(state), capture_output=True,
                           text=True, timeout=900)
    _kill_leftovers(state)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"run dir: {run_dir}" in again.stdout
    assert (run_dir / "film.mp4").is_file()
    rewritten = sorted(str(path.relative_to(run_dir)) for path, mtime in kept.items()
                       if path.stat().st_mtime_ns != mtime)
    assert rewritten == []  # no stage file, no scene-01 file written again
    manifest = json.loads((run_dir / "manifest.json").read_text())
    renders = sorted((r["scene"], r["cache"]) for r in manifest["renders"])
    assert renders == [(1, "hit"), (2, "miss"), (3, "miss")], renders  # scene 1: not again


def test_ctrl_c_with_parallel_shards_starts_no_queued_shard(tmp_path):
    """Six shards, two side by side: Ctrl-C once a shard has finished a round. The shards
    still queued on the task runner never start (no sandbox, no task run)."""
    state = tmp_path / "state"
    results = tmp_path / "results"
    args = ["sweep", "--rounds", "2", "--replicates", "3", "--noise", "0.3",
            "--parallel-shards", "2", "--results-dir", str(results)]
    proc = _start(args, state, "sweep")

    def shard_dirs() -> set[str]:
        return {p.name for p in results.glob("c*-rep*") if p.is_dir()}

    def a_round_done():
        for progress in results.glob("c*-rep*/progress.json"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                if json.loads(progress.read_text())["completed_rounds"]:
                    return True
        return False

    try:
        _wait_for("two shards under way, one round done",
                  lambda: len(shard_dirs()) >= 2 and a_round_done(), proc)
        started = shard_dirs()
        _ctrl_c_ends_cleanly(proc, state, "sweep")
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)
    assert len(started) == 2, started  # two side by side ...
    assert shard_dirs() == started  # ... and none of the four queued ones started
    shards = sorted(name for name in _task_run_names(state) if name.startswith("shard-"))
    assert shards == sorted(f"shard-{name}" for name in started)
    assert not (results / "metrics.json").exists()
    # the shards under way, in the task runner's threads, are recorded Crashed too
    assert "RUNNING" not in _run_states(state, "flow_run")
    assert "RUNNING" not in _run_states(state, "task_run")
