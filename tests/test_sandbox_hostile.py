"""Attacks on the render sandbox itself, with `verify` skipped (docs/sandbox.md, attack table).

Each scene does its attack in construct() and then shows one mobject (or plays one short
animation), through warm workers as a film runs them. Every test checks the outcome: no
canary byte in DIR, the log or the result; no process of the render left; the next benign
render in the same warm pool fine; the parent's memory bounded. Real renders (slow).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from mythloop import procs
from mythloop.mythos.sandbox import formula_cache, render_pool, stage_tree
from mythloop.mythos.sandbox.render import _namespaces_work, render_scene
from mythloop.mythos.sandbox.verify import verify_scene

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not _namespaces_work(), reason="the sandbox needs bubblewrap and root")]

REPO = Path(__file__).resolve().parents[1]
TOKEN = f"canary-{uuid.uuid4().hex}"  # the scenes only ever hold it reversed
PLACE = f"mythloop-canary-{uuid.uuid4().hex[:12]}"  # names of the places that hold it
BENIGN = ("from manim import *\n\nclass Benign(Scene):\n    def construct(self):\n"
          "        self.play(Create(Square()), run_time=0.2)\n")
# turns the audit hook off from inside (what a scene past verify could do): the hook is
# defence in depth, so the attacks below run with it off and the OS layers alone hold
HOOK_OFF = ("import gc\nfor _o in gc.get_objects():\n"
            "    if type(_o).__name__ == '_Guard':\n        _o.busy = True\n")


def _tree_bytes(root: Path) -> bytes:
    out = b""
    for path, st in stage_tree.walk_files(root, max_depth=64):
        if path.is_file() and not path.is_symlink() and st.st_size < (8 << 20):
            out += path.read_bytes()
    return out


def _no_canary(result, out: Path, *extra: str) -> None:
    assert TOKEN not in result.log_tail and TOKEN not in result.message
    assert TOKEN.encode() not in _tree_bytes(out)
    for text in extra:
        assert TOKEN not in text


def _marked(mark: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(mark in part for part in proc.info["cmdline"] or ()):
                found.append(proc.pid)
        except (psutil.Error, TypeError):
            continue
    return found


def _write(folder: Path, name: str, code: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(code)
    return path


@pytest.fixture(scope="module")
def canaries(state_dir):
    """The token, world-readable, in places outside the allowlist: the checkout, a folder
    under /root (also a caller's folder below), the state dir, a neighbour of the stages."""
    places = [REPO / f".{PLACE}.txt", Path(f"/root/{PLACE}-home") / "canary.txt",
              state_dir / f"{PLACE}.txt", state_dir / "render-stage-neighbour" / "canary.txt"]
    for path in places:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(TOKEN)
        path.chmod(0o644)
    yield places
    for path in places:
        path.unlink(missing_ok=True)
    shutil.rmtree(f"/root/{PLACE}-home", ignore_errors=True)
    shutil.rmtree(state_dir / "render-stage-neighbour", ignore_errors=True)


def _reader(places: list[Path]) -> str:
    paths = [str(p) for p in places] + [str(REPO / "README.md"), str(REPO / ".git" / "HEAD"),
                                        "/work/main/README.md", "/etc/shadow", "/etc/hostname"]
    return f'''from manim import *
import os, json
TOKEN = {TOKEN[::-1]!r}[::-1]
PATHS = {paths!r}

def search():
    hits, stack = [], [("/", 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            names = os.listdir(folder)
        except Exception:
            continue
        for name in names:
            full = os.path.join(folder, name)
            if full in ("/proc", "/sys", "/usr", "/dev") or "/lib/python" in full:
                continue
            if os.path.isdir(full) and not os.path.islink(full):
                if depth < 8:
                    stack.append((full, depth + 1))
                continue
            try:
                if os.path.getsize(full) < 4096:
                    with open(full, errors="replace") as fh:
                        if TOKEN in fh.read():
                            hits.append(full)
            except Exception:
                pass
    return hits

class Reader(Scene):
    def construct(self):
        seen = {{}}
        for path in PATHS:
            for prefix in ("", "/proc/1/root", "/proc/self/root", "/proc/1/cwd/../../.."):
                try:
                    with open(prefix + path, errors="replace") as fh:
                        seen[prefix + path] = fh.read()[:200]
                except Exception as exc:
                    seen[prefix + path] = type(exc).__name__
        hits = search()
        print("LOOT", json.dumps(seen), json.dumps(hits), sorted(os.listdir("/")), flush=True)
        with open("media/loot.txt", "w") as fh:
            fh.write(json.dumps([seen, hits]))
        self.add(Square())
'''


def test_canary_outside_the_allowlist_is_unreadable_from_any_caller_folder(
        tmp_path, canaries, state_dir):
    scene = _write(tmp_path / "scene", "reader", _reader(canaries))
    env = {**os.environ, "MYTHLOOP_STATE_DIR": str(state_dir)}
    home = Path(f"/root/{PLACE}-home")
    # in-process (pytest's cwd is the checkout; sys.path holds it)
    result = render_scene(scene, out_dir=tmp_path / "in-process", timeout=120)
    assert result.ok, result.message + result.log_tail[-1500:]
    assert "LOOT" in result.log_tail  # the attack ran
    _no_canary(result, tmp_path / "in-process")
    _refused_everything(result.log_tail)
    # the CLI as `python -m mythloop_app` from a folder under /root (sys.path[0] = that
    # folder, which holds a canary), and the console script from a temp folder
    runs = [([sys.executable, "-m", "mythloop_app"], home),
            ([str(Path(sys.executable).parent / "mythloop")], tmp_path)]
    for i, (cmd, cwd) in enumerate(runs):
        out = tmp_path / f"cli-{i}"
        proc = subprocess.run([*cmd, "render", str(scene), "--out", str(out), "--quiet"],
                              cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        log = (out / "render.log").read_text()
        assert "LOOT" in log
        assert TOKEN not in log and TOKEN not in proc.stdout + proc.stderr
        assert TOKEN.encode() not in _tree_bytes(out)
        _refused_everything(log)


def _refused_everything(log: str) -> None:
    """Every read outside the allowlist failed (not in the view), and the search found
    nothing: the reads were tried, not skipped by a crash."""
    text = log.split("LOOT ", 1)[1]
    seen, end = json.JSONDecoder().raw_decode(text)
    hits, _ = json.JSONDecoder().raw_decode(text[end:].lstrip())
    assert hits == []
    for path, got in seen.items():
        if "/etc/hostname" in path:
            continue
        assert got in ("FileNotFoundError", "PermissionError", "NotADirectoryError"), path


SURVIVOR = """from manim import *
import os, sys, time, _posixsubprocess
{hook_off}
MARK = {mark!r}
# a double fork, setsid and a chain {depth} processes deep; once its own render is over,
# its last link tries for two minutes to kill every process it sees and to put a file into any render's
# stage through /proc/<pid>/cwd (what took over later renders of a warm worker)
DAEMON = r'''
import os, sys, time
mark, depth = sys.argv[1], int(sys.argv[2])
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
for _ in range(depth):
    if os.fork():
        while True:
            time.sleep(60)
mine = os.getpid()
while os.path.exists("/proc/" + sys.argv[3]):  # its own render first ends
    time.sleep(0.05)
end = time.time() + 120
while time.time() < end:
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == mine:
            continue
        try:
            if mark.encode() in open("/proc/%s/cmdline" % pid, "rb").read():
                continue
            os.kill(int(pid), 9)
        except Exception:
            pass
        try:
            with open("/proc/%s/cwd/media/hijack.txt" % pid, "w") as fh:
                fh.write(mark)
        except Exception:
            pass
    time.sleep(0.05)
'''

class Survivor(Scene):
    def construct(self):
        exe = sys.executable
        r, w = os.pipe()
        _posixsubprocess.fork_exec([exe, "-c", DAEMON, MARK, "{depth}", str(os.getpid())], [os.fsencode(exe)],
                                   True, (w,), None, [b"X=1"], -1, -1, -1, -1, -1, -1, r, w,
                                   False, True, -1, None, None, None, -1, None, False)
        time.sleep(3)
        alive = 0
        for pid in os.listdir("/proc"):
            try:
                if pid.isdigit() and MARK.encode() in open("/proc/%s/cmdline" % pid, "rb").read():
                    alive += 1
            except Exception:
                pass
        print("CHAIN", alive, flush=True)
        self.play(Create(Circle()), run_time=0.2)
"""


def test_a_survivor_chain_dies_with_its_render_and_cannot_take_over_the_next(tmp_path):
    render_pool.shutdown()
    mark = f"survivor-{uuid.uuid4().hex[:12]}"
    depth = 70  # deeper than the old reaper's 50 rounds
    attacker = _write(tmp_path, "survivor",
                      SURVIVOR.format(mark=mark, depth=depth, hook_off=HOOK_OFF))
    result = render_scene(attacker, out_dir=tmp_path / "attacker", timeout=120)
    assert result.ok, result.message + result.log_tail[-1500:]
    chain = [ln for ln in result.log_tail.splitlines() if ln.startswith("CHAIN ")]
    assert chain and int(chain[-1].split()[1]) >= depth  # the chain was alive mid-render
    assert _marked(mark) == []  # and nothing of it outlived the render
    pool = render_pool.current_pool()
    started = pool.started
    victim = render_scene(_write(tmp_path, "victim", BENIGN), out_dir=tmp_path / "victim",
                          timeout=120)
    assert victim.ok, victim.message + victim.log_tail[-1500:]
    assert pool.started == started  # the same warm worker, kept because it was clean
    assert mark.encode() not in _tree_bytes(tmp_path / "victim")
    assert not list((tmp_path / "victim").rglob("hijack.txt"))
    assert _marked(mark) == []


ANNOTATION = '''from manim import *
import functools
PAYLOAD = """
import gc, os
for o in gc.get_objects():
    if type(o).__name__ == "_Guard":
        o.busy = True
os.system("id > media/shell_ran.txt; cat {canary} >> media/shell_ran.txt 2>&1; "
          "echo pwned > {outside} 2>> media/shell_ran.txt; ls /root /work >> media/shell_ran.txt")
"""

def handler(x):
    return x

def typed(x: "exec(PAYLOAD) or int"):
    return x

class Annotated(Scene):
    def construct(self):
        try:
            functools.singledispatch(handler).register(typed)
        except Exception as exc:
            print("register:", type(exc).__name__)
        self.add(Square())
'''


def test_string_annotation_exec_passes_nothing_past_the_sandbox(tmp_path, canaries):
    outside = REPO / f"pwned-{uuid.uuid4().hex[:8]}"
    code = ANNOTATION.format(canary=canaries[0], outside=outside)
    assert not verify_scene(code).ok  # verify now sees it (a fast lint) ...
    result = render_scene(_write(tmp_path, "annotated", code), out_dir=tmp_path / "out",
                          timeout=120)  # ... but the render does not depend on that
    assert result.ok, result.message + result.log_tail[-1500:]
    ran = (tmp_path / "out" / "media" / "shell_ran.txt").read_text()
    assert "uid=65534" in ran  # a shell did run, as nobody, inside the sandbox
    assert not outside.exists()
    _no_canary(result, tmp_path / "out")
    assert procs.marked_pids("MYTHLOOP_RENDER_ID", result.render_id) == []


SYSCALLS = '''from manim import *
import ctypes, errno, os, signal, time
{hook_off}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, call):
    ctypes.set_errno(0)
    rc = call()
    print("SYSCALL", name, rc, errno.errorcode.get(ctypes.get_errno(), "0"), flush=True)

class Syscalls(Scene):
    def construct(self):
        child = os.fork()
        if child == 0:
            time.sleep(30)
            os._exit(0)
        attempt("ptrace", lambda: libc.ptrace(16, child, 0, 0))  # PTRACE_ATTACH own child
        attempt("unshare", lambda: libc.unshare(0x10000000))  # CLONE_NEWUSER
        attempt("keyctl", lambda: libc.syscall(250, 0, -3, 0))  # KEYCTL_GET_KEYRING_ID
        attempt("add_key", lambda: libc.syscall(248, b"user", b"k", b"v", 1, -3))
        attempt("bpf", lambda: libc.syscall(321, 0, 0, 0))
        attempt("perf_event_open", lambda: libc.syscall(298, 0, 0, -1, -1, 0))
        attempt("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
        attempt("setns", lambda: libc.syscall(308, 0, 0))
        attempt("clone3", lambda: libc.syscall(435, 0, 0))
        try:  # its namespace's init is root: its environment and descriptors stay closed
            open("/proc/1/environ", "rb").read()
            print("PROC1 readable", flush=True)
        except OSError as exc:
            print("PROC1", type(exc).__name__, flush=True)
        print("PIDS", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()), flush=True)
        os.kill(child, signal.SIGKILL)
        self.add(Square())
'''


def test_the_syscall_filter_refuses_what_a_render_never_needs(tmp_path):
    code = SYSCALLS.format(hook_off=HOOK_OFF)
    result = render_scene(_write(tmp_path, "syscalls", code), out_dir=tmp_path / "out",
                          timeout=120)
    assert result.ok, result.message + result.log_tail[-1500:]
    said = {ln.split()[1]: ln.split()[3] for ln in result.log_tail.splitlines()
            if ln.startswith("SYSCALL ")}
    for name in ("ptrace", "unshare", "keyctl", "add_key", "bpf", "perf_event_open",
                 "mount", "setns"):
        assert said.get(name) == "EPERM", (name, said)
    assert said.get("clone3") == "ENOSYS"  # libc falls back to clone, which is filtered
    # its /proc shows its own PID namespace only (warm: its init, itself, its child)
    pids = [ln for ln in result.log_tail.splitlines() if ln.startswith("PIDS ")][0]
    assert len(json.loads(pids[5:])) <= 4, pids
    assert "PROC1 PermissionError" in result.log_tail


FORMULA = '''from manim import *
import json, socket, time
{hook_off}
ENDLESS = (r"\\documentclass{{article}}\\begin{{document}}\\loop\\iftrue\\repeat"
           r"\\end{{document}} %% {mark} ")

class Formulas(Scene):
    def construct(self):
        kept = []
        for i in range(6):
            try:
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect("/tmp/mythloop-render/tex.sock")
                request = {{"tex": ENDLESS + str(i), "compiler": "latex", "format": ".dvi"}}
                # (the service closes what is beyond its 4 connections: EPIPE, not SIGPIPE)
                conn.sendall((json.dumps(request) + "\\n").encode(), socket.MSG_NOSIGNAL)
                kept.append(conn)
            except OSError as exc:
                print("connect", i, exc, flush=True)
        print("SENT", len(kept), flush=True)
        time.sleep(2)
        self.add(Square())
'''


def _stages(state_dir: Path) -> set[str]:
    """This process's staging dirs under the state dir."""
    base, mine = state_dir / "render-stage", f"mythloop-stage-{os.getpid()}-"
    return {p.name for p in base.iterdir() if p.name.startswith(mine)} if base.is_dir() else set()


def test_endless_formulas_end_with_their_render(tmp_path, state_dir):
    before = formula_cache.stats()["compiles"]
    earlier = _stages(state_dir)  # an earlier test's stage may still be on its way out
    code = FORMULA.format(hook_off=HOOK_OFF, mark=uuid.uuid4().hex)
    result = render_scene(_write(tmp_path, "formulas", code), out_dir=tmp_path / "out",
                          timeout=120)
    assert result.ok, result.message + result.log_tail[-1500:]
    assert "SENT" in result.log_tail
    # every compile it asked for has ended (each is counted as it ends), none is left
    assert formula_cache.stats()["compiles"] - before >= 1
    assert procs.marked_pids("MYTHLOOP_RENDER_ID", result.render_id) == []
    assert _stages(state_dir) <= earlier  # this render's stage is gone


DEEP = '''from manim import *
import os
{hook_off}
class Deep(Scene):
    def construct(self):
        os.chdir("media")
        for _ in range(1500):
            os.mkdir("d")
            os.chdir("d")
        with open("deep.txt", "w") as fh:
            fh.write("x")
        os.chdir("/tmp/mythloop-render")
        self.add(Square())
'''
LONG_LINE = '''from manim import *
import sys

class LongLine(Scene):
    def construct(self):
        sys.stdout.write('File "' * 200000 + "\\n")
        sys.stdout.write("a." * 300000 + "\\n")
        sys.stdout.flush()
        raise ValueError("long line done")
'''


def test_deep_folders_and_a_long_log_line_do_not_knock_the_parent_over(tmp_path, state_dir):
    # (made with the hook off: its path checks make 1,500 levels slow, not impossible)
    earlier = _stages(state_dir)
    deep = render_scene(_write(tmp_path, "deep", DEEP.format(hook_off=HOOK_OFF)),
                        out_dir=tmp_path / "deep", timeout=120)
    assert deep.ok, deep.message + deep.log_tail[-1500:]
    assert _stages(state_dir) <= earlier  # this render's stage is gone
    cpu = time.process_time()
    line = render_scene(_write(tmp_path, "longline", LONG_LINE), out_dir=tmp_path / "long",
                        timeout=120)
    assert line.kind == "scene_error" and "long line done" in line.message
    assert "scene line 9" in line.message
    assert time.process_time() - cpu < 60  # the old classifier spent ~90 s of CPU here
    after = render_scene(_write(tmp_path, "benign", BENIGN), out_dir=tmp_path / "after",
                         timeout=120)
    assert after.ok


FLOOD = '''from manim import *
import sys

class Flood(Scene):
    def construct(self):
        chunk = ("x" * 63 + "\\n") * 16384  # 1 MiB of short lines
        for _ in range(96):
            sys.stdout.write(chunk)
        sys.stdout.flush()
        self.add(Square())
'''
_PEAK = """
import json, sys
from mythloop.mythos.sandbox.render import render_scene
r = render_scene(sys.argv[1], out_dir=sys.argv[2], timeout=180)
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"ok": r.ok, "kind": r.kind, "peak_kb": int(hwm), "tail": len(r.log_tail)}))
"""


def test_a_log_flood_keeps_the_parent_under_300_mb(tmp_path, state_dir):
    scene = _write(tmp_path, "flood", FLOOD)
    proc = subprocess.run([sys.executable, "-c", _PEAK, str(scene), str(tmp_path / "out")],
                          env={**os.environ, "MYTHLOOP_STATE_DIR": str(state_dir)},
                          capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["ok"], report
    assert report["peak_kb"] < 300 * 1024, report
    log = tmp_path / "out" / "render.log"
    assert log.stat().st_size <= 9 << 20  # DIR keeps the log's tail, not all 96 MiB
    with open(log) as fh:
        assert "were cut" in fh.readline()
