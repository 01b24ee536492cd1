"""Sandboxed Manim render of untrusted scene code (the second sandbox layer).

`render_scene` copies the scene into a private staging dir (under the state
dir, one the sandbox user can use whatever the caller's DIR looks like) and
runs manim there through bubblewrap (an allowlisted read-only view, fresh network/PID/
IPC/UTS namespaces, private /tmp), sandbox_init.py (the unprivileged `nobody` user,
rlimits, a seccomp filter) and sandbox_worker.py
(an audit hook), with a scrubbed environment, in its own session, killed with
its process group at the deadline. Afterwards only regular files come back
into DIR (the log always, the media only on success, the mp4 last, each file
whole), and the staging dir is removed in every case. It contains hostile code
even when `verify` was skipped. What each layer stops, and what it cannot, is
in docs/sandbox.md.
"""

from __future__ import annotations

import ast
import contextlib
import errno
import functools
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from mythloop import procs
from mythloop.fileio import copy_file_atomic, write_text_atomic
from mythloop.mythos.code.safe_ast import parse
from mythloop.mythos.code.scenes import module_source
from mythloop.mythos.sandbox import (
    footprint,
    formula_cache,
    intake,
    layout_frames,
    render_pool,
    stage_tree,
)
from mythloop.mythos.sandbox.layout import Finding, PlannedZoom, probe_source
from mythloop.mythos.sandbox.sandbox_classify import classify
from mythloop.mythos.sandbox.sandbox_policy import SCENE_HELPERS
from mythloop.mythos.sandbox.tex_policy import tex_env
from mythloop.settings import get_settings
from mythloop.vocab import QUALITIES, RENDER_KINDS, RenderKind

__all__ = ["RenderLimits", "RenderOutput", "RenderResult", "render_scene", "scene_names",
           "prewarm", "QUALITIES", "ProgressCallback"]

INNER_DIR = "/tmp/mythloop-render"  # where the render dir appears inside the namespaces
TMP_SIZE = "256m"  # each render's private /tmp (a tmpfs)
TMP_BYTES = 256 << 20
POOL_BASE = "/tmp/.mythloop-pool-base"  # a warm worker's staging base (sandbox_init._POOL_BASE)
TEX_TOOLS = ["latex", "pdflatex", "xelatex", "lualatex", "dvisvgm"]
_HERE = Path(__file__).resolve().parent
_LAYOUT_FILE = "layout.json"  # written by the probe under the stage's media/
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
# The sandbox's own tool, looked up on the system path: a user's PATH (which the scene
# inherits, e.g. one without LaTeX) must not decide whether the sandbox can be built.
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_BWRAP_BIN = shutil.which("bwrap", path=_SYSTEM_PATH)
STAGE_PREFIX = "mythloop-stage-"
_SKIP_MEDIA = frozenset({"partial_movie_files"})
PROGRESS_EVERY = 10.0  # seconds between "still rendering" lines when no animation starts
_PROGRESS_LINE = re.compile(rb"mythloop-progress: animation (\d{1,6}) ([A-Za-z0-9_.,]{0,80})")
ProgressCallback = Callable[[str], None]
"""Receives one short line per progress event (`render: animation 3 (Create), 4s ...`)."""
# The render's whole world (bubblewrap, read-only unless said): what Python, manim, TeX,
# fonts and the video libraries read, and nothing else. The interpreter's own prefixes are
# added per render (`_python_roots`); the stage is the one writable bind.
_SYSTEM_RO = ("/usr", "/etc/fonts", "/etc/texmf", "/etc/alternatives", "/etc/ld.so.cache",
              "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/mime.types",
              "/var/lib/texmf", "/var/cache/fontconfig")
_ROOT_LINKS = ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin")
_NAMESPACES = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
               "--unshare-cgroup-try", "--die-with-parent", "--new-session"]


def _parents(paths: list[str]) -> list[str]:
    """bwrap arguments making each missing parent of PATHS a traversable (0755) empty folder
    (bwrap would otherwise create them mode 700, closed to the sandbox user)."""
    args: list[str] = []
    made: set[str] = set()
    for path in paths:
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            if parent not in made and not any(parent == p or parent.startswith(p + "/")
                                              for p in paths):
                made.add(parent)
                args += ["--perms", "0755", "--dir", parent]
    return args


@functools.cache
def _bwrap_sizes() -> bool:
    """True when this bubblewrap can cap a tmpfs's size (`--size`, bubblewrap 0.7 and later)."""
    try:
        return _BWRAP_BIN is not None and "--size" in procs.run([_BWRAP_BIN, "--help"],
                                                                  timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def _root_entries(binds: list[str]) -> list[str]:
    """bwrap arguments for the usual top-level links (merged /usr), then read-only BINDS."""
    args: list[str] = []
    for path in _ROOT_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            binds = [path, *binds]
    binds = [p for p in binds if os.path.exists(p)]
    args += _parents(binds)
    for path in binds:
        args += ["--ro-bind", path, path]
    return args


@functools.cache
def _python_roots(python: str) -> tuple[str, ...]:
    """The folders the interpreter PYTHON needs: its real binary's folder, its prefix and
    base prefix (a venv and the install it was made from). Never a `sys.path` entry of the
    caller (its cwd, a folder under /root, the checkout of an editable install)."""
    real = os.path.realpath(python)
    roots = {os.path.dirname(real)}
    if os.path.realpath(sys.executable) == real or python == sys.executable:
        roots.update(os.path.realpath(p) for p in (sys.prefix, sys.base_prefix))
    else:
        try:
            out = procs.run([python, "-I", "-c", "import sys; print(sys.prefix); "
                             "print(sys.base_prefix)"], timeout=30).stdout
            roots.update(os.path.realpath(p) for p in out.split() if p.startswith("/"))
        except (OSError, subprocess.TimeoutExpired):
            pass
    roots.add(os.path.dirname(os.path.abspath(python)))
    # the narrowest set: a folder inside another one listed is covered by it
    chosen = sorted(r for r in roots if os.path.isdir(r) and r != "/")
    return tuple(r for r in chosen if not any(r != o and r.startswith(o + "/") for o in chosen))


@functools.cache
def scene_helper_sources() -> dict[str, str]:
    """The source of each project module a scene may import (sandbox_policy.SCENE_HELPERS,
    e.g. `mythloop.scenekit`), by module name: the worker installs them itself, since the
    render's view never holds the checkout an editable install points into."""
    return {name: module_source(name) for name in SCENE_HELPERS
            if name.partition(".")[0] == "mythloop"}


def _view_roots(python: str) -> list[str]:
    return sorted(set(_python_roots(python)) | set(_python_roots(sys.executable)))


def tmp_keep(python: str) -> list[str]:
    """The entries of the view's /tmp that hold an interpreter root (a venv in a checkout
    under /tmp): a warm render's fresh /tmp keeps them (sandbox_init.py), so lazy imports
    still find their modules. In the view they hold nothing but those read-only binds."""
    return sorted({Path(r).relative_to("/tmp").parts[0] for r in _view_roots(python)
                   if r.startswith("/tmp/")})


def sandbox_view(python: str, binds: list[tuple[str, str]]) -> list[str]:
    """The bwrap command line up to the program: fresh namespaces (net, pid, ipc, uts),
    the allowlisted read-only tree, a minimal /dev, /proc of the new PID namespace, a
    private /tmp, and BINDS (real path, path inside) writable. The seccomp filter is
    loaded by sandbox_init.py itself, after it dropped to `nobody` (a warm worker, root,
    must still mount and unshare for each render)."""
    if _BWRAP_BIN is None:
        raise FileNotFoundError(2, "No such file or directory", "bwrap")
    # the private /tmp first: an interpreter or venv that lives under /tmp (a checkout there)
    # is bound over it, not hidden by it
    args = [_BWRAP_BIN, *_NAMESPACES, "--dev", "/dev", "--proc", "/proc", "--perms", "1777",
            *(["--size", str(TMP_BYTES)] if _bwrap_sizes() else []), "--tmpfs", "/tmp"]
    args += _root_entries([*_SYSTEM_RO, *_view_roots(python)])
    for real, inner in binds:
        args += ["--bind", real, inner]
    return [*args, "--chdir", binds[0][1] if binds else "/", "--"]


class RenderOutput(BaseModel):
    """What one scene of a render produced: manim's mp4, or the PNG of a still scene."""

    scene: str
    kind: Literal["video", "image"]
    path: str


class RenderResult(BaseModel):
    """Outcome of one sandboxed render; `message` is the one line to show a user."""

    ok: bool
    kind: RenderKind = Field(description=" | ".join(RENDER_KINDS))
    video_path: str | None = None
    image_path: str | None = None
    """The PNG manim saved for a still scene (no animation played), when the last scene
    rendered is one; `video_path` is None then."""
    outputs: list[RenderOutput] = Field(default_factory=list)
    """Every scene's output, in the order rendered (a file with several Scene classes)."""
    log_tail: str = ""
    returncode: int | None = None
    seconds: float = 0.0
    cpu_s: float | None = None
    """User + system CPU seconds of the render's whole process tree (manim, ffmpeg, what the
    scene started), as its warm worker measured them; None for a cold render."""
    message: str = ""
    out_dir: str = ""
    log_path: str | None = None
    isolation: list[str] = Field(default_factory=list)
    """Which sandbox layers were active, and notes on any that were not."""
    render_id: str = ""
    """MYTHLOOP_RENDER_ID given to the child (its processes carry it in their environment)."""
    peak_memory_bytes: int | None = None
    """The most memory the render's whole tree and its stage held at once (its memory
    cgroup's peak; None where renders get no cgroup, docs/sandbox.md)."""
    layout_findings: list[Finding] | None = None
    """With layout=True: the layout verdict's findings (layout.FindingKind: the probe's
    record judged, then held against the rendered frames), [] when clean; None when no
    check ran (the render failed)."""


class RenderLimits(BaseModel):
    """Hard limits for the render: rlimits per process (CPU time follows the timeout), and
    the budget of the render as a whole (footprint.py): the memory of its whole process tree
    with its shared memory, memfds and stage counted, its processes, and its stage's bytes
    and files."""

    memory_bytes: int = 4 << 30
    file_bytes: int = 512 << 20
    processes: int = 512
    open_files: int = 1024
    tree_memory_bytes: int = 4 << 30
    stage_bytes: int = 1 << 30
    stage_files: int = 20000


def scene_names(code: str) -> list[str]:
    """Scene classes defined in CODE (subclasses of *Scene, directly or via each other)."""
    try:
        tree = parse(code)
    except (SyntaxError, ValueError):
        return []
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    found: list[str] = []
    for _ in range(len(classes)):
        for cls in classes:
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in cls.bases]
            if cls.name not in found and any(b.endswith("Scene") or b in found for b in bases):
                found.append(cls.name)
    # bases used only to be extended are not the scene to render
    parents = {b.id for c in classes if c.name in found for b in c.bases if isinstance(b, ast.Name)}
    leaves = [c.name for c in classes if c.name in found and c.name not in parents]
    return leaves or found


def top_level_names(code: str) -> set[str]:
    """Names a module binds at top level (classes, functions, assignments, imports)."""
    try:
        tree = parse(code)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@functools.cache
def _namespaces_work() -> bool:
    """True when bubblewrap can build the sandbox here (root, `bwrap` installed, permitted)."""
    if os.geteuid() != 0 or _BWRAP_BIN is None:
        return False
    try:
        probe = [*sandbox_view(sys.executable, []), "/bin/true"]
        return procs.run(probe, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def init_source() -> str:
    """sandbox_init.py's source: run with `python -I -c`, as the checkout is not in view
    (its first line names it in `ps`)."""
    return "# mythloop sandbox_init.py\n" + (_HERE / "sandbox_init.py").read_text(
        encoding="utf-8")


def sandbox_launcher(spec: dict, python: str, binds: list[tuple[str, str]]) -> list[str]:
    """The command that runs sandbox_init.py with SPEC: inside the bubblewrap view with
    BINDS when SPEC is namespaced, as a plain subprocess otherwise (the fallback)."""
    if spec.get("namespaced"):
        spec = {**spec, "tmp_keep": tmp_keep(python)}
    init = [sys.executable, "-I", "-c", init_source(), json.dumps(spec)]
    return [*sandbox_view(python, binds), *init] if spec.get("namespaced") else init


def sandbox_problem() -> str | None:
    """Why the bubblewrap sandbox cannot be used here (for `mythloop doctor`), or None."""
    if _BWRAP_BIN is None:
        return "bubblewrap (bwrap) is not installed"
    if os.geteuid() != 0:
        return "not running as root: renders fall back to no namespaces"
    return None if _namespaces_work() else "bwrap is installed but cannot create namespaces here"


def _nobody() -> tuple[int, int]:
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


def _needed_paths(python: str) -> list[str]:
    """Real paths the unprivileged worker must reach: interpreter, prefixes, sys.path."""
    paths = {os.path.realpath(python), os.path.realpath(os.path.dirname(python)),
             os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    paths.update(os.path.realpath(p) for p in sys.path if p and os.path.isdir(p))
    return sorted(paths)


def _traversable_by_others(path: str) -> bool:
    """True when every directory above PATH has o+x (the fallback without namespaces)."""
    current = Path(path).resolve()
    return all(os.stat(p).st_mode & 0o001 for p in [*current.parents][::-1] + [current]
               if p.is_dir())


def _python_for(manim_cmd: list[str]) -> str | None:
    """The interpreter behind a manim command, or None for an opaque executable."""
    if len(manim_cmd) >= 3 and manim_cmd[1:3] == ["-m", "manim"]:
        return manim_cmd[0]
    exe = shutil.which(manim_cmd[0]) if manim_cmd else None
    if exe and len(manim_cmd) == 1:
        try:
            first = Path(exe).read_bytes()[:200].split(b"\n", 1)[0].decode()
        except (OSError, UnicodeDecodeError):
            return None
        if first.startswith("#!") and "python" in first:
            return first[2:].strip().split()[0]
    return None


def _child_env(inner: str, token: str, env_extra: dict[str, str] | None) -> dict[str, str]:
    """Only PATH, LANG and dirs inside the render dir; never anything secret-looking; TeX's
    paranoid file access (tex_policy.tex_env), which env_extra cannot override."""
    path = ":".join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(":")
                    if p.startswith("/"))
    env = {
        "PATH": path or "/usr/local/bin:/usr/bin:/bin",
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "HOME": f"{inner}/home",
        "TMPDIR": f"{inner}/tmp",
        "MPLCONFIGDIR": f"{inner}/home/.config/matplotlib",
        "XDG_CACHE_HOME": f"{inner}/home/.cache",
        "XDG_CONFIG_HOME": f"{inner}/home/.config",
        "PYTHONDONTWRITEBYTECODE": "1",
        "COLUMNS": "100",
        "MYTHLOOP_RENDER_ID": token,
    }
    pinned = tex_env(inner)
    for key, value in (env_extra or {}).items():
        if not _SECRET_NAME.search(key) and not any(
                key.split(".", 1)[0] == name or key.startswith(name + "_") for name in pinned):
            env[key] = value
    env.update(pinned)  # last: TeX reads and writes only the render dir
    return env


def _own_tree(root: Path, uid: int, gid: int, only_from: int | None = None) -> None:
    """lchown ROOT's tree (never following links; only files owned by ONLY_FROM if set)."""
    # iterative and depth-bounded (stage_tree): what lies deeper stays with the stage
    targets: list[Path] = [*stage_tree.walk_dirs(root),
                           *(path for path, _ in stage_tree.walk_files(root))]
    for target in targets:
        try:
            st = os.lstat(target)
            if only_from is None or (st.st_uid == only_from and
                                     (stat.S_ISDIR(st.st_mode) or st.st_nlink == 1)):
                os.chown(target, uid, gid, follow_symlinks=False)
        except OSError:
            continue


def _sweep(token: str) -> int:
    """SIGKILL any process still carrying this render's id in its environment; how many."""
    return len(procs.kill_marked("MYTHLOOP_RENDER_ID", token,
                                 signals=(signal.SIGKILL,) * 5, grace=0.2))


def _media_files(out_dir: Path, sub: str, suffix: str) -> list[Path]:
    """Regular, singly linked SUFFIX files under OUT_DIR/media/SUB (no partial movies)."""
    media = out_dir / "media" / sub
    if not media.is_dir():
        return []
    root = out_dir.resolve()
    return [p for p, st in stage_tree.walk_files(media, skip_dirs=_SKIP_MEDIA)
            if p.name.endswith(suffix) and stat.S_ISREG(st.st_mode) and st.st_nlink == 1
            and p.resolve().is_relative_to(root)]


def _find_outputs(out_dir: Path, scenes: list[str], exact: bool = False) -> dict[str, Path]:
    """Each requested scene's output under OUT_DIR/media: its mp4 (media/videos), else the
    PNG manim saves for a scene that played nothing (media/images, `<Scene>_ManimCE_v*.png`).
    Not EXACT and a single scene: the newest mp4 or PNG when no file carries its name."""
    videos = _media_files(out_dir, "videos", ".mp4")
    images = _media_files(out_dir, "images", ".png")
    found: dict[str, Path] = {}
    for name in scenes:
        named = [p for p in videos if p.stem == name] or [
            p for p in images if p.stem == name or p.stem.startswith(f"{name}_ManimCE_v")]
        if named:
            found[name] = max(named, key=lambda p: p.stat().st_mtime).resolve()
    if not found and not exact and len(scenes) == 1 and (videos or images):
        found[scenes[0]] = max(videos or images, key=lambda p: p.stat().st_mtime).resolve()
    return found


def _default_out_dir(stem: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return get_settings().state_root / "renders" / f"{stamp}-{stem}-{uuid.uuid4().hex[:6]}"


def syntax_problem(code: str) -> str | None:
    """'SyntaxError: <what> (scene line N)' when CODE does not parse, else None."""
    try:
        parse(code)
    except SyntaxError as exc:
        where = f" (scene line {exc.lineno})" if exc.lineno else ""
        return f"SyntaxError: {exc.msg}{where}"
    except ValueError as exc:  # e.g. null bytes in the source
        return f"SyntaxError: {exc}"
    return None


def _clean_stale_stages(base: Path, older_than: float = 6 * 3600.0) -> None:
    """Remove staging dirs left by renders whose process is gone (a SIGKILL, a power cut)."""
    try:
        entries = list(os.scandir(base))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        match = re.fullmatch(re.escape(STAGE_PREFIX) + r"(\d+)-\w+", entry.name)
        try:  # one stage that cannot be removed must not stop this render, nor the others
            if not (match and entry.is_dir(follow_symlinks=False)) or \
                    procs.pid_alive(int(match.group(1))):
                continue
            # its stage filesystem: nothing uses it once its caller is gone (its workers
            # die with it), so it goes at once, whatever its age
            if footprint.is_mount_point(entry.path):
                footprint.unmount(entry.path)
            if now - entry.stat(follow_symlinks=False).st_mtime > older_than:
                stage_tree.remove_tree(entry.path)
        except Exception:  # noqa: BLE001, S112 - best effort by design
            continue


def _make_stage(namespaced: bool) -> Path:
    """A fresh private staging dir the sandbox user can be handed (root-owned, 0755).

    It lives under the state dir's `render-stage` (mode 700): with namespaces the sandbox
    sees its own stage only through a bind mount, so neither the caller's folders (a
    mode-700 `mktemp -d`, a private home) nor a concurrent render's stage need be, or
    can be, reachable. Without namespaces `nobody` must traverse every parent, so as root
    the system temp dir is used instead.
    """
    base = get_settings().state_root / "render-stage"
    base.mkdir(parents=True, exist_ok=True)
    try:
        base.chmod(0o700)
    except OSError:
        pass
    _clean_stale_stages(base)
    if not namespaced and os.geteuid() == 0 and not _traversable_by_others(str(base)):
        base = Path(tempfile.gettempdir())
    stage = Path(tempfile.mkdtemp(prefix=f"{STAGE_PREFIX}{os.getpid()}-", dir=base))
    stage.chmod(0o755)
    return stage.resolve()


LOG_KEEP_BYTES = 8 << 20
# RLIMIT_NPROC counts every process and thread of the real uid (`nobody`) on the machine,
# renders included. The helper sandboxes (frame check, media intake, formula compile) run only
# the project's own programs (ffmpeg, latex) on the data, so they get a bound that renders
# cannot use up (a render forks only while nobody's count is under `RenderLimits.processes`,
# and its pids group bounds its own tree): a busy or hostile render never makes another
# scene's checks fail for want of a process.
HELPER_NPROC = 4096
AFTER_RENDER_S = 15.0  # past the render's timeout, the parent's checks of its outputs end  # of a longer render log, DIR keeps this much of its end


def _keep_log(src: Path, dst: Path) -> None:
    """The stage's log into DIR: whole, or its last LOG_KEEP_BYTES behind a note saying
    how much was cut (a scene may print up to the file-size limit)."""
    size = src.stat().st_size
    if size <= LOG_KEEP_BYTES:
        _place(src, dst)
        return
    tail = stage_tree.read_tail(src, LOG_KEEP_BYTES)
    write_text_atomic(dst, f"[render.log: the first {size - len(tail.encode())} bytes of "
                           f"{size} were cut; the end follows]\n{tail}")


def _place(src: Path, dst: Path) -> None:
    """Move SRC to DST whole: rename, or copy to a temp name beside DST and rename it."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.rename(src, dst)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:  # the stage is on another filesystem: copy
            raise
    copy_file_atomic(src, dst)


def _hand_over_media(stage: Path, work: Path, outputs: list[Path]) -> list[Path]:
    """Move the stage's media into WORK/media (regular files only, the OUTPUTS last).

    Links, devices and multiply linked files the scene may have planted are left behind
    (and removed with the stage); manim's partial movie files are not kept either.
    """
    media = stage / "media"
    files = [path for path, st in stage_tree.walk_files(media, skip_dirs=_SKIP_MEDIA)
             if stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and path not in outputs]
    for path in [*files, *outputs]:
        _place(path, work / path.relative_to(stage))
    return [work / path.relative_to(stage) for path in outputs]


class _ProgressRelay:
    """Turns the render log's animation markers into short lines for a callback.

    Only the marker's number and a name limited to [A-Za-z0-9_.,] are ever passed on, so
    scene output cannot put arbitrary text (or terminal escapes) on the caller's screen.
    """

    def __init__(self, callback: ProgressCallback | None, log_path: Path, timeout: float) -> None:
        self.callback, self.log_path, self.timeout = callback, log_path, timeout
        self.started = time.monotonic()
        self.offset, self.pending = 0, b""
        self.animation, self.last_said = 0, self.started

    def say(self, line: str) -> None:
        if self.callback is None:
            return
        self.last_said = time.monotonic()
        try:
            self.callback(line)
        except Exception:  # noqa: BLE001 - a broken progress sink must not break the render
            self.callback = None

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.0f}s of {self.timeout:.0f}s timeout"

    def poll(self) -> None:
        if self.callback is None:
            return
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self.offset)
                chunk = log.read(1 << 20)
        except OSError:
            chunk = b""
        self.offset += len(chunk)
        lines = (self.pending + chunk).split(b"\n")
        self.pending = lines.pop()[-4096:]
        for raw in lines:
            match = _PROGRESS_LINE.fullmatch(raw.strip())
            if match:
                self.animation = int(match.group(1))
                name = match.group(2).decode("ascii")
                self.say(f"render: animation {self.animation}"
                         f"{f' ({name})' if name else ''}, {self.elapsed()}")
        if time.monotonic() - self.last_said >= PROGRESS_EVERY:
            doing = (f"still in animation {self.animation}" if self.animation
                     else "no animation started yet")
            self.say(f"render: {doing}, {self.elapsed()}")


def render_scene(file: str | os.PathLike, *, scene: str | None = None, quality: str = "l",
                 timeout: float | None = None, out_dir: str | os.PathLike | None = None,
                 manim_cmd: list[str] | None = None, env_extra: dict[str, str] | None = None,
                 limits: RenderLimits | None = None, audit_hook: bool = True,
                 progress: ProgressCallback | None = None,
                 layout: bool = False,
                 layout_zooms: list[PlannedZoom] | None = None) -> RenderResult:
    """Render FILE's scene inside the sandbox; the mp4 lands under OUT_DIR/media/videos.

    OUT_DIR may be any folder the caller can write (a mode-700 temp dir included): the
    render runs in a private staging dir and its results are moved in afterwards.
    `progress`, when given, gets a short line as each animation starts and every
    PROGRESS_EVERY seconds otherwise; left out, the lines go to the Prefect run logger
    when this runs inside a Prefect task (a film's render stage) and nowhere otherwise.
    `audit_hook=False` leaves out the Python-level guard (tests use it to show the OS
    layers contain hostile code on their own). `layout=True` also records where texts and
    formulas are at each beat end and puts the layout check's findings into the result
    (`layout_findings`; needs the audit-hooked worker); `layout_zooms`, the scene's planned
    zooms from the shot list, tell the check which zooms are intended.
    """
    source = Path(file)
    code = source.read_text(encoding="utf-8")  # FileNotFoundError/OSError for the caller
    if quality not in QUALITIES:
        raise ValueError(f"quality must be one of {', '.join(QUALITIES)}, not {quality!r}")
    settings = get_settings()
    timeout = float(timeout if timeout is not None else settings.render_timeout)
    limits = limits or RenderLimits()
    work = Path(out_dir) if out_dir else _default_out_dir(source.stem)
    work.mkdir(parents=True, exist_ok=True)
    work = work.resolve()
    if not os.access(work, os.W_OK | os.X_OK):
        raise PermissionError(13, "Permission denied (not writable)", str(work))
    name = source.name if re.fullmatch(r"[A-Za-z_]\w*\.py", source.name) else "scene.py"
    if source.resolve() != work / name:
        write_text_atomic(work / name, code).chmod(0o644)
    started = time.monotonic()
    problem = syntax_problem(code)
    if problem:
        return RenderResult(ok=False, kind="scene_error", out_dir=str(work), log_tail=problem,
                            message=f"scene error: {problem}; fix the scene code")
    scenes = [scene] if scene else scene_names(code)
    if not scenes:
        return RenderResult(ok=False, kind="scene_error", out_dir=str(work),
                            message=f"scene error: {source.name} defines no Scene subclass; "
                                    "add one or pass --scene NAME")
    if os.geteuid() == 0 and _BWRAP_BIN is None:  # as root the sandbox is bubblewrap's
        return RenderResult(ok=False, kind="missing_tool", out_dir=str(work),
                            message="bubblewrap (bwrap), which builds the render sandbox, is "
                                    "not installed; install it: apt-get install bubblewrap "
                                    "(or run `make setup`)")
    cmd = manim_cmd or ([settings.manim] if settings.manim else [sys.executable, "-m", "manim"])
    python = _python_for(cmd)
    hooked = python is not None and audit_hook
    namespaced = _namespaces_work()
    stage = _make_stage(namespaced)
    # the stage on a filesystem of its own, capped in bytes and files (footprint.py); with
    # namespaces only: without them the stage must stay where `nobody` can reach it
    stage_fs = namespaced and footprint.ensure_shared(stage.parent) and \
        footprint.mount_stage_fs(stage, limits.stage_bytes, limits.stage_files)
    log_path = work / "render.log"
    try:
        return _render_staged(
            stage, work, name=name, code=code, scenes=scenes, quality=quality,
            timeout=timeout, cmd=cmd, python=python, hooked=hooked, namespaced=namespaced,
            env_extra=env_extra, limits=limits, started=started, log_path=log_path,
            progress=progress, explicit=scene is not None, layout=layout,
            layout_zooms=layout_zooms, stage_fs=stage_fs)
    finally:
        if (stage / "render.log").is_file() and not (stage / "render.log").is_symlink():
            try:
                _keep_log(stage / "render.log", log_path)
            except OSError:
                pass
        if stage_fs:  # whatever the render left there goes with its filesystem, at once
            footprint.unmount(stage)
        stage_tree.remove_tree(stage)


def _render_staged(stage: Path, work: Path, *, name: str, code: str, scenes: list[str],
                   quality: str, timeout: float, cmd: list[str], python: str | None,
                   hooked: bool, namespaced: bool, env_extra: dict[str, str] | None,
                   limits: RenderLimits, started: float, log_path: Path,
                   progress: ProgressCallback | None, explicit: bool,
                   layout: bool = False,
                   layout_zooms: list[PlannedZoom] | None = None,
                   stage_fs: bool = False) -> RenderResult:
    """The sandboxed run inside STAGE; the video (on success) is moved into WORK."""
    (stage / name).write_text(code, encoding="utf-8")
    isolation: list[str] = []
    uid, gid = _nobody()
    drop = os.geteuid() == 0 and (namespaced or (
        python is not None and all(_traversable_by_others(p) for p in
                                   [*_needed_paths(python), str(stage)])))
    inner = INNER_DIR if namespaced else str(stage)
    isolation.append("bubblewrap: allowlisted read-only view, network/PID/IPC/UTS namespaces, "
                     "private /tmp" if namespaced else
                     "no namespaces (bubblewrap missing, not root, or not permitted): the "
                     "host's tree, network and /tmp are shared")
    isolation.append("seccomp: ptrace, keyctl, unshare/setns, mount, bpf, perf_event_open, "
                     "namespace clones ... refused")
    isolation.append(f"runs as uid {uid} (nobody)" if drop else
                     "runs as the calling user: file permissions do not confine writes")
    isolation.append("renders in a private staging dir; only regular files come back")
    isolation.append(
        f"stage: a tmpfs of its own, {limits.stage_bytes >> 20} MiB and {limits.stage_files} "
        "files at most" if stage_fs else
        "stage: on the host's filesystem, no size or file-count cap (needs root and "
        "namespaces)")

    for sub in ("home", "tmp", "media"):
        (stage / sub).mkdir(exist_ok=True)
        if drop:
            _own_tree(stage / sub, uid, gid)
    # --disable_caching: every render has a fresh media dir, so manim's cache of partial movies
    # (a hash of every play's mobjects, a third of plain manim's CPU on the recorded film) can
    # never hit here; the partial movies are not copied out either (_SKIP_MEDIA)
    manim_argv = ["render", "-q", quality, "--media_dir", "media", "--progress_bar", "none",
                  "--disable_caching", "--silent", name, *scenes]
    token = uuid.uuid4().hex
    if hooked:
        worker_src = (_HERE / "sandbox_worker.py").read_text(encoding="utf-8")
        spec_worker = {"workdir": inner, "tools": TEX_TOOLS, "manim_argv": manim_argv,
                       "progress": progress is not None, "tex_env": tex_env(inner),
                       "scene_helpers": scene_helper_sources()}
        if layout:
            spec_worker.update(layout_probe=probe_source(), layout_out=f"media/{_LAYOUT_FILE}")
        spec_worker["tex_socket"] = f"{inner}/{formula_cache.SOCKET_NAME}"
        worker_cmd = [python, "-I", "-c", worker_src, json.dumps(spec_worker)]
        isolation.append("audit hook: no writes outside DIR, no processes but latex/dvisvgm, "
                         "no sockets, no ctypes")
    else:
        worker_cmd = [shutil.which(cmd[0]) or cmd[0], *cmd[1:], *manim_argv]
        isolation.append("no audit hook (custom manim command or audit_hook=False)")

    cpu = int(timeout) + 5
    spec = {"namespaced": namespaced, "inner": inner, "tmp_size": TMP_SIZE,
            "uid": uid if drop else None, "gid": gid if drop else None,
            "worker_cmd": worker_cmd,
            "limits": {"AS": limits.memory_bytes, "CPU": [cpu, cpu + 5],
                       "FSIZE": limits.file_bytes, "CORE": 0, "NOFILE": limits.open_files,
                       **({"NPROC": limits.processes} if drop else {})}}
    launcher = sandbox_launcher(spec, python or sys.executable, [(str(stage), inner)])
    stage_log = stage / "render.log"
    relay = _ProgressRelay(progress, stage_log, timeout)
    relay.say(f"render: starting the sandboxed manim (-q {quality}, timeout {timeout:.0f}s)")
    warm = hooked and namespaced and drop and python == sys.executable and \
        render_pool.warm_enabled()
    if warm:
        isolation.append("warm worker: manim imported once by the worker (root, runs no "
                         "scene code); this render forked from it into mount/IPC/PID "
                         "namespaces of its own, fresh tmpfs, limits and user")
    formulas = formula_cache.serving(stage, _child_env(inner, token, env_extra)) if hooked \
        else contextlib.nullcontext()
    group = _render_group(stage.name, limits) if namespaced else None
    isolation.append(
        f"cgroup: the whole tree's memory (shared memory, memfds and the stage counted) "
        f"{limits.tree_memory_bytes >> 20} MiB, {limits.processes} processes"
        if group is not None and group.active else
        "no cgroup (needs root and the cgroup v1 memory and pids controllers): per-process "
        "rlimits only")
    try:
        with formulas as service:
            if service is not None:
                isolation.append("formula cache: LaTeX compiled outside the scene's process, "
                                 "in a sandbox of its own, once per formula and template")
            cpu_s = None  # measured by a warm worker only
            if warm:
                returncode, timed_out, cpu_s = _run_warm(
                    stage, spec, spec_worker, inner, token, env_extra, timeout, relay.poll,
                    group=group, stage_fs=stage_fs)
            else:
                returncode, timed_out = _run(launcher, stage,
                                             _child_env(inner, token, env_extra), stage_log,
                                             timeout, relay.poll,
                                             preexec=group.join if group and group.active
                                             else None)
    finally:
        leftovers = _sweep(token)
        peak, over_memory, over_pids = None, False, False
        if group is not None:
            peak = group.peak_bytes()
            over_memory, over_pids = group.memory_limit_hit(), group.pids_limit_hit()
            group.close()
    if leftovers:
        isolation.append(f"killed {leftovers} leftover process(es) after the render")
    if drop:
        for sub in ("home", "tmp", "media"):
            _own_tree(stage / sub, os.getuid(), os.getgid(), only_from=uid)
    log = stage_tree.read_tail(stage_log)  # bounded: the scene may have printed GiBs
    log = "\n".join(ln for ln in log.split("\n") if not ln.startswith("mythloop-progress: "))
    # manim renders the file's only scene when the one asked for is missing: not that one
    found = _find_outputs(stage, scenes, exact=explicit) if returncode == 0 else {}
    kind, message = classify(
        returncode=returncode, timed_out=timed_out, timeout=timeout,
        video=bool(found) and len(found) == len(scenes), log=log, scene_file=name,
        limits_text=f"memory {limits.memory_bytes >> 20} MiB, CPU {cpu}s, "
                    f"file size {limits.file_bytes >> 20} MiB, stage "
                    f"{limits.stage_bytes >> 20} MiB / {limits.stage_files} files")
    full = stage_fs and footprint.stage_full(stage)
    if kind != "ok" and not timed_out and (over_memory or over_pids or full):
        what = (f"the memory of its whole process tree ({limits.tree_memory_bytes >> 20} MiB, "
                "shared memory and the stage's files counted)" if over_memory else
                f"its process count ({limits.processes})" if over_pids else
                f"its stage ({limits.stage_bytes >> 20} MiB, {limits.stage_files} files)")
        kind, message = "resource_limit", (f"resource limit: the render exceeded {what}; "
                                           "render less at once (smaller or fewer objects)")
    if kind != "ok" and procs.STOPPING.is_set():  # stopped by Ctrl-C / SIGTERM, not the scene
        kind, message = "interrupted", ("render interrupted (Ctrl-C or SIGTERM) before it "
                                        "finished; not a scene error: rerun to render it")
    # what the parent does with the outputs ends AFTER_RENDER_S past the render's timeout
    after = started + timeout + AFTER_RENDER_S
    if kind == "ok":  # each output checked and remade by the parent before anything reads it
        taken, refused = intake.take_over(list(found.values()), quality=quality,
                                          max_bytes=limits.file_bytes, namespaced=namespaced,
                                          deadline=after)
        if taken != "ok":  # refused: nothing handed over; the reason ends the log tail too
            kind, message, found, log = taken, refused, {}, f"{log}\n{refused}"
    ordered = [(scene, found[scene]) for scene in scenes if scene in found]
    findings = _layout_findings(stage / "media" / _LAYOUT_FILE, layout_zooms,
                                ordered[-1][1] if ordered else None, deadline=after) \
        if layout and hooked and kind == "ok" else None  # no probe without the hooked worker
    placed = _hand_over_media(stage, work, [p for _, p in ordered]) if kind == "ok" else []
    outputs = [RenderOutput(scene=scene, kind="video" if src.suffix == ".mp4" else "image",
                            path=str(dst)) for (scene, src), dst in zip(ordered, placed,
                                                                         strict=True)]
    last = outputs[-1] if outputs else None
    seconds = round(time.monotonic() - started, 2)
    relay.say(f"render: {'done' if kind == 'ok' else kind} after {seconds:.0f}s")
    return RenderResult(
        ok=kind == "ok", kind=kind,
        video_path=last.path if last and last.kind == "video" else None,
        image_path=last.path if last and last.kind == "image" else None, outputs=outputs,
        log_tail=log[-8000:], returncode=returncode,
        seconds=seconds, cpu_s=cpu_s, message=message, out_dir=str(work),
        log_path=str(log_path), isolation=isolation, render_id=token,
        peak_memory_bytes=peak, layout_findings=findings)


def _render_group(name: str, limits: RenderLimits) -> footprint.Cgroup | None:
    """The render's own memory and pids groups (footprint.py), or None where there are none.
    Groups that could be made but not limited fail the render (OSError): never a render
    without the budget it was promised."""
    if not footprint.controllers():
        return None
    footprint.remove_stale_groups(procs.pid_alive)
    return footprint.Cgroup(name, memory_bytes=limits.tree_memory_bytes,
                            processes=limits.processes)


def prewarm(count: int) -> int:
    """Start up to COUNT warm render workers now, so that their manim import overlaps what
    the caller does before its first render (a film: the Prefect server's start, the stages).

    The workers are those a render would start (the same pool key), so the first renders take
    them; how many are starting is returned, 0 where renders use no warm workers (no
    bubblewrap, not root, a custom manim command, MYTHLOOP_WARM_WORKERS=0).
    """
    settings = get_settings()
    if count < 1 or settings.manim or not render_pool.warm_enabled() or os.geteuid() != 0 \
            or _BWRAP_BIN is None or not _namespaces_work():
        return 0
    uid, gid = _nobody()
    base = settings.state_root / "render-stage"  # where _make_stage puts every stage
    base.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        base.chmod(0o700)
    spec = {"namespaced": True, "inner": INNER_DIR, "tmp_size": TMP_SIZE, "uid": uid,
            "gid": gid}
    footprint.ensure_shared(base.resolve())  # before any worker binds it (footprint.py)
    pool = render_pool.get_pool(base=base.resolve(), spec=spec,
                                env=_child_env(INNER_DIR, "warm-pool", None),
                                log_dir=settings.state_root / "logs")
    before = len(pool.workers())
    pool.prestart(count)
    return max(0, len(pool.workers()) - before)


def _layout_findings(record_path: Path, zooms: list[PlannedZoom] | None = None,
                     output: Path | None = None, *,
                     deadline: float | None = None) -> list[Finding]:
    """The layout verdict (layout_frames.judge): the probe's record, read as hostile data
    (size cap, strict schema), held against OUTPUT's frames decoded in a sandbox of their
    own; a record or video that cannot be used is a finding, never an exception."""
    return layout_frames.judge(record_path, output, zooms, deadline=deadline)


def _run_warm(stage: Path, spec: dict, spec_worker: dict, inner: str, token: str,
              env_extra: dict[str, str] | None, timeout: float,
              poll: Callable[[], None], *, group: footprint.Cgroup | None = None,
              stage_fs: bool = False) -> tuple[int | None, bool, float | None]:
    """The render through a warm worker (render_pool): (exit status, timed out, CPU
    seconds); a worker lost mid-render fails this render alone, with a line in its log
    saying so."""
    log = stage / "render.log"
    log.touch(mode=0o644)
    pool_spec = {k: spec[k] for k in ("namespaced", "inner", "tmp_size", "uid", "gid")}
    pool = render_pool.get_pool(base=stage.parent, spec=pool_spec,
                                env=_child_env(inner, "warm-pool", None),
                                log_dir=get_settings().state_root / "logs")
    request = {"job": stage.name, "timeout": timeout, "limits": spec["limits"],
               "env": _child_env(inner, token, env_extra), "worker": spec_worker,
               "cgroups": group.inner_names() if group is not None else {},
               "stage_fs": stage_fs}
    try:
        return pool.render(request, timeout, poll)
    except render_pool.WorkerLost as exc:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"\nrender stopped: {exc}\n" if procs.STOPPING.is_set() else
                     f"\nRenderWorkerError: {exc}; the render was lost with its worker "
                     "(only this render fails; the worker is replaced)\n")
        return None, False, None


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path,
         timeout: float, poll: Callable[[], None] | None = None,
         preexec: Callable[[], None] | None = None) -> tuple[int | None, bool]:
    """Run CMD in its own session; at TIMEOUT SIGTERM its group, then SIGKILL after a grace.

    POLL (if given) is called about twice a second while it runs; PREEXEC runs in the child
    before the exec (joining the render's cgroups). An exception here (a Ctrl-C in the
    caller) kills the group before it propagates: nothing outlives the call.
    """
    with open(log_path, "wb") as log:
        try:
            proc = procs.start_session(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT, close_fds=True,
                                       preexec_fn=preexec)
        except FileNotFoundError as exc:
            log.write(f"No such file or directory: '{exc.filename}'\n".encode())
            return 127, False
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    code = proc.wait(timeout=min(left, 0.5))
                except subprocess.TimeoutExpired:
                    if poll:
                        poll()
                    if procs.STOPPING.is_set():  # Ctrl-C / SIGTERM: the render goes now
                        procs.stop_group(proc, first=signal.SIGTERM, grace=1, kill_wait=None)
                        return proc.returncode, False
                    continue
                if poll:
                    poll()
                return code, False
            procs.stop_group(proc, first=signal.SIGTERM, grace=3, kill_wait=None)
            return proc.returncode, True
        except BaseException:
            procs.signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
