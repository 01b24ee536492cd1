"""The shared formula cache: each distinct LaTeX formula compiled once, for every scene and film.

Manim turns each Tex/MathTex into a complete .tex file (template + expression) and runs
latex and dvisvgm on it. Inside the render sandbox, the scene's process does not do that any
more: sandbox_worker.py asks this process, over a Unix socket in the render's staging dir,
for the SVG of the .tex text it generated. Here the answer is

- the cached SVG, when `key = sha256(tex text, compiler, output format, tool versions)` is
  in `<state>/formula-cache/`, or
- a fresh compile of exactly that text in a sandbox of its own (namespaces, `nobody`, a fresh
  staging dir holding only the .tex, no scene code at all), stored under that key.

So an entry is only ever written by this process, from a compile it ran itself on the text
the key is computed from: a scene can send any text (it only gets that text's true SVG),
but it cannot put anything under a key, nor read another render's files. The threat and
the answer are in docs/sandbox.md.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from mythloop import procs
from mythloop.fileio import write_text_atomic
from mythloop.mythos.sandbox import stage_tree
from mythloop.mythos.sandbox.sandbox_policy import LATEX_DANGER_RE
from mythloop.mythos.sandbox.tex_policy import tex_env
from mythloop.settings import get_settings

__all__ = ["FormulaService", "serving", "cache_dir", "tex_environment", "stats"]

SOCKET_NAME = "tex.sock"
MAX_REQUEST = 256 << 10  # bytes of one request line (a .tex file is a few KB)
MAX_SVG = 8 << 20
MAX_CONNECTIONS = 4  # per render
COMPILE_TIMEOUT = 90.0
CACHE_BYTES = 256 << 20  # the whole cache, least recently used entries evicted past it
RENDER_STORE_BYTES = 32 << 20  # what one render may add to it (answers go on past it)
_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_GUARD = threading.Lock()
_STATS = {"hits": 0, "compiles": 0, "compile_s": 0.0, "errors": 0, "evicted": 0,
          "not_stored": 0}
_STATS_LOCK = threading.Lock()
# the grouping marks manim itself writes around each part of a Tex/MathTex (tex_mobject.py):
# the only \special a formula may hold, and only in exactly this form
_MANIM_GROUPS = re.compile(r"\\special\{dvisvgm:raw (?:<g id='unique\d{3,}(?:substring)?'>|</g>)\}")

# Runs inside the compile sandbox (as `nobody`, in the staging dir holding formula.tex):
# manim's own two commands, for the default template (latex -> dvi -> dvisvgm).
_COMPILE_SCRIPT = r"""
import subprocess, sys
def run(argv):
    try:
        return subprocess.run(argv, stdout=subprocess.DEVNULL).returncode
    except FileNotFoundError:
        print(f"No such file or directory: '{argv[0]}'", flush=True)
        sys.exit(5)
if run(["latex", "-interaction=batchmode", "-output-format=dvi", "-halt-on-error",
        "-output-directory=.", "formula.tex"]):
    sys.exit(3)
sys.exit(4 if run(["dvisvgm", "--page=1", "--no-fonts", "--verbosity=0",
                   "--output=formula.svg", "formula.dvi"]) else 0)
"""


def cache_dir() -> Path:
    return get_settings().state_root / "formula-cache"


def stats() -> dict:
    """Hits, compiles and compile seconds of this process so far (bench, tests)."""
    with _STATS_LOCK:
        return dict(_STATS)


def tex_environment(env: dict[str, str], render_dir: str) -> dict[str, str]:
    """THE one place the environment of the formula cache's TeX runs (latex, dvisvgm) is
    built: ENV with TeX's paranoid file access (tex_policy.tex_env) pinned to RENDER_DIR,
    last, so nothing in ENV can loosen it."""
    return {**env, **tex_env(render_dir)}


@functools.cache
def _tool_versions(path: str) -> str:
    """First line of `latex --version` and `dvisvgm --version` on PATH (part of the key)."""
    lines = []
    for tool in ("latex", "dvisvgm"):
        exe = shutil.which(tool, path=path)
        if exe is None:
            lines.append(f"{tool}: missing")
            continue
        try:
            out = procs.run([exe, "--version"], timeout=30).stdout
        except (OSError, Exception):  # noqa: BLE001 - an unknown version is still a key part
            out = ""
        lines.append(f"{tool}: {exe}: {out.strip().splitlines()[0] if out.strip() else '?'}")
    return "\n".join(lines)


def _key(tex: str, compiler: str, fmt: str, versions: str) -> str:
    blob = json.dumps([tex, compiler, fmt, versions], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _lock_for(key: str) -> threading.Lock:
    with _KEY_LOCKS_GUARD:
        return _KEY_LOCKS.setdefault(key, threading.Lock())


def cache_limit() -> int:
    """The cache's size cap in bytes (MYTHLOOP_FORMULA_CACHE_MB, default 256)."""
    raw = os.environ.get("MYTHLOOP_FORMULA_CACHE_MB", "").strip()
    try:
        return max(1, int(float(raw) * (1 << 20))) if raw else CACHE_BYTES
    except ValueError:
        return CACHE_BYTES


_SIZE_LOCK = threading.Lock()
_SIZES: dict[str, int] = {}  # cache dir -> its size as this process last counted it


def _entries(cache: Path) -> list[tuple[float, int, Path]]:
    """(last use, size, path) of every entry: the two-level layout only, no links."""
    found = []
    with contextlib.suppress(OSError):
        for sub in os.scandir(cache):
            if not sub.is_dir(follow_symlinks=False) or len(sub.name) != 2:
                continue
            with contextlib.suppress(OSError):
                for entry in os.scandir(sub.path):
                    if entry.name.endswith(".svg") and entry.is_file(follow_symlinks=False):
                        st = entry.stat(follow_symlinks=False)
                        found.append((st.st_mtime, st.st_size, Path(entry.path)))
    return found


def _account(cache: Path, added: int) -> None:
    """Count ADDED bytes into CACHE; past its cap, evict the least recently used entries
    (an entry's mtime is its last use: a hit touches it) down to three quarters of it."""
    limit = cache_limit()
    key = str(cache)
    with _SIZE_LOCK:
        if key not in _SIZES:
            _SIZES[key] = sum(size for _, size, _ in _entries(cache))
        else:
            _SIZES[key] += added
        if _SIZES[key] <= limit:
            return
        entries = sorted(_entries(cache))  # oldest use first
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= limit * 3 // 4:
                break
            with contextlib.suppress(OSError):
                path.unlink()
                total -= size
                with _STATS_LOCK:
                    _STATS["evicted"] += 1
        _SIZES[key] = total


def _read_svg(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_SVG:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class RenderOver(Exception):
    """The render a compile was for has ended (raised inside the compile's wait loop)."""


class FormulaService:
    """Answers one render's formula requests on STAGE/tex.sock while the render runs."""

    def __init__(self, stage: Path, env: dict[str, str], *, cache: Path | None = None) -> None:
        self.stage, self.env = stage, dict(env)
        self.cache = cache or cache_dir()
        self.versions = _tool_versions(self.env.get("PATH", ""))
        self.path = stage / SOCKET_NAME
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(self.path))
        os.chmod(self.path, 0o666)  # the scene's user connects (any request is untrusted)
        self.sock.listen(MAX_CONNECTIONS)
        self.stored = 0  # bytes this render added to the cache
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True,
                                         name="formula-cache")
        self.acceptor.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if len(self.threads) >= MAX_CONNECTIONS:
                conn.close()
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self.threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        pending = b""
        conn.settimeout(0.5)
        with conn:
            while not self.stop.is_set():
                try:
                    chunk = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                pending += chunk
                if len(pending) > MAX_REQUEST and b"\n" not in pending:
                    return
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    try:
                        reply = self.answer(json.loads(line))
                    except (ValueError, TypeError, KeyError, RecursionError, OSError) as exc:
                        # a deeply nested message raises RecursionError in json: bad too
                        reply = {"error": f"bad request: {type(exc).__name__}"
                                          f"{': ' + str(exc) if str(exc) else ''}"[:300]}
                    except RenderOver:
                        return
                    try:
                        conn.sendall((json.dumps(reply) + "\n").encode())
                    except OSError:
                        return

    def answer(self, request: dict) -> dict:
        """{'svg': text} or {'error': ..., 'log': TeX log tail} for one .tex text."""
        tex, compiler, fmt = request["tex"], request["compiler"], request["format"]
        if not (isinstance(tex, str) and compiler == "latex" and fmt == ".dvi"):
            return {"error": "only the default latex -> dvi template is served"}
        # what verify refuses in a literal, refused here in text built at run time too
        # (TeX's paranoid file access stays the boundary; this is one more layer)
        danger = LATEX_DANGER_RE.search(_MANIM_GROUPS.sub("", tex))
        if danger:
            with _STATS_LOCK:
                _STATS["errors"] += 1
            return {"error": "latex failed",
                    "log": f"! refused: the formula uses {danger.group(0)!r}, a TeX command "
                           "that reads or writes files or runs code; remove it"}
        key = _key(tex, compiler, fmt, self.versions)
        entry = self.cache / key[:2] / f"{key}.svg"
        with _lock_for(key):  # scenes compiling one formula at once: one compile
            self._check_open()
            svg = _read_svg(entry)
            if svg is not None:
                with contextlib.suppress(OSError):
                    os.utime(entry)  # its last use, for the eviction order
                with _STATS_LOCK:
                    _STATS["hits"] += 1
                return {"svg": svg, "cache": "hit"}
            svg, log = self._compile(tex)
            if svg is None:
                with _STATS_LOCK:
                    _STATS["errors"] += 1
                return {"error": "latex failed", "log": log}
            size = len(svg.encode())
            if self.stored + size > RENDER_STORE_BYTES:  # this render has added its share
                with _STATS_LOCK:
                    _STATS["not_stored"] += 1
                return {"svg": svg, "cache": "miss"}
            entry.parent.mkdir(parents=True, exist_ok=True)
            write_text_atomic(entry, svg)
            self.stored += size
            _account(self.cache, size)
            return {"svg": svg, "cache": "miss"}

    def _compile(self, tex: str) -> tuple[str | None, str]:
        """Compile TEX in a sandbox of its own; (svg text or None, log tail)."""
        from mythloop.mythos.sandbox import render as R  # noqa: PLC0415 (cycle: render imports this module)

        started = time.monotonic()
        namespaced = R._namespaces_work()
        stage = R._make_stage(namespaced)
        try:
            (stage / "formula.tex").write_text(tex, encoding="utf-8")
            uid, gid = R._nobody()
            drop = os.geteuid() == 0 and namespaced
            if drop:
                os.chown(stage, uid, gid)
            inner = R.INNER_DIR if namespaced else str(stage)
            python = sys.executable
            cpu = int(COMPILE_TIMEOUT)
            spec = {"namespaced": namespaced, "inner": inner, "tmp_size": "64m",
                    "uid": uid if drop else None, "gid": gid if drop else None,
                    "worker_cmd": [python, "-I", "-c", _COMPILE_SCRIPT],
                    "limits": {"AS": 2 << 30, "CPU": [cpu, cpu + 5], "FSIZE": 64 << 20,
                               "CORE": 0, "NOFILE": 256, **({"NPROC": R.HELPER_NPROC} if drop else {})}}
            launcher = R.sandbox_launcher(spec, python, [(str(stage), inner)])
            env = tex_environment({**self.env, "HOME": f"{inner}", "TMPDIR": f"{inner}"},
                                  inner)
            out = stage.parent / f"{stage.name}.out"
            try:
                # ends at its own deadline, or as soon as the render it serves is over
                code, timed_out = R._run(launcher, stage, env, out, COMPILE_TIMEOUT,
                                         self._check_open)
                said = (_read_svg(out) or "")[-2000:]
            finally:
                out.unlink(missing_ok=True)
            svg = _read_svg(stage / "formula.svg") if code == 0 and not timed_out else None
            log = ""
            if svg is None:
                log = (_read_svg(stage / "formula.log") or "")[-6000:] if code == 3 else ""
                log = log or said or f"the formula compile ended with code {code}" + (
                    " (timed out)" if timed_out else "")
            return svg, log
        finally:
            stage_tree.remove_tree(stage)
            with _STATS_LOCK:
                _STATS["compiles"] += 1
                _STATS["compile_s"] += time.monotonic() - started

    def _check_open(self) -> None:
        """Polled while a compile runs: the render is over, so stop (its sandbox is killed
        and its staging dir removed on the way out)."""
        if self.stop.is_set():
            raise RenderOver

    def close(self) -> None:
        """Stop answering; every compile still running for this render is killed and its
        staging dir removed before this returns."""
        self.stop.set()
        try:
            self.sock.close()
        except OSError:
            pass
        self.acceptor.join(5)
        for thread in self.threads:
            thread.join(COMPILE_TIMEOUT + 10)
        try:
            self.path.unlink()
        except OSError:
            pass


@contextlib.contextmanager
def serving(stage: Path, env: dict[str, str]) -> Iterator[FormulaService | None]:
    """A FormulaService for the render in STAGE, or None when one cannot be made (the
    render then compiles its formulas itself, as before)."""
    if os.environ.get("MYTHLOOP_FORMULA_CACHE", "").strip() == "0":
        yield None
        return
    try:
        service = FormulaService(stage, env)
    except OSError:
        yield None
        return
    try:
        yield service
    finally:
        service.close()
