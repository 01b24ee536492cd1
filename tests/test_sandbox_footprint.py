"""One render's footprint bounded as a whole (mythloop/mythos/sandbox/footprint.py, issue 50).

Hostile scenes rendered directly (verify skipped) with the audit hook off, so only the OS
layers stand: memory a per-process limit does not see (memfds), several processes that are
each under it, a stage filled with bytes or with empty files, sockets of families other
than AF_UNIX. Each ends as the limit it hit, and the next benign render is unaffected. The
formula cache's size cap and its answer to a deeply nested message are checked too.
Real sandboxed renders (slow), except the cache's own tests.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from mythloop.mythos.sandbox import footprint, formula_cache
from mythloop.mythos.sandbox.render import RenderLimits, _namespaces_work, render_scene

needs_sandbox = pytest.mark.skipif(
    not _namespaces_work() or not footprint.controllers(),
    reason="needs bubblewrap, root and the cgroup v1 memory and pids controllers")

BENIGN = ("from manim import *\n\nclass Benign(Scene):\n    def construct(self):\n"
          "        self.play(Create(Square()), run_time=0.2)\n")
SMALL = RenderLimits(tree_memory_bytes=600 << 20, stage_bytes=48 << 20, stage_files=400)


def _scene(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text("from manim import *\nimport os\n\nclass A(Scene):\n"
                    "    def construct(self):\n" + "".join(f"        {line}\n"
                                                          for line in body.splitlines())
                    + "        self.add(Square())\n")
    return path


def _no_group_left() -> None:
    for parent in footprint.controllers().values():
        assert not [p for p in parent.iterdir() if p.name.startswith(f"mythloop-stage-{os.getpid()}-")]


def _benign_after(tmp_path: Path) -> None:
    ok = render_scene(_scene(tmp_path, "benign", "pass"), out_dir=tmp_path / "benign",
                      timeout=120)
    assert ok.ok, ok.message + ok.log_tail[-800:]


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("warm", ["1", "0"])
def test_memfds_count_against_the_whole_tree(tmp_path, monkeypatch, warm):
    """Five 200 MB memfds: each process's address space stays small (they are written, not
    mapped), so only the tree's cgroup sees them. Warm and cold renders alike."""
    monkeypatch.setenv("MYTHLOOP_WARM_WORKERS", "" if warm == "1" else "0")
    scene = _scene(tmp_path, "memfd", (
        "fds = []\n"
        "for i in range(5):\n"
        "    fd = os.memfd_create(f'm{i}')\n"
        "    for _ in range(200):\n"
        "        os.write(fd, b'x' * (1 << 20))\n"
        "    fds.append(fd)\n"
        "print('ALL MEMFDS ' + 'WRITTEN')\n"))
    result = render_scene(scene, out_dir=tmp_path / "out", timeout=120, audit_hook=False,
                          limits=SMALL)
    assert not result.ok and result.kind == "resource_limit", result.message
    assert "whole process tree" in result.message
    assert "ALL MEMFDS WRITTEN" not in result.log_tail
    assert result.peak_memory_bytes is not None
    assert result.peak_memory_bytes <= SMALL.tree_memory_bytes
    _no_group_left()
    _benign_after(tmp_path)


@pytest.mark.slow
@needs_sandbox
def test_processes_each_under_the_limit_are_held_together(tmp_path):
    """Three children of 300 MB each (each far under the 4 GiB address-space rlimit): the
    tree's 600 MiB budget ends one of them; the render's peak never passes it."""
    scene = _scene(tmp_path, "forks", (
        "pids = []\n"
        "for i in range(3):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        b = bytearray(300 << 20)\n"
        "        for j in range(0, len(b), 4096):\n"
        "            b[j] = 1\n"
        "        import time; time.sleep(3); os._exit(0)\n"
        "    pids.append(pid)\n"
        "codes = [os.waitpid(p, 0)[1] for p in pids]\n"
        "print('CHILD STATUSES', codes)\n"))
    result = render_scene(scene, out_dir=tmp_path / "out", timeout=120, audit_hook=False,
                          limits=SMALL)
    assert result.peak_memory_bytes is not None
    assert result.peak_memory_bytes <= SMALL.tree_memory_bytes
    line = next(ln for ln in result.log_tail.splitlines() if "CHILD STATUSES" in ln)
    statuses = json.loads(line.split("CHILD STATUSES", 1)[1])
    assert any(os.WIFSIGNALED(s) and os.WTERMSIG(s) == 9 for s in statuses), statuses
    _no_group_left()


@pytest.mark.slow
@needs_sandbox
@pytest.mark.parametrize("attack,body", [
    ("bytes", "with open('media/fill', 'wb') as f:\n"
              "    for _ in range(200):\n"
              "        f.write(b'\\0' * (1 << 20))\n"),
    ("files", "os.makedirs('media/junk', exist_ok=True)\n"
              "for i in range(5000):\n"
              "    open(f'media/junk/{i}', 'w').close()\n"),
])
def test_the_stage_is_capped_in_bytes_and_files(tmp_path, attack, body):
    scene = _scene(tmp_path, attack, body + "print('STAGE ' + 'FILLED')\n")
    result = render_scene(scene, out_dir=tmp_path / "out", timeout=120, audit_hook=False,
                          limits=SMALL)
    assert not result.ok and result.kind == "resource_limit", result.message
    assert "STAGE FILLED" not in result.log_tail
    assert "stage" in result.message
    assert any("stage: a tmpfs of its own" in note for note in result.isolation)
    out = tmp_path / "out"
    assert not (out / "media" / "junk").exists() and not (out / "media" / "fill").exists()
    stages = footprint_stages()
    assert not stages, stages  # unmounted and removed
    _benign_after(tmp_path)


def footprint_stages() -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
            if f"mythloop-stage-{os.getpid()}-" in line.split()[4]]


@pytest.mark.slow
@needs_sandbox
def test_only_unix_sockets_can_be_made(tmp_path):
    scene = _scene(tmp_path, "sockets", (
        "import socket\n"
        "for fam, kind in ((40, 1), (16, 3), (17, 3), (2, 1), (10, 2), (38, 5)):\n"
        "    try:\n"
        "        socket.socket(fam, kind)\n"
        "        print('OPEN' + 'ED', fam)\n"
        "    except OSError as exc:\n"
        "        print('REFUSED', fam, exc.errno)\n"
        "a, b = socket.socketpair(socket.AF_UNIX)\n"
        "a.sendall(b'ping'); print('UNIX', b.recv(4))\n"))
    result = render_scene(scene, out_dir=tmp_path / "out", timeout=120, audit_hook=False)
    assert result.ok, result.message + result.log_tail[-800:]
    assert "OPENED" not in result.log_tail
    assert result.log_tail.count("REFUSED") == 6
    assert "UNIX b'ping'" in result.log_tail


# --- the formula cache: a size cap with least-recently-used eviction -----------------------

def _entry(cache: Path, key: str, size: int, used: float) -> Path:
    path = cache / key[:2] / f"{key}.svg"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"<svg/>".ljust(size, b" "))
    os.utime(path, (used, used))
    return path


def test_the_formula_cache_evicts_the_least_recently_used_past_its_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_FORMULA_CACHE_MB", "1")
    cache = tmp_path / "cache"
    now = time.time()
    old = [_entry(cache, f"{i:02d}" + "a" * 62, 200 << 10, now - 1000 + i) for i in range(4)]
    recent = _entry(cache, "ff" + "b" * 62, 200 << 10, now)
    formula_cache._account(cache, 0)  # 1000 KiB: under the cap, nothing goes
    assert all(p.exists() for p in [*old, recent])
    newest = _entry(cache, "ee" + "c" * 62, 200 << 10, now + 1)
    formula_cache._account(cache, 200 << 10)  # 1200 KiB: past 1 MiB, down to 3/4 of it
    kept = [p for p in [*old, recent, newest] if p.exists()]
    assert recent in kept and newest in kept
    assert old[0] not in kept and old[1] not in kept
    assert sum(p.stat().st_size for p in kept) <= (1 << 20) * 3 // 4


def test_a_deeply_nested_message_is_a_bad_request_not_a_dead_thread(tmp_path):
    service = formula_cache.FormulaService(tmp_path, {"PATH": os.environ.get("PATH", "")},
                                           cache=tmp_path / "cache")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(20)
            conn.connect(str(service.path))
            reader = conn.makefile("rb")
            conn.sendall(b"[" * 100_000 + b"]" * 100_000 + b"\n")
            first = json.loads(reader.readline())
            assert "bad request" in first["error"] and "RecursionError" in first["error"]
            conn.sendall(json.dumps({"tex": "x", "compiler": "xelatex",
                                     "format": ".xdv"}).encode() + b"\n")
            second = json.loads(reader.readline())  # the same connection still answers
            assert "only the default" in second["error"]
    finally:
        service.close()


_HOLD = """
import sys, time
from pathlib import Path
from mythloop.mythos.sandbox import footprint
assert footprint.ensure_shared(Path(sys.argv[1]))
print("bound", flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")
def test_the_shared_staging_base_stays_while_any_process_uses_it(tmp_path):
    """The last process out detaches the staging base's bind; one that exits earlier never
    takes it from another process's warm workers."""
    import subprocess
    import sys

    base = tmp_path / "render-stage"
    base.mkdir()
    other = subprocess.Popen([sys.executable, "-c", _HOLD, str(base)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    assert other.stdout.readline().strip() == "bound"
    assert footprint.is_mount_point(base, shared=True)
    assert footprint.ensure_shared(base)  # this process uses it too
    other.communicate("", timeout=60)  # the first one exits while this one still uses it
    assert footprint.is_mount_point(base, shared=True)
    footprint._release_shared(os.path.realpath(base))  # what this process does at exit
    assert not footprint.is_mount_point(base)
    # a render thread that starts while the exit hooks run finds the base closed: it does not
    # bind it again (a bind made then would outlive the process, with a stage under it)
    assert not footprint.ensure_shared(base)
    assert not footprint.is_mount_point(base)


_DRIVER = """
import sys
from mythloop.mythos.sandbox.render import render_scene
render_scene(sys.argv[1], out_dir=sys.argv[2], timeout=600,
             progress=lambda line: print(line, flush=True))
"""


@pytest.mark.slow
@needs_sandbox
def test_a_killed_callers_stage_filesystem_goes_with_the_next_render(tmp_path, state_dir):
    """A caller killed outright (SIGKILL: no cleanup at all) leaves its stage's tmpfs and its
    groups; the next render in that state dir removes them, since their process is gone."""
    import signal
    import subprocess
    import sys

    scene = _scene(tmp_path, "endless", "import time\nwhile True:\n    time.sleep(0.1)\n")
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, str(scene), str(tmp_path / "o")],
                            stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, MYTHLOOP_STATE_DIR=str(state_dir)))
    try:
        for line in proc.stdout:
            if "no animation started yet" in line or "animation" in line:
                break
        mine = f"mythloop-stage-{proc.pid}-"
        assert any(mine in p for p in _mount_points())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    time.sleep(1)  # its workers see their control pipe close and end themselves
    _benign_after(tmp_path)
    assert not any(mine in p for p in _mount_points())
    for parent in footprint.controllers().values():
        assert not [p for p in parent.iterdir() if p.name.startswith(mine)]
    # its emptied stage folder stays for 6 hours (another PID namespace's process would look
    # dead here too): later tests count the session's stages, so it goes now
    for left in (state_dir / "render-stage").glob(f"{mine}*"):
        assert not list(left.iterdir())
        left.rmdir()


def _mount_points() -> list[str]:
    return [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]


def test_the_formula_service_refuses_tex_that_reads_files_built_at_run_time(tmp_path):
    """verify sees only literals; the service screens the text it is sent (manim's own
    grouping marks excepted) before any latex runs."""
    service = formula_cache.FormulaService(tmp_path, {"PATH": os.environ.get("PATH", "")},
                                           cache=tmp_path / "cache")
    try:
        for body in ("\\input{/etc/hostname}", "\\csname input\\endcsname{/etc/hostname}",
                     "\\special{ps: (x) run}", "\\immediate\\write18{id}"):
            tex = f"\\documentclass{{standalone}}\\begin{{document}}{body}\\end{{document}}"
            reply = service.answer({"tex": tex, "compiler": "latex", "format": ".dvi"})
            assert "refused" in reply.get("log", ""), (body, reply)
    finally:
        service.close()
    assert formula_cache._MANIM_GROUPS.sub("", "\\special{dvisvgm:raw <g id='unique001'>}x"
                                           "\\special{dvisvgm:raw </g>}") == "x"
