"""Sandboxed Manim render of untrusted scene code (the second sandbox layer).

`render_scene` copies the scene into DIR and runs manim there through
sandbox_init.py (fresh network/mount/PID namespaces, private /tmp, the
unprivileged `nobody` user, rlimits) and sandbox_worker.py (an audit hook),
with a scrubbed environment, in its own session, killed with its process group
at the deadline. It contains hostile code even when `verify` was skipped. What
each layer stops, and what it cannot, is in docs/sandbox.md.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, Field

from mythloop.mythos.safe_ast import parse
from mythloop.mythos.sandbox_classify import classify
from mythloop.settings import get_settings

__all__ = ["RenderLimits", "RenderResult", "render_scene", "scene_names", "QUALITIES"]

QUALITIES = ("l", "m", "h", "p", "k")
INNER_DIR = "/tmp/mythloop-render"  # where the render dir appears inside the namespaces
TEX_TOOLS = ["latex", "pdflatex", "xelatex", "lualatex", "dvisvgm"]
_HERE = Path(__file__).resolve().parent
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
# The sandbox's own tool, looked up on the system path: a user's PATH (which the scene
# inherits, e.g. one without LaTeX) must not decide whether the sandbox can be built.
_SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_UNSHARE_BIN = shutil.which("unshare", path=_SYSTEM_PATH) or "unshare"
_UNSHARE = [_UNSHARE_BIN, "--net", "--mount", "--pid", "--ipc", "--uts", "--fork",
            "--kill-child", "--mount-proc"]


class RenderResult(BaseModel):
    """Outcome of one sandboxed render; `message` is the one line to show a user."""

    ok: bool
    kind: str = Field(description="ok | scene_error | timeout | resource_limit | missing_tool")
    video_path: str | None = None
    log_tail: str = ""
    returncode: int | None = None
    seconds: float = 0.0
    message: str = ""
    out_dir: str = ""
    log_path: str | None = None
    isolation: list[str] = Field(default_factory=list)
    """Which sandbox layers were active, and notes on any that were not."""
    render_id: str = ""
    """MYTHLOOP_RENDER_ID given to the child (its processes carry it in their environment)."""


class RenderLimits(BaseModel):
    """Hard rlimits for the render (CPU time follows the timeout)."""

    memory_bytes: int = 4 << 30
    file_bytes: int = 512 << 20
    processes: int = 512
    open_files: int = 1024


def scene_names(code: str) -> list[str]:
    """Scene classes defined in CODE (subclasses of *Scene, directly or via each other)."""
    try:
        tree = parse(code)
    except SyntaxError:
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


@functools.cache
def _namespaces_work() -> bool:
    """True when `unshare` can make the namespaces here (root, util-linux, permitted)."""
    if os.geteuid() != 0 or not os.path.isabs(_UNSHARE_BIN):
        return False
    try:
        return subprocess.run([*_UNSHARE, "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


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
    """Only PATH, LANG and dirs inside the render dir; never anything secret-looking."""
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
    for key, value in (env_extra or {}).items():
        if not _SECRET_NAME.search(key):
            env[key] = value
    return env


def _own_tree(root: Path, uid: int, gid: int, only_from: int | None = None) -> None:
    """lchown ROOT's tree (never following links; only files owned by ONLY_FROM if set)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames, None]:
            target = os.path.join(dirpath, name) if name else dirpath
            try:
                st = os.lstat(target)
                if only_from is None or (st.st_uid == only_from and
                                         (os.path.isdir(target) or st.st_nlink == 1)):
                    os.chown(target, uid, gid, follow_symlinks=False)
            except OSError:
                continue


def _sweep(token: str) -> int:
    """SIGKILL any process still carrying this render's id in its environment."""
    needle = f"MYTHLOOP_RENDER_ID={token}".encode()
    killed = 0
    for _ in range(5):
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    if needle in Path(f"/proc/{entry}/environ").read_bytes():
                        found.append(int(entry))
                except OSError:
                    continue
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        time.sleep(0.2)
    return killed


def _find_video(out_dir: Path, scenes: list[str]) -> Path | None:
    """The newest mp4 for the last requested scene under OUT_DIR/media/videos."""
    media = out_dir / "media" / "videos"
    candidates = [p for p in media.rglob("*.mp4") if "partial_movie_files" not in p.parts
                  and p.is_file() and not p.is_symlink()
                  and p.resolve().is_relative_to(out_dir.resolve())] if media.is_dir() else []
    for name in reversed(scenes):
        named = [p for p in candidates if p.stem == name]
        if named:
            return max(named, key=lambda p: p.stat().st_mtime).resolve()
    return max(candidates, key=lambda p: p.stat().st_mtime).resolve() if candidates else None


def _default_out_dir(stem: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return get_settings().state_root / "renders" / f"{stamp}-{stem}-{uuid.uuid4().hex[:6]}"


def render_scene(file: str | os.PathLike, *, scene: str | None = None, quality: str = "l",
                 timeout: float | None = None, out_dir: str | os.PathLike | None = None,
                 manim_cmd: list[str] | None = None, env_extra: dict[str, str] | None = None,
                 limits: RenderLimits | None = None, audit_hook: bool = True) -> RenderResult:
    """Render FILE's scene inside the sandbox; the mp4 lands under OUT_DIR/media/videos.

    `audit_hook=False` leaves out the Python-level guard (tests use it to show the
    OS layers contain hostile code on their own).
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
    name = source.name if re.fullmatch(r"[A-Za-z_]\w*\.py", source.name) else "scene.py"
    if source.resolve() != work / name:
        (work / name).write_text(code, encoding="utf-8")
    scenes = [scene] if scene else scene_names(code)
    started = time.monotonic()
    if not scenes:
        return RenderResult(ok=False, kind="scene_error", out_dir=str(work),
                            message=f"scene error: {source.name} defines no Scene subclass; "
                                    "add one or pass --scene NAME")
    cmd = manim_cmd or ([settings.manim] if settings.manim else [sys.executable, "-m", "manim"])
    python = _python_for(cmd)
    hooked = python is not None and audit_hook
    isolation: list[str] = []
    namespaced = _namespaces_work()
    uid, gid = _nobody()
    drop = os.geteuid() == 0 and (namespaced or (
        python is not None and all(_traversable_by_others(p) for p in
                                   [*_needed_paths(python), str(work)])))
    inner = INNER_DIR if namespaced else str(work)
    isolation.append("network/mount/pid namespaces, private /tmp" if namespaced else
                     "no namespaces (unshare unavailable or not permitted): network and "
                     "/tmp are shared")
    isolation.append(f"runs as uid {uid} (nobody)" if drop else
                     "runs as the calling user: file permissions do not confine writes")
    for sub in ("home", "tmp", "media"):
        (work / sub).mkdir(exist_ok=True)
        if drop:
            _own_tree(work / sub, uid, gid)
    manim_argv = ["render", "-q", quality, "--media_dir", "media", "--progress_bar", "none",
                  "--silent", name, *scenes]
    token = uuid.uuid4().hex
    if hooked:
        worker_src = (_HERE / "sandbox_worker.py").read_text(encoding="utf-8")
        spec_worker = {"workdir": inner, "tools": TEX_TOOLS, "manim_argv": manim_argv}
        worker_cmd = [python, "-I", "-c", worker_src, json.dumps(spec_worker)]
        isolation.append("audit hook: no writes outside DIR, no processes but latex/dvisvgm, "
                         "no sockets, no ctypes")
    else:
        worker_cmd = [shutil.which(cmd[0]) or cmd[0], *cmd[1:], *manim_argv]
        isolation.append("no audit hook (custom manim command or audit_hook=False)")

    cpu = int(timeout) + 5
    spec = {"namespaced": namespaced, "workdir_real": str(work), "inner": inner,
            "needed": _needed_paths(python or sys.executable), "tmp_size": "256m",
            "uid": uid if drop else None, "gid": gid if drop else None,
            "worker_cmd": worker_cmd,
            "limits": {"AS": limits.memory_bytes, "CPU": [cpu, cpu + 5],
                       "FSIZE": limits.file_bytes, "CORE": 0, "NOFILE": limits.open_files,
                       **({"NPROC": limits.processes} if drop else {})}}
    launcher = [sys.executable, "-I", str(_HERE / "sandbox_init.py"), json.dumps(spec)]
    if namespaced:  # absolute: the child's PATH (env_extra) may not hold unshare
        launcher = [*_UNSHARE, "--", *launcher]
    log_path = work / "render.log"
    returncode, timed_out = _run(launcher, work, _child_env(inner, token, env_extra),
                                 log_path, timeout)
    leftovers = _sweep(token)
    if leftovers:
        isolation.append(f"killed {leftovers} leftover process(es) after the render")
    if drop:
        for sub in ("home", "tmp", "media"):
            _own_tree(work / sub, os.getuid(), os.getgid(), only_from=uid)
    log = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
    video = _find_video(work, scenes) if returncode == 0 else None
    kind, message = classify(
        returncode=returncode, timed_out=timed_out, timeout=timeout, video=video is not None,
        log=log, scene_file=name,
        limits_text=f"memory {limits.memory_bytes >> 20} MiB, CPU {cpu}s, "
                    f"file size {limits.file_bytes >> 20} MiB")
    return RenderResult(
        ok=kind == "ok", kind=kind, video_path=str(video) if kind == "ok" else None,
        log_tail=log[-8000:], returncode=returncode,
        seconds=round(time.monotonic() - started, 2), message=message, out_dir=str(work),
        log_path=str(log_path), isolation=isolation, render_id=token)


def _run(cmd: list[str], cwd: Path, env: dict[str, str], log_path: Path,
         timeout: float) -> tuple[int | None, bool]:
    """Run CMD in its own session; at TIMEOUT SIGTERM its group, then SIGKILL after a grace."""
    with open(log_path, "wb") as log:
        try:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, close_fds=True)
        except FileNotFoundError as exc:
            log.write(f"No such file or directory: '{exc.filename}'\n".encode())
            return 127, False
        try:
            return proc.wait(timeout=timeout), False
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                pass
            _kill_group(proc, signal.SIGKILL)
            proc.wait()
            return proc.returncode, True


def _kill_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
