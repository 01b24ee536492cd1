"""Warm render workers (mythloop/mythos/sandbox/render_pool.py): a crash, a lost worker or a timeout
fails one render alone, workers are replaced, and Ctrl-C or SIGTERM leaves no worker behind.

Real sandboxed manim renders (slow); each test keeps its scenes tiny.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mythloop import procs
from mythloop.mythos.sandbox import footprint, render_pool
from mythloop.mythos.sandbox.render import _namespaces_work, render_scene

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not _namespaces_work(), reason="warm workers need the sandbox's namespaces (root)")]

TINY = ("from manim import *\n\nclass Tiny(Scene):\n    def construct(self):\n"
        "        self.play(Create(Square()), run_time=0.2)\n")
# tries to kill its worker's PID 1 and its parent (refused: another user, the audit hook),
# then crashes its own process outright
CRASH = ("from manim import *\nimport os, faulthandler\n\nclass Crash(Scene):\n"
         "    def construct(self):\n        for pid in (1, os.getppid()):\n"
         "            try:\n                os.kill(pid, 9)\n"
         "            except Exception as exc:\n                print('kill refused', exc, flush=True)\n"
         "        faulthandler._sigsegv()\n")
ENDLESS = ("from manim import *\n\nclass Endless(Scene):\n    def construct(self):\n"
           "        self.add(Circle())\n        while True:\n            pass\n")


def _write(tmp_path: Path, name: str, code: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(code)
    return path


@pytest.fixture()
def fresh_pool():
    render_pool.shutdown()
    yield
    render_pool.shutdown()


def _pool_pids(token: str) -> list[int]:
    return procs.marked_pids(render_pool.POOL_MARKER, token)


def test_workers_are_reused_and_a_crash_fails_alone(tmp_path, fresh_pool):
    tiny, crash = _write(tmp_path, "tiny", TINY), _write(tmp_path, "crash", CRASH)
    first = render_scene(tiny, out_dir=tmp_path / "a", timeout=120)
    assert first.ok, first.message + first.log_tail[-1500:]
    assert any("warm worker" in note for note in first.isolation)
    pool = render_pool.current_pool()
    assert pool is not None and pool.started == 1
    again = render_scene(tiny, out_dir=tmp_path / "b", timeout=120)
    assert again.ok and pool.started == 1  # the same warm worker rendered it
    results: dict[str, object] = {}
    threads = [threading.Thread(target=lambda k=k, f=f: results.__setitem__(
        k, render_scene(f, out_dir=tmp_path / k, timeout=120))) for k, f in
        (("crash", crash), ("beside", tiny))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    crashed, beside = results["crash"], results["beside"]
    assert beside.ok, beside.message
    assert not crashed.ok and crashed.kind == "scene_error", crashed.message
    assert "139" in crashed.message  # 128 + SIGSEGV: its own process died
    log = Path(crashed.log_path).read_text()
    assert log.count("kill refused") == 2
    after = render_scene(tiny, out_dir=tmp_path / "c", timeout=120)
    assert after.ok
    assert pool.started >= 2  # the crashed render's worker was replaced, not reused


def test_prewarmed_workers_serve_the_first_renders(tmp_path, fresh_pool):
    """A film starts its workers before its first render (their manim import overlaps the
    server's start and the stages): the renders then take those workers, none starts anew."""
    from mythloop.mythos.sandbox.render import prewarm

    assert prewarm(2) == 2
    pool = render_pool.current_pool()
    assert pool is not None and pool.started == 2 and len(pool.workers()) == 2
    assert prewarm(2) == 0  # already there: none more
    tiny = _write(tmp_path, "tiny", TINY)
    results: list = []
    threads = [threading.Thread(target=lambda i=i: results.append(
        render_scene(tiny, out_dir=tmp_path / f"r{i}", timeout=120))) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.ok for r in results] == [True, True], [r.message for r in results]
    assert render_pool.current_pool() is pool and pool.started == 2


# spends at least 1.5 s of its own process's CPU before it draws anything
SPINS = ("from manim import *\nimport time\n\nclass Spins(Scene):\n"
         "    def construct(self):\n        start = time.process_time()\n"
         "        while time.process_time() - start < 1.5:\n            pass\n"
         "        self.play(Create(Square()), run_time=0.2)\n")


def test_a_render_reports_the_cpu_of_its_process_tree(tmp_path, fresh_pool):
    """Each warm render says what CPU its whole tree spent (the film's manifest and
    bench/film.py account for it), and the pool what its workers' manim imports cost."""
    spins = _write(tmp_path, "spins", SPINS)
    result = render_scene(spins, out_dir=tmp_path / "a", timeout=120)
    assert result.ok, result.message + result.log_tail[-1500:]
    assert result.cpu_s is not None and result.cpu_s >= 1.5, result.cpu_s
    tiny = render_scene(_write(tmp_path, "tiny", TINY), out_dir=tmp_path / "b", timeout=120)
    assert tiny.ok and tiny.cpu_s is not None and 0 < tiny.cpu_s
    assert result.cpu_s - tiny.cpu_s >= 1.0  # the spin is counted in its own render only
    pool = render_pool.current_pool()
    assert pool is not None and pool.started == 1 and pool.startup_cpu_s > 0.3  # manim's import
    cold = render_scene(spins, out_dir=tmp_path / "c", timeout=120,
                        env_extra=None, audit_hook=False)  # no warm worker: not measured
    assert cold.ok and cold.cpu_s is None, cold.message


def test_a_scene_that_raises_keeps_its_worker_serving(tmp_path, fresh_pool):
    """A film's usual failure (the scene raises; its repair renders next) costs no new
    worker: the render was a fork of the worker, which ran none of its code. A crash still
    retires its worker (the test above)."""
    raises = _write(tmp_path, "raises", "from manim import *\n\nclass Raises(Scene):\n"
                    "    def construct(self):\n        self.add(Square().move_to(x_range=1))\n")
    tiny = _write(tmp_path, "tiny", TINY)
    assert render_scene(tiny, out_dir=tmp_path / "a", timeout=120).ok
    pool = render_pool.current_pool()
    assert pool is not None
    started, (worker,) = pool.started, pool.workers()
    failed = render_scene(raises, out_dir=tmp_path / "b", timeout=120)
    assert not failed.ok and failed.kind == "scene_error" and failed.returncode == 1, \
        failed.message
    after = render_scene(tiny, out_dir=tmp_path / "c", timeout=120)
    assert after.ok, after.message
    assert pool.started == started and worker in pool.workers()  # the same worker


def test_a_worker_killed_mid_render_fails_only_that_render(tmp_path, fresh_pool):
    endless, tiny = _write(tmp_path, "endless", ENDLESS), _write(tmp_path, "tiny", TINY)
    results: dict[str, object] = {}
    loop = threading.Thread(target=lambda: results.__setitem__(
        "loop", render_scene(endless, out_dir=tmp_path / "loop", timeout=300)))
    loop.start()
    procs.wait_until(lambda: render_pool.current_pool() is not None
                     and len(render_pool.current_pool().busy) == 1, 120, "a busy worker")
    pool = render_pool.current_pool()
    (victim,) = list(pool.busy)
    beside = render_scene(tiny, out_dir=tmp_path / "beside", timeout=120)
    assert beside.ok, beside.message  # another worker renders meanwhile
    started = time.monotonic()
    procs.signal_group(victim.proc.pid, signal.SIGKILL)
    loop.join(60)
    assert not loop.is_alive()
    lost = results["loop"]
    assert not lost.ok and lost.kind == "scene_error" and "RenderWorkerError" in lost.message
    assert time.monotonic() - started < 60  # told at once, not at the 300 s timeout
    assert render_scene(tiny, out_dir=tmp_path / "after", timeout=120).ok
    assert victim.proc.pid not in pool.workers()


def test_a_timeout_kills_the_render_and_replaces_its_worker(tmp_path, fresh_pool):
    endless, tiny = _write(tmp_path, "endless", ENDLESS), _write(tmp_path, "tiny", TINY)
    assert render_scene(tiny, out_dir=tmp_path / "first", timeout=120).ok
    pool = render_pool.current_pool()
    (worker,) = pool.workers()
    result = render_scene(endless, out_dir=tmp_path / "out", timeout=15)
    assert result.kind == "timeout", result.message
    assert worker not in pool.workers()  # the worker that timed out is gone, not idle
    assert not procs.pid_alive(worker)
    assert render_scene(tiny, out_dir=tmp_path / "t", timeout=120).ok


DRIVER = """
import faulthandler, signal, sys, threading, time
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks when it hangs
# Ctrl-C as in a terminal: a process started in the background of a shell script (as CI
# may run the suite) inherits SIGINT ignored, and Python then installs no handler for it
signal.signal(signal.SIGINT, signal.default_int_handler)
from mythloop.mythos.sandbox import footprint, render_pool
from mythloop.mythos.sandbox.render import render_scene

def tell():
    while True:
        pool = render_pool.current_pool()
        if pool is not None and pool.busy:
            print("POOL", pool.token, flush=True)
            return
        time.sleep(0.1)

threading.Thread(target=tell, daemon=True).start()
render_scene(sys.argv[1], out_dir=sys.argv[2], timeout=600)
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_no_worker_is_left_after_ctrl_c_or_sigterm(tmp_path, sig):
    endless = _write(tmp_path, "endless", ENDLESS)
    # a state dir of its own: a driver ended by a signal leaves its staging dir to the next
    # render's stale-stage sweep, which must not be another test's concern
    err = open(tmp_path / "driver.err", "w")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(endless), str(tmp_path / "o")],
                            stdout=subprocess.PIPE, stderr=err, text=True,
                            env=dict(os.environ, MYTHLOOP_STATE_DIR=str(tmp_path / "state")))
    try:
        line = proc.stdout.readline()
        assert line.startswith("POOL "), line
        token = line.split()[1]
        assert _pool_pids(token)  # the worker (and the render it runs) exist
        time.sleep(1.0)
        proc.send_signal(sig)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:  # where it hangs: every thread's stack
            proc.send_signal(signal.SIGUSR1)
            time.sleep(2)
            pytest.fail("the driver did not exit within 120 s of the signal; its threads:\n"
                        + (tmp_path / "driver.err").read_text()[-6000:])
        procs.wait_until(lambda: not _pool_pids(token), 30, "the workers to end")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()
        # a driver ended by SIGTERM (no handler) runs no cleanup: the mounts it made for its
        # renders (footprint.py) are left to the next render in that state dir; none comes
        for line in reversed(Path("/proc/self/mountinfo").read_text().splitlines()):
            if line.split()[4].startswith(str(tmp_path)):
                footprint.unmount(line.split()[4])
