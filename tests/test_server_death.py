"""The Prefect server dies mid-run: the sweep's temporary server is SIGKILLed after round 1, or
the user's own `mythloop server` (reached through PREFECT_API_URL) is.

The CLI says so in one line (what died, how to resume), exits with 3, leaves no process and
no traceback; the rerun of the line's command resumes and gives the same metrics as an
undisturbed sweep (the `uninterrupted` fixture of test_interrupts). Real processes: the CLI,
its temporary server, the rerun; each test kills what is left of its state folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
from pathlib import Path

import pytest
from test_interrupts import (  # noqa: F401  (uninterrupted: a module-scoped fixture)
    EXE,
    SWEEP,
    _comparable,
    _descendants,
    _env,
    _kill_leftovers,
    _no_process_left,
    _start,
    _text,
    _wait_for,
    uninterrupted,
)

from mythloop.procs import free_port, http_ok

pytestmark = pytest.mark.slow

PREFIX = "error: the temporary Prefect server (pid "
RESUME = ", then rerun the same command to resume: "


def _round_1_done(results: Path) -> bool:
    """c0-rep1 has recorded its first round (and only that one)."""
    try:
        progress = json.loads((results / "c0-rep1" / "progress.json").read_text())
        return progress["completed_rounds"] == [0]
    except (OSError, ValueError, KeyError):
        return False


def test_a_killed_temporary_server_costs_one_line_and_the_rerun_resumes(tmp_path,
                                                                        uninterrupted):  # noqa: F811
    state = tmp_path / "state"
    results = tmp_path / "results"
    proc = _start([*SWEEP, "--results-dir", str(results)], state, "sweep")
    try:
        _wait_for("c0-rep1 round 1 done", lambda: _round_1_done(results), proc)
        # a state, not a moment: the server is looked for until it shows (or the sweep ends)
        servers = _wait_for("the temporary server among the sweep's processes", lambda: [
            pid for pid, cmd in _descendants(proc.pid).items()
            if "prefect.server.api.server:create_app" in cmd], proc)
        assert len(servers) == 1, _descendants(proc.pid)
        os.kill(servers[0], signal.SIGKILL)
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the sweep did not end within 120 s of its server's death")
        err = _text(state, "sweep", "err")
        assert code == 3, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err[-3000:]
        assert lines[0].startswith(PREFIX + f"{servers[0]}) killed by signal 9 mid-run")
        assert "server.log" in lines[0] and RESUME in lines[0]
        _no_process_left(state)
    finally:
        if proc.poll() is None:
            proc.kill()
        _kill_leftovers(state)

    resume = shlex.split(lines[0].split(RESUME, 1)[1])
    assert resume[0] == "mythloop" and str(results) in resume
    rerun = subprocess.run([EXE, *resume[1:]], env=_env(state), capture_output=True, text=True,
                           timeout=1800)
    _kill_leftovers(state)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "already complete, skipped" in rerun.stdout
    whole_state, whole = uninterrupted
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert _comparable(results / "metrics.json") == _comparable(
        whole_state / "results" / "metrics.json")


def _start_against(args: list[str], state, name: str, api_url: str) -> subprocess.Popen:
    """The CLI in a session of its own, pointed at `api_url` through PREFECT_API_URL."""
    state.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen([EXE, *args], env={**_env(state), "PREFECT_API_URL": api_url},
                            stdin=subprocess.DEVNULL,
                            stdout=open(state / f"{name}.out", "wb"),
                            stderr=open(state / f"{name}.err", "wb"), start_new_session=True)


def _mythloop_server(state, port: int, name: str) -> tuple[subprocess.Popen, int]:
    """`mythloop server --port PORT` of this state folder once it answers: it, and the pid of
    its Prefect server (the leader of a session of its own)."""
    server = _start(["server", "--port", str(port)], state, name)
    _wait_for("mythloop server", lambda: "Prefect server ready." in _text(state, name, "out"),
              server, timeout=600)
    assert http_ok(f"http://127.0.0.1:{port}/api/health")
    return server, json.loads((state / "server.json").read_text())["server_pid"]


def test_a_killed_mythloop_server_costs_one_line_and_the_rerun_resumes(tmp_path,
                                                                       uninterrupted):  # noqa: F811
    state = tmp_path / "state"
    results = tmp_path / "results"
    port = free_port()
    api_url = f"http://127.0.0.1:{port}/api"
    server, prefect_pid = _mythloop_server(state, port, "server")
    proc = _start_against([*SWEEP, "--results-dir", str(results)], state, "sweep", api_url)
    try:
        _wait_for("c0-rep1 round 1 done", lambda: _round_1_done(results), proc)
        os.killpg(prefect_pid, signal.SIGKILL)  # the server, then the command that ran it
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the sweep did not end within 120 s of its server's death")
        err = _text(state, "sweep", "err")
        assert code == 3, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err[-3000:]
        assert lines[0].startswith(f"error: `mythloop server` (pid {server.pid}, {api_url}) "
                                   "stopped mid-run"), lines[0]
        assert RESUME in lines[0]
        _no_process_left(state)
    finally:
        for leader in (proc.pid, server.pid, prefect_pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leader, signal.SIGKILL)
        _kill_leftovers(state)

    resume = shlex.split(lines[0].split(RESUME, 1)[1])
    assert resume[0] == "mythloop" and str(results) in resume
    server, prefect_pid = _mythloop_server(state, port, "server-again")
    try:
        rerun = subprocess.run([EXE, *resume[1:]], env={**_env(state), "PREFECT_API_URL": api_url},
                               capture_output=True, text=True, timeout=1800)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert "already complete, skipped" in rerun.stdout
        assert f"Prefect UI: http://127.0.0.1:{port}/runs" in rerun.stdout  # its runs went there
        os.killpg(server.pid, signal.SIGINT)  # Ctrl-C in the server's terminal
        assert server.wait(timeout=60) == 0
    finally:
        for leader in (server.pid, prefect_pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(leader, signal.SIGKILL)
        _kill_leftovers(state)
    whole_state, whole = uninterrupted
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert _comparable(results / "metrics.json") == _comparable(
        whole_state / "results" / "metrics.json")
