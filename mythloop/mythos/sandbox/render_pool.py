"""Warm render workers: sandboxed processes that import manim once and render scene after scene.

A worker is the usual sandbox (the bubblewrap view and namespaces, `sandbox_init.py` as
bwrap's first child) started in serve mode: it imports manim once, as root, before any scene
code exists, then forks one child per render. Each child gets mount, IPC and PID namespaces
of its own (the render is PID 2 under a root init, so everything it starts dies with it),
fresh tmpfs over /tmp and /dev/shm, only its own staging dir, the render's rlimits, `nobody`,
no_new_privs, the seccomp filter and the audit hook, exactly as a cold render; afterwards the
worker checks that no process of the render is left, and serves again only then. What a
render can no longer change is the state the next one starts from: that lives in the worker,
which never runs scene code and which `nobody` cannot signal or trace (nor see: the render's
/proc is its own). docs/sandbox.md has the whole argument.

The parent side here keeps a small pool: a render takes an idle worker (or starts one, up to
`size`), sends one request line and reads one reply line; a worker is replaced after any
failed render, a timeout, a reply that does not come, or `MAX_RENDERS` renders. Workers run
in sessions of their own; `shutdown()` (at exit, and on Ctrl-C through the caller) kills
their groups, and a worker whose parent is gone sees its control pipe close and ends itself
with everything it runs.

    MYTHLOOP_WARM_WORKERS=0   turns warm workers off (every render is a cold sandbox)
    MYTHLOOP_WARM_WORKERS=N   at most N warm workers (default: the number of cores)
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from mythloop import procs

__all__ = ["WarmPool", "get_pool", "shutdown", "warm_enabled", "MAX_RENDERS", "POOL_MARKER"]

MAX_RENDERS = 25  # a worker is replaced after this many renders even when all went well
START_TIMEOUT = 180.0  # seconds for a worker to import manim and say it is ready
REUSE_STATUSES = (0, 1)  # a render that ended so (in time, clean) keeps its worker serving
REPLY_GRACE = 20.0  # beyond the render's own timeout (the worker kills the render itself)
POOL_MARKER = "MYTHLOOP_RENDER_POOL"  # in every worker process's environment
_HERE = Path(__file__).resolve().parent


def _seconds(value: object) -> float | None:
    """A CPU figure from a worker's reply (a number, else None)."""
    return float(value) if isinstance(value, int | float) and value >= 0 else None


def warm_enabled() -> bool:
    return os.environ.get("MYTHLOOP_WARM_WORKERS", "").strip() != "0"


def _size() -> int:
    try:
        return max(1, int(os.environ.get("MYTHLOOP_WARM_WORKERS", "") or 0)) \
            if os.environ.get("MYTHLOOP_WARM_WORKERS", "").strip() else (os.cpu_count() or 2)
    except ValueError:
        return os.cpu_count() or 2


class WorkerLost(RuntimeError):
    """The worker died or stopped answering (the render fails; the worker is discarded)."""


class _Worker:
    """One warm worker process (its session leader is `bwrap`)."""

    def __init__(self, launcher: list[str], env: dict[str, str], log: Path) -> None:
        with open(log, "ab") as err:
            self.proc = procs.start_session(launcher, env=env, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=err, close_fds=True)
        self.renders = 0
        self.log = log
        self.pending = b""
        self.ready = False
        self.clean = False
        self.startup_cpu_s: float | None = None  # its manim import, as it reported

    def read_line(self, deadline: float, poll: Callable[[], None] | None = None) -> dict:
        """The worker's next reply; WorkerLost at EOF or DEADLINE."""
        assert self.proc.stdout is not None  # (a pipe)
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerLost("the render worker did not answer in time")
            ready, _, _ = select.select([fd], [], [], min(left, 0.5))
            if poll:
                poll()
            if procs.STOPPING.is_set() and not ready:  # Ctrl-C / SIGTERM: stop waiting now
                raise WorkerLost("the process is stopping (Ctrl-C or SIGTERM)")
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise WorkerLost(f"the render worker exited (code {self.proc.poll()})")
                self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return json.loads(line)

    def wait_ready(self) -> None:
        if not self.ready:
            reply = self.read_line(time.monotonic() + START_TIMEOUT)
            if not reply.get("ready"):
                raise WorkerLost(f"the render worker did not start: {reply}")
            self.ready = True
            self.startup_cpu_s = _seconds(reply.get("cpu_s"))

    def render(self, request: dict, timeout: float,
               poll: Callable[[], None] | None) -> tuple[int | None, bool, float | None]:
        self.wait_ready()
        self.renders += 1
        assert self.proc.stdin is not None  # (a pipe)
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise WorkerLost(f"the render worker is gone ({exc})") from None
        reply = self.read_line(time.monotonic() + timeout + REPLY_GRACE, poll)
        if reply.get("job") != request["job"]:
            raise WorkerLost(f"the render worker answered out of turn: {reply}")
        # a worker serves again only when no process of this render was left
        self.clean = bool(reply.get("clean"))
        return int(reply["status"]), bool(reply["timed_out"]), _seconds(reply.get("cpu_s"))

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Close its pipe (it ends itself) and kill its group (everything in it) regardless."""
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
        procs.signal_group(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


class WarmPool:
    """At most `size` warm workers for one staging base, python and set of needed paths."""

    def __init__(self, *, base: Path, spec: dict, env: dict[str, str], size: int,
                 log_dir: Path) -> None:
        self.base, self.size, self.log_dir = base, size, log_dir
        self.token = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.env = {**env, POOL_MARKER: self.token}
        spec = {**spec, "serve": True,
                "worker_source": (_HERE / "sandbox_worker.py").read_text(encoding="utf-8")}
        # the same bubblewrap view as a cold render, with the staging base (mode 700, root
        # only) where each render's own stage is bound from
        from mythloop.mythos.sandbox import footprint, render  # noqa: PLC0415 (cycle)

        # and the `mythloop` cgroups, where each render's child joins the groups its parent
        # made for it (footprint.py); a render's own mount namespace hides them again
        groups = [(str(path), f"{footprint.CGROUP_INNER}/{name}")
                  for name, path in footprint.controllers().items()]
        self.launcher = render.sandbox_launcher(spec, sys.executable,
                                                [(str(base), render.POOL_BASE), *groups])
        self.idle: list[_Worker] = []
        self.busy: set[_Worker] = set()
        self.cond = threading.Condition()
        self.closed = False
        self.started = 0  # workers started over the pool's life (tests, bench)
        self.startup_cpu_s = 0.0  # their manim imports, summed (as each became ready)

    def _start(self) -> _Worker:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.started += 1
        return _Worker(self.launcher, self.env, self.log_dir / "render-workers.log")

    def prestart(self, count: int) -> None:
        """Start up to COUNT idle workers now, so their manim import overlaps other work."""
        with self.cond:
            while not self.closed and len(self.idle) + len(self.busy) < min(count, self.size):
                self.idle.append(self._start())

    def _acquire(self) -> _Worker:
        with self.cond:
            while True:
                if self.closed:
                    raise WorkerLost("the render pool was shut down")
                if procs.STOPPING.is_set():  # no render starts once the process is stopping
                    raise WorkerLost("the process is stopping (Ctrl-C or SIGTERM)")
                while self.idle:
                    worker = self.idle.pop()
                    if worker.alive():
                        self.busy.add(worker)
                        return worker
                    worker.stop()
                if len(self.busy) < self.size:
                    worker = self._start()
                    self.busy.add(worker)
                    return worker
                self.cond.wait(1.0)

    def _release(self, worker: _Worker, keep: bool, replace: bool = True) -> None:
        """Back to the idle list, or stopped; a stopped worker's replacement starts at once
        (its manim import overlaps whatever comes next, a repair for instance)."""
        with self.cond:
            self.busy.discard(worker)
            if keep and not self.closed and worker.alive() and worker.renders < MAX_RENDERS:
                self.idle.append(worker)
            else:
                worker.stop()
                if replace and not self.closed and not procs.STOPPING.is_set() and \
                        len(self.idle) + len(self.busy) < self.size:
                    self.idle.append(self._start())
            self.cond.notify()

    def render(self, request: dict, timeout: float,
               poll: Callable[[], None] | None = None) -> tuple[int | None, bool, float | None]:
        """Run one render request; (exit status, timed out, CPU seconds of the render's
        process tree as its worker measured them). WorkerLost when the worker died or never
        answered (it is discarded; the caller reports the render as failed)."""
        worker = self._acquire()
        keep, replace = False, False
        try:
            ready = worker.ready
            try:
                status, timed_out, cpu_s = worker.render(request, timeout, poll)
            finally:
                if not ready and worker.startup_cpu_s is not None:
                    with self.cond:
                        self.startup_cpu_s += worker.startup_cpu_s
            # a scene that raised (exit 1) leaves its worker as it found it: the render was
            # a fork that died, the worker never ran its code (docs/sandbox.md); a crash, a
            # timeout or a render that left a process behind retires the worker
            keep = status in REUSE_STATUSES and not timed_out and worker.clean
            replace = True
            return status, timed_out, cpu_s
        except Exception:
            replace = True
            raise
        finally:  # any failure, a timeout, Ctrl-C: this worker is not reused
            self._release(worker, keep, replace)

    def workers(self) -> list[int]:
        with self.cond:
            return [w.proc.pid for w in [*self.idle, *self.busy]]

    def shutdown(self) -> None:
        with self.cond:
            self.closed = True
            workers, self.idle = [*self.idle, *self.busy], []
            self.busy = set()
            self.cond.notify_all()
        for worker in workers:
            worker.stop()
        procs.kill_marked(POOL_MARKER, self.token, signals=(signal.SIGKILL,), grace=0.2)


_POOL: WarmPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool(*, base: Path, spec: dict, env: dict[str, str], log_dir: Path) -> WarmPool:
    """The process's pool for this staging base and sandbox spec (a new one when they
    changed: another state dir, other paths)."""
    global _POOL
    with _POOL_LOCK:
        key = json.dumps([str(base), spec, sorted(env.items())], sort_keys=True)
        if _POOL is not None and (_POOL.closed or getattr(_POOL, "key", None) != key):
            _POOL.shutdown()
            _POOL = None
        if _POOL is None:
            _POOL = WarmPool(base=base, spec=spec, env=env, size=_size(), log_dir=log_dir)
            _POOL.key = key  # type: ignore[attr-defined]
        return _POOL


def current_pool() -> WarmPool | None:
    return _POOL


def shutdown() -> None:
    """Stop every warm worker of this process (also run at exit)."""
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None:
        pool.shutdown()


atexit.register(shutdown)
