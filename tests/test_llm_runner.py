"""The CLI runner: stdin, env/cwd overrides, and a deadline that kills the whole process tree."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import pytest
from waiting import settle

from mythloop.llm.errors import ToolMissing
from mythloop.llm.runner import resolve_executable, run_cli

FAKES = Path(__file__).parent / "fakes"
PR_SET_CHILD_SUBREAPER = 36


@pytest.fixture
def subreaper():
    """Make this process the subreaper of orphans for the test, so killed grandchildren are
    reparented to us and we can reap them: a reaped pid then answers ProcessLookupError."""
    if not sys.platform.startswith("linux"):
        pytest.skip("child subreaper is Linux-only")
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _gone(pid: int, patience: float = 30.0) -> bool:
    """True once `pid` no longer exists (reaping it if it is our zombie)."""
    def gone() -> bool:
        try:
            os.waitpid(pid, os.WNOHANG)  # reap if it was reparented to us
        except ChildProcessError:
            pass
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    return settle(gone, patience, interval=0.05)


def test_stdin_env_and_cwd_reach_the_child(tmp_path):
    script = "import os,sys; print(sys.stdin.read().upper()); print(os.environ['HOME']); print(os.getcwd())"
    res = run_cli([sys.executable, "-c", script], input_text="hello stdin",
                  env={"HOME": str(tmp_path)}, cwd=tmp_path, timeout=30)
    out = res.stdout.splitlines()
    assert res.rc == 0 and not res.timed_out
    assert out == ["HELLO STDIN", str(tmp_path), str(tmp_path)]


def test_big_output_is_drained_without_deadlock():
    # 2 MB on each pipe: far past the 64 KiB pipe buffer, so an undrained pipe would hang.
    script = "import sys; sys.stdout.write('o'*2_000_000); sys.stderr.write('e'*2_000_000)"
    res = run_cli([sys.executable, "-c", script], timeout=60)
    assert res.rc == 0
    assert len(res.stdout) == 2_000_000 and len(res.stderr) == 2_000_000


def test_nonzero_exit_is_reported():
    res = run_cli([sys.executable, "-c", "import sys; sys.stderr.write('boom'); sys.exit(3)"], timeout=30)
    assert res.rc == 3 and res.stderr == "boom" and not res.timed_out


@pytest.mark.parametrize("ignore_term", ["0", "1"])
def test_deadline_kills_child_and_grandchild(tmp_path, subreaper, ignore_term):
    pidfile = tmp_path / "pids"
    env = {"FAKE_MODE": "sleep", "FAKE_PIDFILE": str(pidfile), "FAKE_IGNORE_TERM": ignore_term}
    res = run_cli([str(FAKES / "claude"), "-p"], input_text="hi", env=env, timeout=1.5, grace=0.5)
    assert res.timed_out and res.rc is None
    assert "working..." in res.stdout  # output written before the kill is kept
    child, grandchild = map(int, pidfile.read_text().split())
    assert _gone(child), f"child {child} survived the deadline"
    assert _gone(grandchild), f"grandchild {grandchild} survived the deadline"


def test_leftover_group_members_are_killed_after_a_normal_exit(tmp_path, subreaper):
    # The child exits at once but leaves a detached grandchild (pipes closed) in its group.
    pidfile = tmp_path / "gc"
    script = (
        "import os,sys,time\n"
        "pid=os.fork()\n"
        "if pid==0:\n"
        "    os.close(1); os.close(2); time.sleep(600); os._exit(0)\n"
        f"open({str(pidfile)!r},'w').write(str(pid)); print('bye')\n"
    )
    res = run_cli([sys.executable, "-c", script], timeout=30)
    assert res.rc == 0 and res.stdout.strip() == "bye"
    assert _gone(int(pidfile.read_text()))


def test_missing_executable_names_the_npm_package(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", "/nonexistent-state")
    with pytest.raises(ToolMissing) as err:
        resolve_executable("gemini", "gemini")
    assert "@google/gemini-cli" in str(err.value)
    with pytest.raises(ToolMissing):
        resolve_executable("/no/such/claude", "claude")


def test_project_npm_folder_is_searched(tmp_path, monkeypatch):
    bin_dir = tmp_path / "npm" / "node_modules" / ".bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "claude").symlink_to(FAKES / "claude")
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path))
    assert resolve_executable("claude", "claude") == str(bin_dir / "claude")
