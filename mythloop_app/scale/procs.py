"""Child processes of a scale-out stack: own sessions, log files, and a tag to find them all.

Every process the stack starts carries `MYTHLOOP_SCALE_TAG=<run id>` in its environment.
Prefect's process workers start flow runs in sessions of their own, so killing a worker's
process group is not enough: at the end the stack also looks up every process that still
carries its tag (children inherit the environment) and kills those, by pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["TAG_ENV", "free_port", "port_listening", "http_ok", "wait_until", "start_process",
           "stop_process", "tagged_pids", "kill_tagged", "descendant_pids", "kill_descendants",
           "log_tail"]

TAG_ENV = "MYTHLOOP_SCALE_TAG"


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_listening(host: str, port: int) -> bool:
    """True when something accepts TCP connections on host:port."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def http_ok(url: str, timeout: float = 3.0) -> bool:
    """True when GET url answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def wait_until(check: Callable[[], bool], timeout: float, what: str,
               alive: subprocess.Popen | None = None, interval: float = 0.5) -> None:
    """Poll `check` until it holds; TimeoutError naming `what` (or early if `alive` exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with code {alive.returncode}")
        time.sleep(interval)
    raise TimeoutError(f"{what}: not ready after {timeout:.0f} s")


def _die_with_parent() -> None:
    """In the child: SIGTERM when the driver dies, so a killed driver leaves no orphans."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_process(argv: Sequence[str], *, env: dict[str, str], log_path: Path,
                  cwd: Path | None = None, user: str | None = None) -> subprocess.Popen:
    """Start argv in its own session, output to log_path; `user` runs it as that account."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            list(argv), env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True, user=user,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None)


def stop_process(proc: subprocess.Popen, *, first: int = signal.SIGTERM,
                 grace: float = 20.0) -> None:
    """Signal the process group, wait up to `grace`, then SIGKILL whatever is left of it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, first)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    # The leader may be gone while others of its group live on.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def tagged_pids(tag: str) -> list[int]:
    """Pids of live processes whose environment carries MYTHLOOP_SCALE_TAG=tag."""
    needle = f"{TAG_ENV}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


def kill_tagged(tag: str, grace: float = 10.0) -> list[int]:
    """SIGTERM, then SIGKILL, every process still carrying the tag; returns those found."""
    pids = tagged_pids(tag)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and tagged_pids(tag):
            time.sleep(0.2)
        if not tagged_pids(tag):
            break
    return pids


def _ppid_and_pgid(pid: int) -> tuple[int, int] | None:
    """(parent pid, process group) of a live, non-zombie process; None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] == "Z":
        return None
    return int(fields[1]), int(fields[2])


def descendant_pids(root: int) -> dict[int, int]:
    """Every live descendant of `root` (children, grandchildren, ...), as {pid: process group}."""
    parents: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            info = _ppid_and_pgid(int(entry.name))
            if info is not None:
                parents[int(entry.name)] = info
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, pgid) in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = pgid
                frontier.append(pid)
    return found


def kill_descendants(root: int | None = None, *, spare: Sequence[int] = (),
                     grace: float = 2.0) -> list[int]:
    """SIGTERM, then SIGKILL, every descendant of `root` (default: this process) and the
    process groups of their own; processes in a spared group (and their subtrees) are left.

    A child started in a session of its own (a sandboxed render, a model CLI) is reached
    through its group, so its grandchildren go too. Returns the pids found.
    """
    root = os.getpid() if root is None else root
    own_group = os.getpgid(0)

    def targets() -> dict[int, int]:
        found = descendant_pids(root)
        spared = {pid for pid, pgid in found.items() if pgid in spare}
        frontier = list(spared)
        while frontier:  # a spared process's own children are spared too
            parent = frontier.pop()
            for pid in descendant_pids(parent):
                if pid not in spared:
                    spared.add(pid)
                    frontier.append(pid)
        return {pid: pgid for pid, pgid in found.items() if pid not in spared}

    first = targets()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        current = targets()
        if not current:
            break
        for pid, pgid in current.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if pgid not in (own_group, *spare):
                    os.killpg(pgid, sig)
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and targets():
            time.sleep(0.05)
    if root == os.getpid():  # reap this process's own children, so no zombie outlives it
        for pid in first:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
    return sorted(first)


def log_tail(path: Path, lines: int = 30) -> str:
    """The end of a log file, for error messages."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
