"""Child processes, ports and health checks: the one place the domain code handles them.

Prefect never kills a task's child processes, so every child that could outlive its caller
starts in a session (and process group) of its own and is stopped through that group. A
process that left the group (its own `setsid`: a Prefect process worker's flow run, a
daemonising helper) is reached through the process tree (`kill_tree`) or through an
environment marker its ancestors handed down (`kill_marked`).

Domain level: the standard library and psutil only (never Prefect, typer, flows or tasks).

Ports and health
    free_port(host)              a port nobody listens on right now
    port_in_use(host, port)      True when binding host:port fails (someone holds it)
    port_listening(host, port)   True when host:port accepts TCP connections
    http_ok(url, timeout)        True when GET url answers 200
    wait_http_ok(url, timeout=, proc=)  poll http_ok until it holds; False at the deadline or
                                 as soon as the watched process `proc` exits
    wait_until(check, timeout, what, alive=)  poll any check; TimeoutError / RuntimeError

Starting
    die_with_parent()            preexec_fn: the child gets SIGTERM when its parent dies (Linux)
    start_session(argv, die_with_parent=, **popen_kwargs)  Popen in a new session
    start_process(argv, env=, log_path=, cwd=, user=)      the same, output to a log file,
                                 dying with its parent (a server, a worker, a database)
    run(argv, timeout=, input=, cwd=, env=, limits=)  a bounded tool run (ffmpeg, espeak-ng,
                                 a manim probe) in a session of its own, output captured as
                                 text; on timeout its whole group is killed, then
                                 TimeoutExpired; `limits`: hard rlimits for the child

Looking
    pid_alive(pid)               the process exists and is not a zombie
    tree_pids(root)              live descendants of root (psutil children(recursive=True))
    descendant_pids(root)        live descendants as {pid: process group}
    marked_pids(name, value)     live processes whose environment holds name=value

Stopping
    signal_group(pgid, sig)      killpg; False when the group is gone (or not ours)
    stop_group(proc, first=, grace=, kill_wait=, tree=)  signal the group, wait `grace`,
                                 SIGKILL what is left of it (`tree`: and of its process tree,
                                 including members that left the group); `stop_process` is the
                                 same function
    kill_tree(root, grace=, include_root=)  SIGTERM, grace, SIGKILL every process of root's tree
    kill_descendants(root, spare=, grace=)  every descendant of root and their groups, sparing
                                 the given groups (a Ctrl-C's clean-up of a whole CLI)
    kill_marked(name, value, signals=, grace=)  every process carrying the marker

Logs
    log_tail(path, lines)        the end of a log file, for error messages

Stopping on request
    STOPPING                     a threading.Event the CLI sets when Ctrl-C or SIGTERM asks
                                 the process to stop: a child that ends now was stopped, not
                                 broken (a render then reports `interrupted`, not a scene error)
    stop_stays_a_stop()          a context manager: an error raised while handling a Ctrl-C
                                 or SIGTERM is raised as that stop again
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

import psutil

__all__ = ["free_port", "port_in_use", "port_listening", "http_ok", "wait_http_ok",
           "wait_until", "die_with_parent", "start_session", "start_process", "pid_alive",
           "tree_pids", "descendant_pids", "marked_pids", "signal_group", "stop_group",
           "stop_process", "kill_tree", "kill_descendants", "kill_marked", "log_tail", "run",
           "STOPPING", "stop_stays_a_stop", "at_exit", "hard_exit"]

STOPPING = threading.Event()
_EXIT_HOOKS: list[Callable[[], None]] = []


def at_exit(hook: Callable[[], None]) -> None:
    """HOOK runs when the interpreter exits (atexit) and also before `hard_exit`, which skips
    the interpreter's teardown: undo what must not outlive the process (a mount). HOOK must
    be cheap and safe to run twice."""
    _EXIT_HOOKS.append(hook)
    atexit.register(hook)


def hard_exit(code: int) -> None:
    """os._exit(CODE) after the `at_exit` hooks (most recent first); a hook that fails is
    skipped, never the exit."""
    for hook in reversed(_EXIT_HOOKS):
        with contextlib.suppress(Exception):
            hook()
    os._exit(code)


@contextlib.contextmanager
def stop_stays_a_stop() -> Iterator[None]:
    """Re-raise the stop behind an ordinary error that came out of handling it.

    A Ctrl-C that lands while Prefect's engine creates a task run reaches the engine's crash
    handler before the run exists, and that handler raises `ValueError("Task run is not set")`
    with the KeyboardInterrupt as its context. A flow body that lets it through is recorded
    Failed for a bad value; wrapped in this, it raises the KeyboardInterrupt (or the SIGTERM's
    exception) again, and Prefect records the flow run Crashed, as for any other stop."""
    try:
        yield
    except Exception as exc:
        stop = _stop_behind(exc)
        if stop is None:
            raise
        raise stop from None  # (not `from exc`: exc's context is the stop, a cycle)


def _stop_behind(exc: BaseException) -> BaseException | None:
    """The first exception that is not an Exception (KeyboardInterrupt, SystemExit, Prefect's
    TerminationSignal) in exc's chain of causes and contexts, else None. A GeneratorExit is
    a generator being closed, not a stop."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        if not isinstance(link, (Exception, GeneratorExit)):
            return link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return None


# --- ports and health -------------------------------------------------------------------------

def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the kernel's pick for a bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_in_use(host: str, port: int) -> bool:
    """True when host:port cannot be bound (SO_REUSEADDR set, so TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


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


def wait_http_ok(url: str, *, timeout: float, proc: subprocess.Popen | None = None,
                 interval: float = 0.5, probe_timeout: float = 2.0) -> bool:
    """Poll GET url until it answers 200 (True); False at the deadline, or at once when the
    watched process `proc` has exited (a server that died while starting)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        if http_ok(url, timeout=probe_timeout):
            return True
        time.sleep(interval)
    return False


def wait_until(check: Callable[[], bool], timeout: float, what: str,
               alive: subprocess.Popen | None = None, interval: float = 0.5) -> None:
    """Poll `check` until it holds; TimeoutError naming `what` at the deadline, RuntimeError
    as soon as the watched process `alive` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with code {alive.returncode}")
        time.sleep(interval)
    raise TimeoutError(f"{what}: not ready after {timeout:.0f} s")


# --- starting ---------------------------------------------------------------------------------

def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM when its parent dies, so a killed parent leaves no
    orphan (Linux PR_SET_PDEATHSIG; it fires when the starting *thread* ends, so start
    long-lived children from a thread that lives as long as they should)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


_DIE_WITH_PARENT = die_with_parent  # start_session's parameter of the same name hides it


def start_session(argv: Sequence[str], *, die_with_parent: bool = False,
                  **popen_kwargs) -> subprocess.Popen:
    """subprocess.Popen(argv, ...) in a new session, so it leads a process group of its own
    (its pid is the group id); `die_with_parent`: SIGTERM when this process dies (Linux)."""
    if die_with_parent and sys.platform == "linux":
        popen_kwargs["preexec_fn"] = _DIE_WITH_PARENT
    return subprocess.Popen(list(argv), start_new_session=True, **popen_kwargs)


def start_process(argv: Sequence[str], *, env: dict[str, str], log_path: Path,
                  cwd: Path | None = None, user: str | None = None) -> subprocess.Popen:
    """Start argv in its own session, dying with its parent, stdout and stderr appended to
    log_path; `user` runs it as that account."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        return start_session(argv, die_with_parent=True, env=env, cwd=cwd,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             user=user)


def _limited(limits: Mapping[int, int]) -> Callable[[], None]:
    """preexec_fn: die with the parent, then hard rlimits (resource.RLIMIT_* -> value)."""
    def preexec() -> None:
        die_with_parent()
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
    return preexec


def run(argv: Sequence[str], *, timeout: float, input: str | None = None,
        cwd: Path | str | None = None, env: dict[str, str] | None = None,
        limits: Mapping[int, int] | None = None) -> subprocess.CompletedProcess:
    """subprocess.run(argv, capture_output=True, text=True, timeout=...) with the child in a
    session of its own, dying with this process: at the timeout its whole process group is
    killed (subprocess.run kills only the direct child, so a grandchild such as LaTeX under
    manim would live on), then subprocess.TimeoutExpired is raised as subprocess.run does.
    `limits` ({resource.RLIMIT_AS: bytes, ...}) are set as hard limits in the child before
    it execs (what reads files a render handed back: ffmpeg, ffprobe)."""
    extra: dict = {"preexec_fn": _limited(dict(limits)), "errors": "replace"} if limits \
        else {"die_with_parent": True}
    proc = start_session(argv, cwd=cwd, env=env, text=True, **extra,
                         stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return _finish(argv, proc, input, timeout)


def _finish(argv: Sequence[str], proc: subprocess.Popen, input: str | None,
            timeout: float) -> subprocess.CompletedProcess:
    try:
        out, err = proc.communicate(input=input, timeout=timeout)
    except BaseException:  # the timeout, or Ctrl-C while it ran: nothing of it stays behind
        signal_group(proc.pid, signal.SIGKILL)  # the leader is not reaped yet: the id is its
        proc.communicate()
        raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


# --- looking ----------------------------------------------------------------------------------

def pid_alive(pid: int) -> bool:
    """True when process `pid` exists and is not a zombie (another user's counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:
        return True


def tree_pids(root: int) -> list[int]:
    """Live (non-zombie) descendants of `root`, children first, found by parent links: a
    descendant that left root's process group is found too, as long as its parent lives."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for child in children:
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE:
                found.append(child.pid)
    return found


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


def marked_pids(name: str, value: str) -> list[int]:
    """Pids of live (non-zombie) processes, other than this one, whose environment holds the
    entry name=value (children inherit it, whatever session they move to)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return sorted(found)


# --- stopping ---------------------------------------------------------------------------------

def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to process group `pgid`; False when the group is gone (or not ours)."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def _signal_pids(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _wait_gone(pids: Sequence[int], timeout: float) -> list[int]:
    """Wait up to `timeout` for the processes to end (a zombie counts as ended; reaping is
    left to whoever started it); the pids still alive after it."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid in pids if pid_alive(pid)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def stop_group(proc: subprocess.Popen, *, first: int = signal.SIGTERM, grace: float = 20.0,
               kill_wait: float | None = 5.0, tree: bool = False) -> None:
    """Stop `proc` (started in a session of its own) and its process group: `first` to the
    group, up to `grace` seconds for the leader to end, then SIGKILL to whatever is left of
    the group, and up to `kill_wait` seconds (None: no limit) for the leader to be reaped.

    `tree`: also SIGKILL, at the end, every process of the leader's tree as it stood before
    the first signal that left the group on the way (its own setsid).
    """
    snapshot = tree_pids(proc.pid) if tree else []
    if proc.poll() is None:
        signal_group(proc.pid, first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    # The leader may be gone while others of its group live on.
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=kill_wait)
    if snapshot:
        left = [pid for pid in snapshot if pid_alive(pid)]
        _signal_pids(left, signal.SIGKILL)
        _wait_gone(left, 5.0)


stop_process = stop_group  # the name the scale stack and the bench use


def kill_tree(root: int, *, grace: float = 2.0, include_root: bool = True) -> list[int]:
    """SIGTERM every process of root's tree (root itself too with `include_root`), wait up to
    `grace` seconds, SIGKILL the survivors. The tree is taken before the first signal, so a
    descendant that left root's group, or whose parent dies first, is not missed. Returns the
    pids found. Nothing is reaped: a Popen root is still waited for through its Popen."""
    pids = tree_pids(root)
    if include_root and pid_alive(root):
        pids.insert(0, root)
    if not pids:
        return []
    _signal_pids(pids, signal.SIGTERM)
    left = _wait_gone(pids, grace)
    if left:
        _signal_pids(left, signal.SIGKILL)
        _wait_gone(left, 5.0)
    return sorted(pids)


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


def kill_marked(name: str, value: str, *,
                signals: Sequence[int] = (signal.SIGTERM, signal.SIGKILL),
                grace: float = 10.0, interval: float = 0.2) -> list[int]:
    """Send each of `signals` in turn to every process still carrying name=value in its
    environment, waiting up to `grace` seconds after each for them to be gone; stops early
    once none is left. Returns every pid found."""
    found: set[int] = set()
    for sig in signals:
        pids = marked_pids(name, value)
        if not pids:
            break
        found.update(pids)
        _signal_pids(pids, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and marked_pids(name, value):
            time.sleep(interval)
    return sorted(found)


# --- logs -------------------------------------------------------------------------------------

def log_tail(path: Path, lines: int = 30) -> str:
    """The end of a log file, for error messages."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])
