"""One render's footprint, bounded as a whole: memory, processes, its stage's bytes and inodes.

rlimits bound each process of a render alone (4 GiB of address space each), so four processes
could use 16 GB together, and memory that no address space counts (memfds, /dev/shm, the
files it writes into a tmpfs) escaped them entirely. Here each render gets

- **a cgroup of its own** under the v1 `memory` and `pids` controllers
  (`/sys/fs/cgroup/memory/mythloop/<stage>`, `.../pids/mythloop/<stage>`): the memory limit
  counts every page its processes touch (anonymous memory, shared memory, memfds, tmpfs and
  page cache), `memsw` the same with swap, `pids.max` every process and thread. A cold
  render's bubblewrap joins it before it starts; a warm render's child joins it in its
  worker before it forks the render (the worker sees the `mythloop` groups through a bind,
  render_pool.py). When the limit is hit the kernel's OOM killer ends a process of the
  render (a warm render's processes are its preferred victims), never anything outside it.
- **a stage on a filesystem of its own**: a tmpfs mounted on the staging dir with a size and
  an inode cap (`size=`, `nr_inodes=`), so a render fills neither the host's disk nor its
  inode table; its pages are charged to the render's cgroup (the render writes them).
  A warm worker sees the mount through the staging base, which is a shared mount
  (`ensure_shared`), so mounts made on the host after the worker started reach it.

Both need root and the cgroup v1 controllers (as on the machine this was built on); where
either is missing the render runs with its rlimits alone and `RenderResult.isolation` says so.
docs/sandbox.md has the table of limits.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import functools
import os
import re
import signal
import threading
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

from mythloop import procs

__all__ = ["Cgroup", "CGROUP_ROOT", "CGROUP_INNER", "controllers", "mount_stage_fs",
           "unmount", "ensure_shared", "is_mount_point", "remove_stale_groups", "stage_full", "problem"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP = "mythloop"  # the parent group, under each controller, of every render's group
CONTROLLERS = ("memory", "pids")
CGROUP_INNER = "/tmp/.mythloop-cgroups"  # where a warm worker sees the `mythloop` groups
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,200}")
MNT_DETACH = 2
MS_BIND, MS_REC, MS_SHARED, MS_NOSUID, MS_NODEV = 4096, 16384, 1 << 20, 2, 4
_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int,
           data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return text.encode() if text is not None else None

    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {target}: {os.strerror(err)}")


def unmount(path: str | os.PathLike) -> bool:
    """Detach the mount at PATH (lazily: open files keep it until closed); True when one was."""
    return _libc.umount2(os.fsencode(os.fspath(path)), MNT_DETACH) == 0


def _mountinfo() -> list[list[str]]:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            return [line.split() for line in fh]
    except OSError:
        return []


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def is_mount_point(path: str | os.PathLike, shared: bool = False) -> bool:
    """True when PATH is itself a mount point (and, with SHARED, one of a peer group)."""
    target = os.path.realpath(path)
    for fields in _mountinfo():
        if len(fields) > 6 and _unescape(fields[4]) == target:
            optional = fields[6:fields.index("-")] if "-" in fields else []
            if not shared or any(opt.startswith("shared:") for opt in optional):
                return True
    return False


def mount_stage_fs(stage: Path, size_bytes: int, inodes: int) -> bool:
    """Mount a tmpfs on STAGE (an empty folder) with SIZE_BYTES and INODES caps; mode 0755,
    root-owned, no devices or setuid. False where it cannot be done (not root, no tmpfs)."""
    if os.geteuid() != 0:
        return False
    try:
        _mount("tmpfs", str(stage), "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={max(size_bytes, 1 << 20)},nr_inodes={max(inodes, 64)},mode=0755")
    except OSError:
        return False
    return True


_SHARED_LOCK = threading.Lock()
_SHARED: dict[str, int] = {}  # base -> the descriptor holding its lock file's shared lock
_CLOSED: set[str] = set()  # bases released at exit: never bound again by this process


def ensure_shared(base: Path) -> bool:
    """Make BASE a shared mount (a bind of itself), so a stage mounted under it later also
    appears in the warm workers that bound BASE before. False where it cannot be done.

    Every process using it holds a shared flock on `<base>.lock` for its life; at exit the
    last one (the one that gets the lock exclusively) detaches the bind, so the state dir
    is an ordinary folder again, and a process that exits never takes the bind away from
    another one's workers. Taking the lock before looking at the mount orders a newcomer
    after, or before, an exiting process's detach, never in between."""
    key = os.path.realpath(base)
    with _SHARED_LOCK:
        if key in _SHARED:
            return True
        if os.geteuid() != 0 or key in _CLOSED:  # closed: a render thread racing the exit
            return False
        try:
            fd = os.open(key + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW,
                         0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if not is_mount_point(key):
                _mount(key, key, None, MS_BIND | MS_REC)
            _mount(None, key, None, MS_SHARED)
        except OSError:
            os.close(fd)
            return False
        _SHARED[key] = fd
        procs.at_exit(functools.partial(_release_shared, key))  # a hard exit too
        return True


def _release_shared(key: str) -> None:
    """At exit: detach BASE's bind when no other process holds its lock. Also run from a
    signal handler (procs.hard_exit): a lock held by the interrupted code is waited for a
    second at most, never forever. The base is closed first: a render thread still running
    while a hard exit runs the hooks must not bind it again (and mount a stage under that
    new bind) after it was detached."""
    _CLOSED.add(key)
    if not _SHARED_LOCK.acquire(timeout=1.0):
        return
    try:
        fd = _SHARED.pop(key, None)
    finally:
        _SHARED_LOCK.release()
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        unmount(key)
    except OSError:  # another process still uses it: the last one out detaches it
        pass
    finally:
        os.close(fd)


@cache
def controllers() -> dict[str, Path]:
    """The v1 controllers (memory, pids) this process can make groups under, each with its
    `mythloop` group made; {} where there are none (not root, cgroup v2 only, read-only)."""
    if os.geteuid() != 0 or os.environ.get("MYTHLOOP_RENDER_CGROUPS", "").strip() == "0":
        return {}
    found: dict[str, Path] = {}
    for name in CONTROLLERS:
        root = CGROUP_ROOT / name
        probe = "memory.limit_in_bytes" if name == "memory" else "pids.max"
        if not (root / probe).exists() and not (root / "cgroup.procs").exists():
            continue
        group = root / GROUP
        try:
            group.mkdir(exist_ok=True)
            if name == "memory":  # children count in their parent's usage (v1 default off)
                with contextlib.suppress(OSError):
                    (group / "memory.use_hierarchy").write_text("1")
            if not os.access(group / "cgroup.procs", os.W_OK):
                continue
        except OSError:
            continue
        found[name] = group
    return found if len(found) == len(CONTROLLERS) else {}


def _write(path: Path, value: str) -> bool:
    try:
        path.write_text(value)
        return True
    except OSError:
        return False


class Cgroup:
    """The memory and pids groups of one render (named after its stage)."""

    def __init__(self, name: str, *, memory_bytes: int, processes: int) -> None:
        if not _NAME.fullmatch(name):
            raise ValueError(f"bad cgroup name {name!r}")
        self.name = name
        self.paths: dict[str, Path] = {}
        for controller, parent in controllers().items():
            path = parent / name
            path.mkdir(exist_ok=True)
            self.paths[controller] = path
        memory = self.paths.get("memory")
        if memory is not None:
            ok = _write(memory / "memory.limit_in_bytes", str(memory_bytes))
            # with swap accounting: the same limit for memory + swap, so swap is no way out
            if (memory / "memory.memsw.limit_in_bytes").exists():
                ok = _write(memory / "memory.memsw.limit_in_bytes", str(memory_bytes)) and ok
            if not ok:
                self.close()
                raise OSError(errno.EPERM, f"cannot set the memory limit of {memory}")
        pids = self.paths.get("pids")
        if pids is not None and not _write(pids / "pids.max", str(processes)):
            self.close()
            raise OSError(errno.EPERM, f"cannot set pids.max of {pids}")

    @property
    def active(self) -> bool:
        return bool(self.paths)

    def join(self) -> None:
        """Move the calling process into this render's groups (v1: writing 0 moves the
        writer). Meant for a child between fork and exec (`preexec_fn`): it raises when a
        group cannot be joined, so nothing starts outside its budget."""
        for path in self.paths.values():
            with open(path / "cgroup.procs", "w") as fh:
                fh.write("0")

    def inner_names(self) -> dict[str, str]:
        """{controller: this group's name}: what a warm worker joins under CGROUP_INNER."""
        return {controller: self.name for controller in self.paths}

    def _read(self, controller: str, name: str) -> str:
        path = self.paths.get(controller)
        try:
            return (path / name).read_text() if path else ""
        except OSError:
            return ""

    def peak_bytes(self) -> int | None:
        """The most memory the render's tree (and its stage) held at once."""
        text = self._read("memory", "memory.max_usage_in_bytes").strip()
        return int(text) if text.isdigit() else None

    def memory_limit_hit(self) -> bool:
        """True when the kernel ended a process of the render at its memory limit (an OOM
        kill in its group)."""
        for line in self._read("memory", "memory.oom_control").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value) > 0
        # an older kernel without the count: the limit was reached (reclaim may have coped)
        failcnt = self._read("memory", "memory.failcnt").strip()
        return failcnt.isdigit() and int(failcnt) > 0

    def pids_limit_hit(self) -> bool:
        events = self._read("pids", "pids.events")
        return any(line.startswith("max ") and line.split()[1] != "0"
                   for line in events.splitlines())

    def _tasks(self) -> list[int]:
        found: set[int] = set()
        for controller in self.paths:
            found.update(int(t) for t in self._read(controller, "cgroup.procs").split()
                         if t.isdigit())
        return sorted(found)

    def close(self, wait: float = 5.0) -> None:
        """Kill whatever is left in the groups and remove them (their pages go back to the
        parent group). Best effort: a group that cannot be removed is left to
        `remove_stale_groups`."""
        deadline = time.monotonic() + wait
        for path in list(self.paths.values()):
            while True:
                for pid in self._tasks():
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    path.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.02)
        self.paths = {}


def problem() -> str | None:
    """Why renders here cannot be bounded as a whole (for `mythloop doctor`), or None: the
    cgroup v1 memory and pids controllers, and a capped tmpfs for the stage, both tried."""
    if os.geteuid() != 0:
        return "not running as root: no render cgroups or stage filesystem"
    if not controllers():
        return ("no writable cgroup v1 memory and pids controllers under /sys/fs/cgroup "
                "(cgroup v2 only, or read-only)")
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory(prefix="mythloop-stage-probe-") as probe:
        if not mount_stage_fs(Path(probe), 1 << 20, 64):
            return "cannot mount a size-capped tmpfs for the render's stage"
        unmount(probe)
    return None


def stage_full(stage: Path, margin_bytes: int = 1 << 20, margin_files: int = 8) -> bool:
    """True when the render filled its stage (bytes or files) to within a small margin."""
    try:
        st = os.statvfs(stage)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < margin_bytes or st.f_favail < margin_files


def remove_stale_groups(alive: Callable[[int], bool]) -> None:
    """Remove the groups of renders whose process is gone (named `mythloop-stage-<pid>-*`),
    left by a caller that was killed outright."""
    for parent in controllers().values():
        try:
            entries = list(os.scandir(parent))
        except OSError:
            continue
        for entry in entries:
            match = re.match(r"mythloop-stage-(\d+)-", entry.name)
            if match and entry.is_dir(follow_symlinks=False) and not alive(int(match.group(1))):
                with contextlib.suppress(OSError):
                    if not (Path(entry.path) / "cgroup.procs").read_text().split():
                        os.rmdir(entry.path)
