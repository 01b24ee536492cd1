"""First process of a sandboxed render, inside the bubblewrap view; then runs the worker.

render.py starts it as ``bwrap <view> -- python -I -c <this source> <spec json>``: bwrap has
already made the namespaces (network, PID, IPC, UTS) and the allowlisted filesystem view
(render.sandbox_view). Here it
  1. becomes a child subreaper (orphans of the render come back to it);
  2. forks the worker: rlimits, the unprivileged user, no_new_privs, the seccomp filter
     (`syscall_filter`), exec python;
  3. reaps every process until the worker is gone, kills what is left, and exits with the
     worker's status (128+N when a signal N ended it). bwrap's own PID 1 then exits, and the
     kernel kills whatever else is left in the PID namespace.
Without bwrap (fallback) the same steps run on the host's tree. Standard library and
pyseccomp only: the mythloop package is not imported here (an import contract in
pyproject.toml checks it). With ``"serve": true`` in the spec it is a warm worker instead
(render_pool.py): it imports manim once and forks each render, in a PID namespace of its
own, from itself (see `serve`).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import resource
import select
import signal
import sys
import threading
import time
import traceback

MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER = 38, 36
AF_UNIX = 1
# What a render never needs, refused with EPERM (`syscall_filter`); clone3 says ENOSYS so
# libc falls back to clone, whose namespace flags the filter can see.
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "keyctl", "add_key", "request_key",
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "move_mount",
    "open_tree", "fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
    "io_uring_register", "kexec_load", "kexec_file_load", "init_module", "finit_module",
    "delete_module", "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog",
    "open_by_handle_at", "name_to_handle_at", "fanotify_init", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "vhangup", "lookup_dcookie", "personality",
)
_CLONE_NAMESPACE_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000,
                          0x20000000, 0x40000000, 0x00000080)  # NS CGROUP UTS IPC USER PID NET TIME

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


def _apply_limits(limits: dict) -> None:
    """Hard rlimits, set while still privileged so the worker cannot raise them."""
    for name, value in limits.items():
        res = getattr(resource, f"RLIMIT_{name}")
        soft, hard = value if isinstance(value, list) else (value, value)
        resource.setrlimit(res, (soft, hard))


def syscall_filter() -> None:
    """Load the seccomp filter into this process (inherited by everything it starts):
    DENIED_SYSCALLS fail with EPERM, clone with any namespace flag too, clone3 with ENOSYS,
    socket and socketpair of any family but AF_UNIX with EAFNOSUPPORT.
    Needs no_new_privs (or root); it cannot be removed or loosened afterwards."""
    import pyseccomp  # noqa: PLC0415 (ctypes over libseccomp2: loaded only here)

    rules = pyseccomp.SyscallFilter(defaction=pyseccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(pyseccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):
            continue  # a syscall this kernel/architecture does not have
    for flag in _CLONE_NAMESPACE_FLAGS:
        rules.add_rule(pyseccomp.ERRNO(errno.EPERM), "clone",
                       pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    # sockets of the AF_UNIX family only (the formula cache's socket): no AF_INET in a down
    # network namespace is needed either, and AF_VSOCK, AF_NETLINK, AF_PACKET, ... reach
    # past the network namespace or into the kernel
    for call in ("socket", "socketpair"):
        rules.add_rule(pyseccomp.ERRNO(errno.EAFNOSUPPORT), call,
                       pyseccomp.Arg(0, pyseccomp.NE, AF_UNIX))
    rules.load()


def _drop(spec: dict, limits: dict) -> None:
    """Limits, the unprivileged user, no_new_privs, the syscall filter, the render dir as cwd."""
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    _apply_limits(limits)
    if spec.get("uid") is not None:
        os.setgroups([])
        os.setresgid(spec["gid"], spec["gid"], spec["gid"])
        os.setresuid(spec["uid"], spec["uid"], spec["uid"])
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    if spec.get("seccomp", True):
        syscall_filter()
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


_OWN_NAMESPACE = [False]  # set by main(): this process is bwrap's first child (PID 2)


def _others() -> list[int]:
    """Every process of this PID namespace but this one and its PID 1 (bwrap's init): all
    of them were started for a render, directly or not. Without a PID namespace of our own
    (the fallback) only our children: the host's processes are not ours."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (me, 1):
            continue
        if not _OWN_NAMESPACE[0]:
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    if int(fh.read().rsplit(b")", 1)[1].split()[1]) != me:
                        continue
            except (OSError, IndexError, ValueError):
                continue
        found.append(int(entry))
    return found


def _kill_descendants(wait: float = 5.0) -> bool:
    """SIGKILL every other process of the namespace (a render's PID namespace init takes its
    whole namespace with it) and reap, until none is left or WAIT seconds passed; True when
    none is left. Needs no parent links, so no chain depth or setsid escapes it."""
    deadline = time.monotonic() + wait
    while True:
        others = _others()
        if not others:
            return True
        for pid in others:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        if time.monotonic() > deadline:
            return not _others()
        time.sleep(0.01)


# --- serve mode: a warm worker ------------------------------------------------------------
# The same PID 1, but it imports manim once (trusted code, as root, before any scene runs)
# and then forks one child per render request read from stdin. The child gets a mount and
# IPC namespace of its own, fresh tmpfs over every world-writable dir, its own staging dir
# bound at the render path, its limits, drops to `nobody` and runs manim under the audit
# hook; when it ends, everything else in the PID namespace is killed. PID 1 never runs scene
# code and is not reachable by `nobody`, so each render starts from the state manim had
# right after import. Protocol: one JSON line per request, one JSON line per reply.

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID = 0x00020000, 0x08000000, 0x20000000
MS_NOEXEC = 8
_JOB_NAME = re.compile(r"mythloop-stage-\d+-\w+")
_KILL_GRACE = 3.0
_POOL_BASE = "/tmp/.mythloop-pool-base"  # in the worker's own /tmp tmpfs, mode 700
_CGROUPS = "/tmp/.mythloop-cgroups"  # footprint.CGROUP_INNER: the `mythloop` cgroups, bound
_CONTROLLERS = ("memory", "pids")
_FRESH = ("/tmp", "/dev/shm")  # covered with a fresh tmpfs for each render


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


def _status_code(status: int | None) -> int:
    if status is None:
        return 1
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _render_namespace(job: dict, spec: dict, worker: dict) -> None:
    """In the forked child (root; never returns): new mount, IPC and PID namespaces with
    this render's stage only; in the new PID namespace a root init (PID 1, no scene code)
    and under it the render (PID 2). The init exits when the render does, and with it the
    kernel kills every process the render started, however they were started. This process
    waits for the init and exits with the render's status."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    _join_groups(job)
    if _libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare: {os.strerror(err)}")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    if job.get("stage_fs") and not os.path.ismount(os.path.join(_POOL_BASE, job["job"])):
        raise OSError(errno.ENOENT, "the render's stage filesystem is not visible here")
    # opened by path in this namespace (a bind needs a source mount of our own namespace)
    stage_fd = os.open(os.path.join(_POOL_BASE, job["job"]),
                       os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    for directory in _FRESH:  # nothing a previous render left there is seen; base hidden
        if os.path.isdir(directory):
            keep = set(spec.get("tmp_keep") or ()) if directory == "/tmp" else set()
            _shadow(directory, keep, 0o1777, spec["tmp_size"])
    os.makedirs(spec["inner"], 0o755, exist_ok=True)
    _mount(f"/proc/self/fd/{stage_fd}", spec["inner"], None, MS_BIND | MS_REC)
    os.close(stage_fd)
    log = os.open(os.path.join(spec["inner"], "render.log"),
                  os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    null = os.open("/dev/null", os.O_RDONLY)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # PID 1 of the render's namespace (root, runs no scene code)
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            render = os.fork()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            os._exit(125)
        if render == 0:
            _render_process(job, spec, worker, null, log)
        _wait_for(render, reap_all=True, null=null)
    _wait_for(pid, reap_all=False, null=null)


def _join_groups(job: dict) -> None:
    """Join the render's memory and pids cgroups, which its parent made and limited (v1:
    writing 0 moves the writer; what it forks next, the render's init and the render, is
    born inside). Raises when one cannot be joined: no render runs outside its budget."""
    groups = job.get("cgroups") or {}
    if not isinstance(groups, dict):
        raise ValueError("bad cgroups")
    for controller, name in groups.items():
        if controller not in _CONTROLLERS or not _JOB_NAME.fullmatch(str(name)):
            raise ValueError(f"bad cgroup {controller}/{name}")
        fd = os.open(os.path.join(_CGROUPS, controller, name, "cgroup.procs"),
                     os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, b"0")
        finally:
            os.close(fd)


def _wait_for(pid: int, *, reap_all: bool, null: int | None = None) -> None:
    """Wait for PID (reaping any orphan on the way when REAP_ALL) and exit with its status;
    holding no descriptor of the worker meanwhile. When this is the PID namespace's init,
    its exit makes the kernel kill whatever is left in the namespace."""
    if null is not None:
        os.dup2(null, 0)
        os.dup2(null, 1)
    os.closerange(3, 65536)
    while True:
        try:
            done, status = os.wait() if reap_all else os.waitpid(pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
        if done == pid:
            os._exit(_status_code(status))


def _render_process(job: dict, spec: dict, worker: dict, null: int, log: int) -> None:
    """The render itself (PID 2 of its namespace): log as stdout/stderr, nothing else open,
    limits, `nobody`, no_new_privs, the syscall filter, then manim. Never returns."""
    code = 1
    try:
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.closerange(3, 65536)  # the staging base, the control pipe: none reach the scene
        try:  # at its cgroup's memory limit the kernel ends the render's processes first
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("1000")
        except OSError:
            pass
        _drop(spec, job["limits"])
        os.environ.clear()
        os.environ.update(job["env"])
        worker["run"](job["worker"])
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


def _children_cpu() -> float:
    """User + system CPU seconds of this process's waited-for descendants so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_render(job: dict, spec: dict, worker: dict) -> dict:
    """Fork the render, wait for it (killing everything at its deadline), check that no
    process of it is left, and reply; `cpu_s` is the CPU its whole tree spent (every process
    of it was waited for: by its namespace's init, then by this process)."""
    sys.stdout.flush()
    sys.stderr.flush()
    cpu_before = _children_cpu()
    pid = os.fork()
    if pid == 0:
        try:
            _render_namespace(job, spec, worker)
        except BaseException:  # noqa: BLE001 - setup failed: say so in the render's log
            try:
                with open(os.path.join(_POOL_BASE, job["job"], "render.log"), "a") as fh:
                    fh.write(f"sandbox: cannot start the render: {traceback.format_exc()}")
            except OSError:
                pass
        os._exit(125)
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
            continue  # an orphan, reaped
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
    clean = _kill_descendants()
    if lost:
        raise SystemExit(0)
    return {"job": job["job"], "status": _status_code(status), "timed_out": timed_out,
            "clean": clean, "cpu_s": round(_children_cpu() - cpu_before, 3)}


def _signal_all(sig: int) -> None:
    """SIG to every other process of this PID namespace (all are ours to stop)."""
    for pid in _others():
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def serve(spec: dict) -> int:
    """The warm worker (bwrap's first child): import manim, render request after request.

    bwrap built the view, with the staging base bound at _POOL_BASE (mode 700, root only);
    each render binds only its own stage, in namespaces of its own."""
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    os.chdir("/")
    worker: dict = {"__name__": "sandbox_worker"}
    exec(compile(spec["worker_source"], "sandbox_worker.py", "exec"), worker)  # noqa: S102
    worker["prepare"]()
    if threading.active_count() != 1:  # forking a threaded process is not safe
        print("sandbox: manim started threads; cannot serve warm renders", file=sys.stderr)
        return 124

    def _stop(*_: object) -> None:
        _kill_descendants()
        os._exit(0)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)
    usage = resource.getrusage(resource.RUSAGE_SELF)  # the start-up: manim's import
    _reply({"ready": True, "cpu_s": round(usage.ru_utime + usage.ru_stime, 3)})
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
        _reply(_run_render(job, spec, worker))


def main() -> int:
    spec = json.loads(sys.argv[1])
    _OWN_NAMESPACE[0] = bool(spec.get("namespaced")) and os.getpid() == 2
    if spec.get("serve"):
        return serve(spec)
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
