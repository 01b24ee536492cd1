"""Run a CLI child with a hard deadline that takes its whole process tree down.

The child starts in its own session (so it leads a fresh process group); on the
deadline the group gets SIGTERM, a short grace, then SIGKILL. Pipes are drained
by `communicate` (threads), so a chatty child never blocks on a full pipe, and
any group member still alive after the child exits is killed too: no
grandchild (node workers, model clients) outlives the call.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from mythloop import procs
from mythloop.llm.errors import ToolMissing
from mythloop.settings import get_settings

__all__ = ["CLIResult", "run_cli", "resolve_executable", "NPM_PACKAGES", "cli_owner",
           "kill_owned_clis"]

# Who started a CLI call: set by a caller that runs calls in worker threads (the sweep's
# concurrent learning turns), so that on the way out (Ctrl-C, a crash) it can end the calls
# still in flight instead of waiting for each to reach its deadline.
cli_owner: ContextVar[object | None] = ContextVar("mythloop_cli_owner", default=None)
_LIVE: dict[int, object] = {}  # process group id -> owner
_LIVE_LOCK = threading.Lock()


def kill_owned_clis(owner: object) -> int:
    """SIGKILL the process groups of `owner`'s CLI calls still running; how many."""
    with _LIVE_LOCK:
        groups = [pgid for pgid, who in _LIVE.items() if who is owner]
    return sum(procs.signal_group(pgid, signal.SIGKILL) for pgid in groups)

# The npm package that provides each CLI, for the "not installed" message.
NPM_PACKAGES = {
    "gemini": "@google/gemini-cli",
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
}


@dataclass
class CLIResult:
    """What a CLI call left behind."""

    rc: int | None
    stdout: str
    stderr: str
    elapsed_s: float
    timed_out: bool


def _project_npm_bins() -> list[Path]:
    """Where `npm install --prefix .mythloop/npm` puts executables."""
    root = get_settings().state_root / "npm"
    return [root / "node_modules" / ".bin", root / "bin"]


def resolve_executable(command: str, backend: str) -> str:
    """Absolute path of `command` (on PATH, or in the project's npm folder), else ToolMissing."""
    if os.sep in command:
        if os.access(command, os.X_OK) and Path(command).is_file():
            return command
        found = None
    else:
        found = shutil.which(command)
        if found is None:
            extra = os.pathsep.join(str(p) for p in _project_npm_bins() if p.is_dir())
            found = shutil.which(command, path=extra) if extra else None
    if found is None:
        package = NPM_PACKAGES.get(backend)
        how = f"install it with `npm install -g {package}`" if package else "install it"
        raise ToolMissing(
            f"{backend}: executable {command!r} not found on PATH; {how}, "
            "or point MYTHLOOP_COMMAND at it"
        )
    return found


def _drain_after_kill(proc: subprocess.Popen) -> tuple[bytes, bytes]:
    """Collect what the killed group wrote; give up if an escaped process still holds a pipe."""
    try:
        return proc.communicate(timeout=5.0)
    except subprocess.TimeoutExpired:
        # Only a process that left the group (its own setsid) can keep the pipe open now.
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        return b"", b""


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def run_cli(
    argv: Sequence[str],
    *,
    input_text: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 300.0,
    grace: float = 2.0,
) -> CLIResult:
    """Run `argv` with `input_text` on stdin and `env` overlaid on os.environ; never outlive `timeout`."""
    child_env = dict(os.environ)
    child_env.update(env or {})
    started = time.monotonic()
    proc = procs.start_session(
        argv,
        stdin=subprocess.PIPE if input_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=str(cwd) if cwd is not None else None,
        env=child_env,
    )  # own session and process group: killpg reaches every descendant
    pgid = proc.pid  # a session leader's pgid is its pid
    owner = cli_owner.get()
    if owner is not None:
        with _LIVE_LOCK:
            _LIVE[pgid] = owner
    payload = input_text.encode("utf-8") if input_text is not None else None
    timed_out = False
    try:
        out, err = proc.communicate(payload, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        procs.signal_group(pgid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            procs.signal_group(pgid, signal.SIGKILL)
            out, err = _drain_after_kill(proc)
    finally:
        # Whatever happened, no member of the group survives the call (a grandchild that
        # ignored SIGTERM or detached from the pipes would otherwise leak).
        procs.signal_group(pgid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if owner is not None:
            with _LIVE_LOCK:
                _LIVE.pop(pgid, None)
    return CLIResult(
        rc=None if timed_out else proc.returncode,
        stdout=_decode(out),
        stderr=_decode(err),
        elapsed_s=time.monotonic() - started,
        timed_out=timed_out,
    )
