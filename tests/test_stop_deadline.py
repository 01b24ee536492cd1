"""A command asked to stop (Ctrl-C, SIGTERM) ends by its deadline even when its orderly stop
gets stuck (runtime._stop_deadline): one line that says so, the threads' stacks in a file
under the state folder's logs/, nothing of it left running, and the signal's exit code."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from test_interrupts import _alive
from waiting import settle

STUCK = textwrap.dedent("""
    import subprocess, sys, time
    from mythloop_app.commands.runtime import flow_runtime

    def stuck_in_its_stop(child):
        ready = False
        while True:
            try:
                if not ready:  # (inside the try: a signal right after it is swallowed too)
                    ready = True
                    print(child.pid, flush=True)
                time.sleep(1000)
            except KeyboardInterrupt:
                continue  # the KeyboardInterrupt swallowed: the orderly stop never comes

    with flow_runtime():
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1000)"])
        stuck_in_its_stop(child)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_that_gets_stuck_ends_at_its_deadline(prefect_harness, tmp_path, sig):
    from prefect.settings import PREFECT_API_URL

    state = tmp_path / "state"
    script = tmp_path / "stuck_command.py"
    script.write_text(STUCK, encoding="utf-8")
    env = {**os.environ, "MYTHLOOP_STATE_DIR": str(state),
           "PREFECT_HOME": str(state / "prefect"), "PREFECT_API_URL": PREFECT_API_URL.value(),
           "MYTHLOOP_STOP_DEADLINE_S": "3"}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    child = 0
    try:
        child = int(proc.stdout.readline())  # the command is under way, with a child
        os.kill(proc.pid, sig)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the deadline did not end the stuck command")
        assert proc.returncode == 128 + sig, err[-3000:]
        lines = [line for line in err.splitlines() if line.strip()]
        assert lines[-1].startswith("mythloop: stopping took over 3 s; stopped the rest at once"), \
            err[-3000:]
        assert "interrupted; rerun the same command to resume" not in err  # nothing resumes it
        (stacks,) = (state / "logs").glob("stop-stacks-*.txt")
        assert str(stacks) in lines[-1]
        text = stacks.read_text()
        assert "stuck_in_its_stop" in text and str(script) in text, text[-3000:]
        # its child went with it
        assert settle(lambda: _alive(child), 30, until=lambda alive: not alive,
                      interval=0.1) is False
    finally:
        if proc.poll() is None:
            proc.kill()
        if _alive(child):
            os.kill(child, signal.SIGKILL)
