"""mythloop.procs against real processes, sockets and an HTTP server (no mocks)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil
import pytest
from waiting import settle

from mythloop import procs

# A child that starts a grandchild (in its own session when asked), then sleeps; the
# grandchild, once running, prints its pid on the shared stdout; with IGNORE_TERM both
# ignore SIGTERM.
_PARENT = textwrap.dedent("""
    import signal, subprocess, sys, time
    ignore = "IGNORE_TERM" in sys.argv
    if ignore:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    grandchild = subprocess.Popen(
        [sys.executable, "-c",
         "import os, signal, sys, time\\n"
         "if 'IGNORE_TERM' in sys.argv: signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
         "print(os.getpid(), flush=True)\\n"
         "time.sleep(600)", *sys.argv[1:]],
        start_new_session="SETSID" in sys.argv)
    time.sleep(600)
""")


def _family(*flags: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, int]:
    proc = procs.start_session([sys.executable, "-c", _PARENT, *flags], stdout=subprocess.PIPE,
                               text=True, env=env)
    line = proc.stdout.readline()
    assert line.strip().isdigit(), f"the grandchild printed {line!r}"
    return proc, int(line)


def _wait_dead(pid: int, limit: float = 30.0) -> bool:
    return settle(lambda: not procs.pid_alive(pid), limit, interval=0.05)


class _Cleanup(list):
    """Pids to SIGKILL at the end whatever the test did (only while still the same process)."""

    def append(self, pid: int) -> None:
        try:
            super().append(psutil.Process(pid))
        except psutil.Error:
            pass

    def __iadd__(self, pids):
        for pid in pids:
            self.append(pid)
        return self


@pytest.fixture
def cleanup():
    pids = _Cleanup()
    yield pids
    for process in pids:
        try:
            if process.is_running():  # same pid and start time: not a reused pid
                process.kill()
        except psutil.Error:
            pass


def test_stop_group_kills_child_and_grandchild(cleanup):
    proc, grandchild = _family()
    cleanup += [proc.pid, grandchild]
    assert procs.pid_alive(proc.pid) and procs.pid_alive(grandchild)
    assert os.getpgid(grandchild) == proc.pid  # the grandchild is in the child's group
    procs.stop_group(proc, grace=10.0)
    assert proc.returncode == -signal.SIGTERM
    assert _wait_dead(grandchild)


def test_stop_group_escalates_to_sigkill(cleanup):
    proc, grandchild = _family("IGNORE_TERM")
    cleanup += [proc.pid, grandchild]
    procs.stop_group(proc, grace=0.5)
    assert proc.returncode == -signal.SIGKILL
    assert _wait_dead(grandchild)


def test_a_grandchild_that_left_the_group_survives_the_group_but_not_the_tree(cleanup):
    proc, grandchild = _family("SETSID")
    cleanup += [proc.pid, grandchild]
    assert os.getpgid(grandchild) != proc.pid  # it left the group
    assert grandchild in procs.tree_pids(proc.pid)
    found = procs.kill_tree(proc.pid, grace=10.0)
    assert set(found) == {proc.pid, grandchild}
    proc.wait(timeout=10)
    assert _wait_dead(grandchild)

    # The group alone misses it: that is why stop_group(tree=True) exists.
    proc, grandchild = _family("SETSID")
    cleanup += [proc.pid, grandchild]
    procs.stop_group(proc, grace=10.0)
    assert procs.pid_alive(grandchild)
    os.kill(grandchild, signal.SIGKILL)

    proc, grandchild = _family("SETSID", "IGNORE_TERM")
    cleanup += [proc.pid, grandchild]
    procs.stop_group(proc, grace=0.5, tree=True)
    assert proc.returncode == -signal.SIGKILL
    assert _wait_dead(grandchild)


def test_kill_marked_reaches_every_session(cleanup):
    marker = f"t{os.getpid()}x{time.monotonic_ns()}"
    env = {**os.environ, "MYTHLOOP_TEST_MARK": marker}
    proc, grandchild = _family("SETSID", env=env)
    cleanup += [proc.pid, grandchild]
    assert procs.marked_pids("MYTHLOOP_TEST_MARK", marker) == sorted([proc.pid, grandchild])
    assert procs.kill_marked("MYTHLOOP_TEST_MARK", marker, grace=10.0) == sorted(
        [proc.pid, grandchild])
    proc.wait(timeout=10)
    assert _wait_dead(grandchild)
    assert procs.marked_pids("MYTHLOOP_TEST_MARK", marker) == []


def test_die_with_parent(cleanup):
    """A child started with die_with_parent ends when its parent is SIGKILLed."""
    script = textwrap.dedent("""
        import sys, time
        from mythloop import procs
        child = procs.start_session([sys.executable, "-c", "import time; time.sleep(600)"],
                                    die_with_parent=True)
        print(child.pid, flush=True)
        time.sleep(600)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    cleanup += [parent.pid, child]
    assert procs.pid_alive(child)
    assert os.getsid(child) == child  # a session of its own
    parent.kill()
    parent.wait(timeout=10)
    assert _wait_dead(child)


def test_free_port_is_bindable_and_port_in_use_sees_a_listener():
    port = procs.free_port()
    assert not procs.port_in_use("127.0.0.1", port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))
        sock.listen()
        assert procs.port_in_use("127.0.0.1", port)
        assert procs.port_listening("127.0.0.1", port)
    assert not procs.port_listening("127.0.0.1", port)


def test_wait_http_ok_returns_once_a_server_answers(tmp_path, cleanup):
    port = procs.free_port()
    url = f"http://127.0.0.1:{port}/"
    assert not procs.http_ok(url, timeout=1.0)
    server = procs.start_process(
        [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)],
        env=dict(os.environ), log_path=tmp_path / "server.log", cwd=tmp_path)
    cleanup.append(server.pid)
    try:
        assert procs.wait_http_ok(url, timeout=60.0, proc=server, interval=0.1)
        procs.wait_until(lambda: procs.http_ok(url), 60.0, "http.server", alive=server)
    finally:
        procs.stop_group(server, grace=10.0)
    assert not procs.pid_alive(server.pid)
    assert not procs.http_ok(url, timeout=1.0)


def test_wait_http_ok_fails_fast_when_the_process_dies(tmp_path):
    url = f"http://127.0.0.1:{procs.free_port()}/health"
    dying = procs.start_process([sys.executable, "-c", "import time; time.sleep(0.3)"],
                                env=dict(os.environ), log_path=tmp_path / "dying.log")
    started = time.monotonic()
    assert procs.wait_http_ok(url, timeout=300.0, proc=dying, interval=0.1) is False
    assert dying.poll() == 0
    assert time.monotonic() - started < 60  # it noticed the exit, not the 300 s deadline
    with pytest.raises(RuntimeError, match="exited with code 0"):
        procs.wait_until(lambda: procs.http_ok(url), 300.0, "server", alive=dying)


def test_pid_alive():
    assert procs.pid_alive(os.getpid())
    assert not procs.pid_alive(0)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    pid = proc.pid
    assert _wait_dead(pid)  # exited, not yet reaped: a zombie is not alive
    proc.wait()
    assert not procs.pid_alive(pid)  # reaped


def test_signal_group_on_a_gone_group_is_false():
    proc = procs.start_session([sys.executable, "-c", "pass"])
    proc.wait()
    assert procs.signal_group(proc.pid, signal.SIGTERM) is False


def test_log_tail(tmp_path):
    log = tmp_path / "x.log"
    assert procs.log_tail(log) == "(no log)"
    log.write_text("\n".join(str(i) for i in range(50)) + "\n", encoding="utf-8")
    assert procs.log_tail(log, 3) == "47\n48\n49"


def test_run_captures_output_and_feeds_input():
    done = procs.run([sys.executable, "-c", "import sys; print(sys.stdin.read().upper()); "
                      "print('to stderr', file=sys.stderr); sys.exit(3)"],
                     input="narration", timeout=60)
    assert done.returncode == 3
    assert done.stdout.strip() == "NARRATION" and done.stderr.strip() == "to stderr"


def test_run_timeout_kills_the_whole_group(tmp_path):
    """A tool that outlives its deadline goes with everything it started (subprocess.run
    would kill only the direct child and leave the grandchild running)."""
    pid_file = tmp_path / "grandchild.pid"
    script = textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c",
            "import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"])
        time.sleep(600)
    """)
    with pytest.raises(subprocess.TimeoutExpired):
        procs.run([sys.executable, "-c", script], timeout=5)
    assert pid_file.exists(), "the grandchild never started: raise the timeout"
    assert _wait_dead(int(pid_file.read_text()))


def _flow_cut_while_starting_a_task(monkeypatch, wrapped: bool):
    """A flow whose task run start is cut by a Ctrl-C inside Prefect's engine (as a signal
    that lands during the task run's creation is); returns (what the flow raised, its run's
    state type)."""
    import prefect.task_engine
    from prefect import flow, get_client, task

    @task
    def step() -> int:
        return 1

    def cut(*args, **kwargs):
        raise KeyboardInterrupt

    @flow
    def cut_flow() -> int:
        from prefect.runtime import flow_run
        seen.append(flow_run.id)
        monkeypatch.setattr(prefect.task_engine, "_create_task_run_locally", cut)
        if wrapped:
            with procs.stop_stays_a_stop():
                return step()
        return step()

    seen: list = []
    with pytest.raises(BaseException) as raised:
        cut_flow()
    monkeypatch.undo()
    with get_client(sync_client=True) as client:
        return raised.value, client.read_flow_run(seen[0]).state_type.value


def test_a_ctrl_c_that_cuts_prefects_engine_stays_a_stop(prefect_harness, monkeypatch):
    # Prefect's engine turns it into ValueError("Task run is not set"): a Failed run ...
    raised, state = _flow_cut_while_starting_a_task(monkeypatch, wrapped=False)
    assert isinstance(raised, ValueError) and state == "FAILED", (raised, state)
    # ... which stop_stays_a_stop raises as the KeyboardInterrupt it was: a Crashed run.
    raised, state = _flow_cut_while_starting_a_task(monkeypatch, wrapped=True)
    assert type(raised) is KeyboardInterrupt and state == "CRASHED", (raised, state)


def test_stop_stays_a_stop_lets_ordinary_errors_through():
    with pytest.raises(ValueError, match="bad"), procs.stop_stays_a_stop():
        raise ValueError("bad")
    with pytest.raises(RuntimeError), procs.stop_stays_a_stop():
        try:
            raise ValueError("first")
        except ValueError:
            raise RuntimeError("second") from None  # noqa: B904
    with pytest.raises(SystemExit), procs.stop_stays_a_stop():
        try:
            raise SystemExit(143)
        except SystemExit:
            raise OSError("cleanup failed")  # noqa: B904
    with pytest.raises(RuntimeError), procs.stop_stays_a_stop():
        try:
            raise GeneratorExit
        except GeneratorExit:
            raise RuntimeError("generator ignored GeneratorExit")  # noqa: B904
