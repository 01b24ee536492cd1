"""PostgreSQL stops under a running sweep in the scale-out stack: the CLI says so in one line.

Real processes: PostgreSQL and a Prefect server on it (the stack of `make scale-demo`, without
workers: the sweep runs in the CLI), `mythloop sweep` pointed at that server through
PREFECT_API_URL. Once round 1 is written, PostgreSQL gets a fast shutdown; the command must end
with one line naming the database and the resume command, exit 3, no traceback, no process
left. (That the rerun resumes with the same metrics is test_server_death's part: the resume
reads the results dir, whichever server died.) Slow: the stack starts in about a minute.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess

import pytest
from test_interrupts import EXE, SWEEP, _no_process_left, _text, _wait_for

from mythloop.procs import stop_process
from mythloop_app.scale.stack import ScaleStack

pytestmark = pytest.mark.slow

RESUME = ", then rerun the same command to resume: "


def test_postgres_down_mid_sweep_costs_one_line(tmp_path):
    stack = ScaleStack(workers=0, root=tmp_path / "stack")
    state, results = tmp_path / "state", tmp_path / "results"
    state.mkdir()
    proc = None
    try:
        stack.start()
        env = {**stack.client_env(), "MYTHLOOP_STATE_DIR": str(state)}
        env.pop("PREFECT_HOME")  # the CLI's own, in its state folder
        proc = subprocess.Popen([EXE, *SWEEP, "--results-dir", str(results)], env=env,
                                stdin=subprocess.DEVNULL,
                                stdout=open(state / "sweep.out", "wb"),
                                stderr=open(state / "sweep.err", "wb"), start_new_session=True)
        progress = results / "c0-rep1" / "progress.json"

        def round_1_done():
            with contextlib.suppress(OSError, ValueError, KeyError):
                return json.loads(progress.read_text())["completed_rounds"] == [0]
            return False

        _wait_for("c0-rep1 round 1 done", round_1_done, proc)
        database = f"PostgreSQL on {stack.postgres.host}:{stack.postgres.port}"
        stop_process(stack.postgres.proc, first=signal.SIGINT, grace=30.0)  # a fast shutdown
        stack.postgres.proc = None
        try:
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the sweep did not end within 120 s of its database going down")
        err = _text(state, "sweep", "err")
        assert code == 3, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1, err[-3000:]
        assert lines[0].startswith(f"error: the database of the Prefect server at "
                                   f"{stack.api_url} went down mid-run"), lines[0]
        assert database in lines[0] and RESUME in lines[0]
        assert lines[0].endswith(f"--results-dir {results}")
        _no_process_left(state)
    finally:
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        stack.stop()
    assert stack.leftovers() == {"pids": [], "ports": [], "dirs": []}
