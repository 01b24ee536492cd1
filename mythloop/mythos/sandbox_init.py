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
Without namespaces (fallback) it does steps 3-4 only. Stdlib only: the
mythloop package is not imported here.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import signal
import stat
import sys

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


def build_view(spec: dict) -> None:
    """Private mounts: tmpfs over world-writable and untraversable dirs, render dir bound in."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    work_fd = os.open(spec["workdir_real"], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    needed = [p for p in spec["needed"] if os.path.exists(p)]
    inner_parent = os.path.dirname(spec["inner"])
    shadowed = set()
    for directory in _world_writable_dirs() + [inner_parent]:
        if directory in shadowed or any(directory.startswith(s + "/") for s in shadowed):
            continue
        _shadow(directory, _children_under(directory, needed), 0o1777, spec["tmp_size"])
        shadowed.add(directory)
    os.makedirs(spec["inner"], 0o755, exist_ok=True)
    _mount(f"/proc/self/fd/{work_fd}", spec["inner"], None, MS_BIND | MS_REC)
    os.close(work_fd)
    if spec.get("uid") is None:
        return
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


def _become_worker(spec: dict) -> None:
    """In the forked child: limits, drop privileges, then exec the worker command."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    _apply_limits(spec["limits"])
    if spec.get("uid") is not None:
        os.setgroups([])
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(spec["inner"])
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


def main() -> int:
    spec = json.loads(sys.argv[1])
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
