"""The Prefect server dies mid-run: the sweep's temporary server is SIGKILLed after round 1.

The CLI says so in one line (what died, how to resume), exits with 3, leaves no process and
no traceback; the rerun of the line's command resumes and gives the same metrics as an
undisturbed sweep (the `uninterrupted` fixture of test_interrupts). Real processes: the CLI,
its temporary server, the rerun; each test kills what is left of its state folder.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess

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

pytestmark = pytest.mark.slow

PREFIX = "error: the temporary Prefect server (pid "
RESUME = ", then rerun the same command to resume: "


def test_a_killed_temporary_server_costs_one_line_and_the_rerun_resumes(tmp_path,
                                                                        uninterrupted):  # noqa: F811
    state = tmp_path / "state"
    results = tmp_path / "results"
    proc = _start([*SWEEP, "--results-dir", str(results)], state, "sweep")
    try:
        progress = results / "c0-rep1" / "progress.json"

        def round_1_done():
            try:
                return json.loads(progress.read_text())["completed_rounds"] == [0]
            except (OSError, ValueError, KeyError):
                return False

        _wait_for("c0-rep1 round 1 done", round_1_done, proc)
        servers = [pid for pid, cmd in _descendants(proc.pid).items()
                   if "prefect.server.api.server:create_app" in cmd]
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
