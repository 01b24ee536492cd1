"""The temporary Prefect server a CLI command runs when no server is running.

It is Prefect's own temporary server (uvicorn serving `create_app` in ephemeral mode, the
same command and settings Prefect's `SubprocessASGIServer` uses), with three differences:

- it runs in a session of its own, so Ctrl-C in the terminal (SIGINT to the foreground
  process group) does not reach it: the command can still report its runs as crashed,
  and stops the server itself, last;
- its output goes to `<PREFECT_HOME>/server.log`, not the terminal;
- before it is stopped, it is given time to record what the command sent it (task runs
  are stored from events, asynchronously), so no run is left Running and its shutdown
  cancels no write.

Its database is the one under PREFECT_HOME (`.mythloop/prefect/prefect.db`), the same one
`mythloop server` opens: runs of a temporary server are browsable there later.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from mythloop import procs

__all__ = ["TemporaryServer"]

_NOT_FINAL = ["SCHEDULED", "PENDING", "RUNNING", "PAUSED", "CANCELLING"]
_PORT_IN_USE_EXIT = 3  # uvicorn's exit code when it cannot bind


class TemporaryServer:
    """Start with `start()`, point PREFECT_API_URL at `api_url`, end with `drain()` + `stop()`."""

    def __init__(self, prefect_home: Path) -> None:
        self.prefect_home = prefect_home
        self.log_path = prefect_home / "server.log"
        self.proc: subprocess.Popen | None = None
        self._stopped = False
        self.port: int | None = None
        # Task runs of flow runs started after this moment are ours (the database may
        # hold older runs).
        self.since = datetime.now(UTC)

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    @property
    def pgid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None  # a session leader

    def _argv(self) -> list[str]:
        # where Prefect is installed, without importing it (the server may start first)
        spec = importlib.util.find_spec("prefect")
        origin = spec.origin if spec is not None else None
        if origin is None:
            raise RuntimeError("Prefect is not installed in this environment")
        return [sys.executable, "-m", "uvicorn",
                "--app-dir", str(Path(origin).resolve().parent.parent),
                "--factory", "prefect.server.api.server:create_app",
                "--host", "127.0.0.1", "--port", str(self.port),
                "--log-level", "error", "--lifespan", "on"]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env.update({"PREFECT_HOME": str(self.prefect_home), "PREFECT_UI_ENABLED": "0",
                    "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"})
        return env

    def launch(self) -> None:
        """Start the server's process and return at once (`start` waits for its API). The
        server's start (2-4 s, most of it importing Prefect's server) then overlaps what the
        command does meanwhile; its environment is this process's at this moment."""
        self.prefect_home.mkdir(parents=True, exist_ok=True)
        self.port = procs.free_port()
        self.proc = procs.start_process(self._argv(), env=self._env(), log_path=self.log_path)
        self._stopped = False

    def start(self, timeout: float) -> None:
        """Start the server (unless `launch` did) and wait until its API answers;
        RuntimeError when it does not."""
        deadline = time.monotonic() + timeout
        for attempt in range(5):
            if attempt or self.proc is None:
                self.launch()
            assert self.proc is not None  # (launched above)
            if procs.wait_http_ok(f"{self.api_url}/health", proc=self.proc, interval=0.1,
                                  timeout=max(0.0, deadline - time.monotonic())):
                return
            if self.proc.poll() != _PORT_IN_USE_EXIT:  # else: another took the port; again
                break
        assert self.proc is not None  # (started above)
        code = self.proc.poll()
        self.stop(grace=2.0)
        why = (f"exited with code {code}" if code is not None
               else f"did not answer within {timeout:.0f} s (raise "
                    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS on a slow machine)")
        raise RuntimeError(f"the temporary Prefect server {why}; its log "
                           f"({self.log_path}) ends:\n{procs.log_tail(self.log_path, 15)}")

    def drain(self, timeout: float) -> bool:
        """Wait until the server has stored every task run state sent to it; True if it did.

        Call after this process flushed its events. Task runs are recorded from events by a
        server service; done when none of ours is left in a non-final state and their count
        holds still between two looks.
        """
        if self.proc is None or self.proc.poll() is not None:
            return False
        import httpx

        flows = {"flow_runs": {"start_time": {"after_": self.since.isoformat()}}}
        open_ = {**flows, "task_runs": {"state": {"type": {"any_": _NOT_FINAL}}}}
        deadline = time.monotonic() + timeout
        last = None
        with httpx.Client(base_url=self.api_url, timeout=5.0) as client:
            while time.monotonic() < deadline:
                try:
                    answers = [client.post("/task_runs/count", json=body)
                               for body in (flows, open_)]
                    if any(a.status_code in (429, 503) for a in answers):  # busy: ask again
                        time.sleep(0.5)
                        continue
                    total, waiting = (a.raise_for_status().json() for a in answers)
                except (httpx.HTTPError, ValueError):
                    return False
                if waiting == 0 and total == last:
                    return True
                last = total
                time.sleep(0.25)
        return False

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the server's process group, SIGKILL what is left after `grace` seconds.
        Once stopped, again is a no-op (no signal to a process group its number may name by
        now)."""
        if self.proc is not None and not self._stopped:
            procs.stop_process(self.proc, first=signal.SIGTERM, grace=grace)
            self._stopped = True
