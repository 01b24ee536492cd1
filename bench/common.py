"""Shared helpers of the benchmarks: timing statistics, peak memory, child processes, machine
info. What they measure: docs/performance.md, "How each part measures"."""

import contextlib
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

import psutil

from mythloop import procs

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("prefect", "manim", "torch", "sentence-transformers", "numpy", "pydantic",
            "pyinstrument", "mythloop")

METATOOL = Path(os.environ.get("MYTHLOOP_METATOOL", "/work/shared/benchmarks/metatool"))


def stats(values: list[float]) -> dict:
    """min / median / max / n of a list of numbers, and the values (empty -> n 0)."""
    if not values:
        return {"min": None, "median": None, "max": None, "n": 0}
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values), "values": list(values)}


def ratio_stats(numer: list[float], denom: list[float]) -> dict:
    """Ratio of two timed series: median/median, plus the best and worst pairing."""
    if not numer or not denom:
        return {"median": None, "min": None, "max": None}
    return {"median": statistics.median(numer) / statistics.median(denom),
            "min": min(numer) / max(denom), "max": max(numer) / min(denom)}


def mean_of(cell: dict | None, digits: int = 3) -> float | None:
    """A metrics.json cell's mean, rounded (None when it has none)."""
    return None if not cell or cell.get("mean") is None else round(cell["mean"], digits)


def interval_of(cell: dict | None, digits: int = 3) -> str | None:
    """A metrics.json cell as `+mean [+lo, +hi]` (None when it has no mean)."""
    if not cell or cell.get("mean") is None:
        return None
    return f"{cell['mean']:+.{digits}f} [{cell['lo']:+.{digits}f}, {cell['hi']:+.{digits}f}]"


def peak_rss_mb() -> float:
    """Peak RSS of this process so far, in MiB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) a live process has used so far."""
    with contextlib.suppress(psutil.Error):
        cpu = psutil.Process(pid).cpu_times()
        return cpu.user + cpu.system
    return None


def wait_until_idle(pid: int, quiet_s: float = 0.5, limit_s: float = 60.0) -> float:
    """Wait until PID uses < 5% of a core for QUIET_S; the CPU seconds it used meanwhile."""
    start = last = process_cpu_s(pid)
    if start is None:
        return 0.0
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = process_cpu_s(pid)
        if now is None:  # it ended
            break
        busy, last = now - last, now
        if busy < 0.05 * quiet_s:
            break
    return last - start


def vm_hwm_mb(pid: int | str = "self") -> float | None:
    """Peak RSS (VmHWM) of a live process, MiB; None when /proc cannot tell."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def tree_rss_mb(root: int) -> float:
    """Current RSS of ROOT and all its live descendants together, in MiB."""
    total = 0
    for pid in [root, *procs.tree_pids(root)]:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).memory_info().rss
    return total / 2**20


def run_child(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 600, log: Path | None = None,
              meter: "CpuMeter | None" = None) -> dict:
    """CMD in a session of its own, killed at TIMEOUT: wall, exit, peak tree RSS, CPU, LOG's tail."""
    token = uuid.uuid4().hex
    env = {**(os.environ if env is None else env), "MYTHLOOP_BENCH_CHILD": token}
    out = open(log, "w", encoding="utf-8") if log else subprocess.DEVNULL  # noqa: SIM115
    cpu_before = meter.seconds() if meter else None
    t0 = time.perf_counter()
    proc = procs.start_session(meter.wrap(cmd) if meter else cmd, env=env, cwd=cwd,
                               stdout=out, stderr=subprocess.STDOUT)
    timed_out, peak_mb, sample_at = False, 0.0, 0.0
    deadline = time.monotonic() + timeout
    while True:
        now = time.monotonic()
        if now >= sample_at:  # the tree's summed RSS, every 0.25 s
            peak_mb, sample_at = max(peak_mb, tree_rss_mb(proc.pid)), now + 0.25
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if now > deadline:
            timed_out = True
            procs.signal_group(proc.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    # what it left behind in other sessions (database, workers): TERM, then KILL
    procs.kill_marked("MYTHLOOP_BENCH_CHILD", token, grace=10.0)
    left = len(procs.marked_pids("MYTHLOOP_BENCH_CHILD", token))
    proc.returncode = os.waitstatus_to_exitcode(status)
    if log:
        out.close()
    tail = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log else ""
    cpu_after = meter.seconds() if meter else None
    cpu = (cpu_after - cpu_before if cpu_after is not None and cpu_before is not None
           else usage.ru_utime + usage.ru_stime)
    return {"wall_s": wall, "returncode": proc.returncode, "timed_out": timed_out,
            "peak_tree_rss_mb": peak_mb, "child_max_rss_mb": usage.ru_maxrss / 1024,
            "cpu_s": cpu, "cpu_method": meter.method if meter else "wait4 (reaped descendants only)",
            "started_at": time.time() - wall, "tail": tail, "left_running": left}


class CpuMeter:
    """CPU seconds (user + system) of every process a command starts, reaped or not: a cgroup
    of its own (v1 `cpuacct` or v2 `cpu.stat`) that the command joins before it execs. Where
    none can be made (not root, no cgroupfs), `method` says the reaped tree's `wait4` counts."""

    _ROOTS = (("/sys/fs/cgroup/cpuacct", "cpuacct.usage", 1e-9),
              ("/sys/fs/cgroup/unified", "cpu.stat", 1e-6),
              ("/sys/fs/cgroup", "cpu.stat", 1e-6))

    def __init__(self, name: str) -> None:
        self.path: Path | None = None
        self.file, self.scale, self.method = "", 0.0, "wait4 (reaped descendants only)"
        for root, file, scale in self._ROOTS:
            path = Path(root) / f"mythloop-bench-{name}-{uuid.uuid4().hex[:8]}"
            if not (path.parent / "cgroup.procs").is_file():
                continue
            try:
                path.mkdir()
            except OSError:
                continue
            if (path / file).is_file():
                self.path, self.file, self.scale = path, file, scale
                self.method = f"cgroup ({path.parent}/.../{file})"
                break
            with contextlib.suppress(OSError):
                path.rmdir()

    def wrap(self, cmd: list[str]) -> list[str]:
        """CMD, started so that it joins this meter's cgroup first."""
        if self.path is None:
            return cmd
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"',
                str(self.path / "cgroup.procs"), *cmd]

    def seconds(self) -> float | None:
        if self.path is None:
            return None
        text = (self.path / self.file).read_text()
        if self.file == "cpu.stat":
            text = dict(line.split() for line in text.splitlines() if line.strip())["usage_usec"]
        return int(text) * self.scale

    def __enter__(self) -> "CpuMeter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the cgroup (once its processes are gone; a few tries)."""
        if self.path is None:
            return
        for _ in range(50):
            try:
                return self.path.rmdir()
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)


def wait_for_quiet(threshold: float, limit_s: float, poll_s: float = 5.0) -> dict:
    """Wait up to LIMIT_S for the 1-minute load to fall below THRESHOLD; load, quiet, waited_s."""
    t0 = time.monotonic()
    while True:
        load = os.getloadavg()[0]
        waited = time.monotonic() - t0
        if load < threshold or waited >= limit_s:
            return {"load1": round(load, 2), "quiet": load < threshold,
                    "waited_s": round(waited, 1)}
        time.sleep(min(poll_s, max(0.1, limit_s - waited)))


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, timeout=10,
                             capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=REPO, timeout=10,
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + (" (+ uncommitted changes)" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def _version(name: str) -> str:
    with contextlib.suppress(metadata.PackageNotFoundError):
        return metadata.version(name)
    return "absent"


def machine_info() -> dict:
    """CPU model, cores, memory, OS, Python, package versions, UTC date, load, git commit."""
    return {"date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"), "cpu": _cpu_model(),
            "cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)),
            "memory_gb": psutil.virtual_memory().total / 2**30, "os": platform.platform(),
            "python": sys.version.split()[0],
            "packages": {name: _version(name) for name in PACKAGES},
            "loadavg": loadavg(), "git": _git_commit()}


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def bench_env(state_dir: Path) -> dict[str, str]:
    """Environment for a bench child: its own state and Prefect home, offline models, quiet logs."""
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_API_KEY")}
    env.update({
        "MYTHLOOP_STATE_DIR": str(state_dir),
        "PREFECT_HOME": str(state_dir / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL": "WARNING",
        "PREFECT_LOGGING_HANDLERS_CONSOLE_FLOW_RUNS_LEVEL": "WARNING",
        "PREFECT_LOGGING_HANDLERS_CONSOLE_TASK_RUNS_LEVEL": "WARNING",
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "bench"),
                                       env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    })
    return env


def repo_on_path() -> None:
    """Make the top-level `flows`, `tasks` and bench modules importable from a checkout."""
    for path in (str(REPO), str(REPO / "bench")):
        if path not in sys.path:
            sys.path.insert(0, path)


def mythloop_cmd() -> list[str]:
    """The `mythloop` command of this interpreter's environment (or `python -m mythloop_app`)."""
    exe = Path(sys.executable).parent / "mythloop"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "mythloop_app"]


def mythloop_child(args: list[str], timeout: float = 3600, **kwargs) -> dict:
    """`mythloop ARGS` in a child (run_child's keywords, cwd the checkout); raises if it fails"""
    child = run_child([*mythloop_cmd(), *args], timeout=timeout, **{"cwd": REPO, **kwargs})
    if child["returncode"] != 0:
        raise RuntimeError(f"mythloop {args[0]} failed (exit {child['returncode']}): "
                           f"{child['tail'][-800:]}")
    return child


def note(part: str, message: str) -> None:
    """A progress line on stderr (stdout is captured while flows run)."""
    print(f"[bench {part}] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def part_main(name: str) -> None:
    """`python bench/<name>.py [--set KEY=VALUE ...]`: `bench/run_all.py --only NAME`, exits."""
    from run_all import main  # noqa: PLC0415 (run_all imports this module)

    sys.exit(main(["--only", name, *sys.argv[1:]]))
