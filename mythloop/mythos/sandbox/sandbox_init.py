"""First process of a sandboxed render: builds the filesystem view, then runs the worker.

Run by render.py as ``python -I sandbox_init.py <spec json>``, normally as PID 1
of fresh network/mount/PID/IPC/UTS namespaces made by ``unshare`` (root only).
There it
  1. puts private tmpfs over /tmp and the other world-writable dirs, and over
     every directory the unprivileged worker could not traverse on the way to
     the interpreter (e.g. /root), bind-mounting back only what it needs;
  2. bind-mounts the render dir at a fixed path inside the private /tmp;
  3. forks the worker: rlimits, no_new_privs, drop to `nobody`, exec python;
  4. reaps every process until the worker is gone, kills what is left, and
     exits with the worker's status (128+N when a signal N ended it).
Without namespaces (fallback) it does steps 3-4 only. Standard library only: the
mythloop package is not imported here (an import contract in pyproject.toml checks it). With ``"serve": true`` in the spec it is
a warm worker instead (render_pool.py): it imports manim once and forks each
render from itself (see `serve`).
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import select
import signal
import stat
import sys
import threading
import time
import traceback

MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 38, 36
_WORLD_WRITABLE_CANDIDATES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue",
                              "/var/crash", "/run/shm")

_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    """mount(2), raising OSError on failure."""
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _shadow(directory: str, keep: set[str], mode: int, size: str) -> None:
    """Cover DIRECTORY with an empty tmpfs, then bind-mount the KEEP entries back."""
    fds = []
    for name in sorted(keep):
        path = os.path.join(directory, name)
        fds.append((name, os.open(path, os.O_PATH | os.O_CLOEXEC), os.path.isdir(path)))
    _mount("tmpfs", directory, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode:o},size={size}")
    for name, fd, is_dir in fds:
        target = os.path.join(directory, name)
        if is_dir:
            os.mkdir(target, 0o755)
        else:
            open(target, "w").close()
        _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
        os.close(fd)


def _children_under(directory: str, paths: list[str]) -> set[str]:
    """First path component below DIRECTORY of each of PATHS that lies under it."""
    prefix = directory.rstrip("/") + "/"
    return {p[len(prefix):].split("/", 1)[0] for p in paths if p.startswith(prefix)}


def _world_writable_dirs() -> list[str]:
    """World-writable directories at the top two levels of / plus the usual suspects."""
    found = {d for d in _WORLD_WRITABLE_CANDIDATES if _is_world_writable_dir(d)}
    for top in os.scandir("/"):
        if top.name in ("proc", "sys", "dev") or not top.is_dir(follow_symlinks=False):
            continue
        if _is_world_writable_dir(top.path):
            found.add(top.path)
            continue
        try:
            for sub in os.scandir(top.path):
                if sub.is_dir(follow_symlinks=False) and _is_world_writable_dir(sub.path):
                    found.add(sub.path)
        except OSError:
            continue
    return sorted(found, key=lambda d: (d.count("/"), d))


def _is_world_writable_dir(path: str) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and bool(st.st_mode & stat.S_IWOTH)


def _first_blocked(path: str) -> tuple[str, str] | None:
    """The first directory on PATH that others cannot traverse, and the child needed in it."""
    parts = [p for p in path.split("/") if p]
    current = "/"
    for part in parts:
        try:
            st = os.stat(current)
        except OSError:
            return None
        if not st.st_mode & stat.S_IXOTH:
            return current, part
        current = os.path.join(current, part)
    return None


def build_view(spec: dict) -> list[tuple[str, set[str]]]:
    """Private mounts: tmpfs over world-writable and untraversable dirs, render dir bound in
    (none in serve mode: each render binds its own). Returns the world-writable dirs
    covered, with what was bound back in each (a warm worker covers them again per render)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    work_fd = os.open(spec["workdir_real"], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) \
        if spec.get("workdir_real") else None
    needed = [p for p in spec["needed"] if os.path.exists(p)]
    inner_parent = os.path.dirname(spec["inner"])
    shadowed: list[tuple[str, set[str]]] = []
    for directory in _world_writable_dirs() + [inner_parent]:
        if any(directory == d or directory.startswith(d + "/") for d, _ in shadowed):
            continue
        keep = _children_under(directory, needed)
        _shadow(directory, keep, 0o1777, spec["tmp_size"])
        shadowed.append((directory, keep))
    if work_fd is not None:
        os.makedirs(spec["inner"], 0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{work_fd}", spec["inner"], None, MS_BIND | MS_REC)
        os.close(work_fd)
    if spec.get("uid") is not None:
        _shadow_untraversable(needed)
    return shadowed


def _shadow_untraversable(needed: list[str]) -> None:
    """tmpfs over each dir the unprivileged worker cannot traverse on the way to NEEDED."""
    for _ in range(16):  # nested blocked dirs: /root, then maybe /root/x/y
        blocked: dict[str, set[str]] = {}
        for path in needed:
            hit = _first_blocked(path)
            if hit:
                blocked.setdefault(hit[0], set()).add(hit[1])
        if not blocked:
            return
        for directory, keep in blocked.items():
            if directory == "/":
                raise OSError(13, "/ is not traversable by the unprivileged user")
            _shadow(directory, keep, 0o755, "1m")


def _apply_limits(limits: dict) -> None:
    """Hard rlimits, set while still privileged so the worker cannot raise them."""
    for name, value in limits.items():
        res = getattr(resource, f"RLIMIT_{name}")
        soft, hard = value if isinstance(value, list) else (value, value)
        resource.setrlimit(res, (soft, hard))


def _drop(spec: dict, limits: dict) -> None:
    """Limits, then the unprivileged user, no_new_privs, and the render dir as cwd."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    _apply_limits(limits)
    if spec.get("uid") is not None:
        os.setgroups([])
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(spec["inner"])


def _become_worker(spec: dict) -> None:
    """In the forked child: limits, drop privileges, then exec the worker command."""
    _drop(spec, spec["limits"])
    cmd = spec["worker_cmd"]
    os.execv(cmd[0], cmd)


def _reap(worker: int) -> int:
    """Wait for the worker, reaping orphans; then kill and reap whatever remains."""
    status = 0
    while True:
        try:
            pid, st = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == worker:
            status = st
            break
    _kill_descendants()
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _kill_descendants() -> None:
    """SIGKILL our remaining children (orphans re-parented to us) until none is left."""
    me = os.getpid()
    for _ in range(50):
        children = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me:
                children.append(int(entry))
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return


# --- serve mode: a warm worker ------------------------------------------------------------
# The same PID 1, but it imports manim once (trusted code, as root, before any scene runs)
# and then forks one child per render request read from stdin. The child gets a mount and
# IPC namespace of its own, fresh tmpfs over every world-writable dir, its own staging dir
# bound at the render path, its limits, drops to `nobody` and runs manim under the audit
# hook; when it ends, everything else in the PID namespace is killed. PID 1 never runs scene
# code and is not reachable by `nobody`, so each render starts from the state manim had
# right after import. Protocol: one JSON line per request, one JSON line per reply.

CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
_JOB_NAME = re.compile(r"mythloop-stage-\d+-\w+")
_KILL_GRACE = 3.0
_POOL_BASE = "/tmp/.mythloop-pool-base"  # in the worker's own /tmp tmpfs, mode 700


def _read_line(fd: int, limit: int = 1 << 20) -> bytes | None:
    """One line from FD, unbuffered (so nothing read ahead reaches a forked render)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            return None
        data += chunk
        if len(data) > limit:
            return None
    return data


def _reply(message: dict) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _enter_render(job: dict, spec: dict, fresh: list, worker: dict) -> None:
    """In the forked child (root): a private view for this render, then drop and run."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    if _libc.unshare(CLONE_NEWNS | CLONE_NEWIPC) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    # opened by path in this namespace (a bind needs a source mount of our own namespace)
    stage_fd = os.open(os.path.join(_POOL_BASE, job["job"]),
                       os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    for directory, keep in fresh:  # nothing a previous render left in /tmp & co. is seen
        _shadow(directory, set(keep), 0o1777, spec["tmp_size"])
    os.makedirs(spec["inner"], 0o755, exist_ok=True)
    _mount(f"/proc/self/fd/{stage_fd}", spec["inner"], None, MS_BIND | MS_REC)
    log = os.open(os.path.join(spec["inner"], "render.log"),
                  os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.closerange(3, 65536)  # the staging base, the control pipe: none reaches the scene
    _drop(spec, job["limits"])
    os.environ.clear()
    os.environ.update(job["env"])
    worker["run"](job["worker"])


def _run_render(job: dict, spec: dict, fresh: list, worker: dict) -> dict:
    """Fork the render, wait for it (killing everything at its deadline), clean up."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _enter_render(job, spec, fresh, worker)
            code = 0
        except SystemExit as exc:  # manim's own exit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # noqa: BLE001 - the render's error goes to its log
            traceback.print_exc()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    deadline = time.monotonic() + float(job["timeout"])
    status, timed_out, killed_at, lost = None, False, None, False
    while status is None:
        try:
            wpid, st = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if wpid == pid:
            status = st
            continue
        if wpid:
            continue  # an orphan of the render, reaped
        if not lost and select.select([0], [], [], 0)[0] and not os.read(0, 1):
            lost = True  # the parent is gone: end the render now
            killed_at = time.monotonic()
            _kill_descendants()
        now = time.monotonic()
        if now >= deadline and killed_at is None:
            timed_out, killed_at = True, now
            _signal_all(signal.SIGTERM)
        elif killed_at is not None and now - killed_at >= _KILL_GRACE:
            _kill_descendants()
        time.sleep(0.02)
    _kill_descendants()
    if lost:
        raise SystemExit(0)
    if status is None:
        code = 1
    elif os.WIFSIGNALED(status):
        code = 128 + os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
    return {"job": job["job"], "status": code, "timed_out": timed_out}


def _signal_all(sig: int) -> None:
    """SIG to every other process of this PID namespace (all are ours to stop)."""
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != me:
            try:
                os.kill(int(entry), sig)
            except (ProcessLookupError, PermissionError):
                pass


def serve(spec: dict) -> int:
    """The warm worker's PID 1: build the view, import manim, render request after request."""
    base_fd = os.open(spec["base_real"], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fresh = build_view(spec)
    except OSError as exc:
        print(f"sandbox: cannot build the private filesystem view: {exc}", file=sys.stderr)
        return 125
    # the staging base, reachable for root only, under the private /tmp of this worker
    os.mkdir(_POOL_BASE, 0o700)
    _mount(f"/proc/self/fd/{base_fd}", _POOL_BASE, None, MS_BIND | MS_REC)
    os.close(base_fd)
    os.chdir("/")
    worker: dict = {"__name__": "sandbox_worker"}
    with open(spec["worker_file"], encoding="utf-8") as fh:  # trusted mythloop source
        exec(compile(fh.read(), spec["worker_file"], "exec"), worker)  # noqa: S102
    worker["prepare"]()
    if threading.active_count() != 1:  # forking a threaded process is not safe
        print("sandbox: manim started threads; cannot serve warm renders", file=sys.stderr)
        return 124
    def _stop(*_: object) -> None:
        _kill_descendants()
        os._exit(0)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    _reply({"ready": True})
    while True:
        line = _read_line(0)
        if line is None:
            _kill_descendants()
            return 0
        try:
            job = json.loads(line)
            if not _JOB_NAME.fullmatch(str(job.get("job", ""))):
                raise ValueError("bad job name")
        except ValueError as exc:
            _reply({"error": f"bad request: {exc}"})
            continue
        _reply(_run_render(job, spec, fresh, worker))


def main() -> int:
    spec = json.loads(sys.argv[1])
    if spec.get("serve"):
        return serve(spec)
    if spec.get("namespaced"):
        try:
            build_view(spec)
        except OSError as exc:
            print(f"sandbox: cannot build the private filesystem view: {exc}", file=sys.stderr)
            return 125
    else:
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # orphans come back to us
    pid = os.fork()
    if pid == 0:
        try:
            _become_worker(spec)
        except BaseException as exc:  # noqa: BLE001 - report any setup failure, then die
            print(f"sandbox: cannot start the worker: {exc}", file=sys.stderr)
        os._exit(126)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: os.kill(pid, signal.SIGKILL))
    return _reap(pid)


if __name__ == "__main__":
    sys.exit(main())
