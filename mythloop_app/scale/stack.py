"""A whole scale-out stack on this machine: PostgreSQL, a Prefect server on it, a process work
pool and N workers, every piece a child process on loopback, all stopped by `stop()`.

    with ScaleStack(workers=2) as stack:         # database="sqlite" for the single-file server
        stack.deploy()
        result = stack.run_sweep(config)          # parent here, shards on the workers
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from mythloop.fileio import write_text_atomic
from mythloop.procs import (
    free_port,
    http_ok,
    kill_marked,
    log_tail,
    marked_pids,
    port_listening,
    signal_group,
    start_process,
    stop_process,
    tree_pids,
    wait_until,
)
from mythloop.settings import get_settings
from mythloop_app.commands.runtime import DATABASE_ENV
from mythloop_app.scale import api
from mythloop_app.scale.postgres import LocalPostgres

__all__ = ["ScaleStack", "POOL", "TAG_ENV", "repo_root"]

TAG_ENV = "MYTHLOOP_SCALE_TAG"
"""Every process the stack starts carries TAG_ENV=<its tag> (children inherit it): Prefect's
process workers start flow runs in sessions of their own, so stopping a worker's process
group is not enough; at the end the stack kills every process still carrying its tag."""

POOL = "mythloop"
HOST = "127.0.0.1"


def repo_root() -> Path:
    """The checkout the deployments load flows from (a path every worker must see)."""
    return Path(__file__).resolve().parents[2]


@dataclass
class ScaleStack:
    """Start with `start()` (or `with`); `stop()` leaves no process or port behind."""

    workers: int = 2
    worker_limit: int | None = 1
    """Flow runs one worker runs at once (1: a worker stands for one host's slot)."""
    database: Literal["postgres", "sqlite"] = "postgres"
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mythloop-scale-")))
    keep_root: bool = False
    """Keep the temporary folder (logs, results) after stop()."""
    worker_poll_s: float = 2.0
    """PREFECT_WORKER_QUERY_SECONDS (Prefect's default is 10 s)."""
    heartbeat_s: int = 30
    """PREFECT_FLOWS_HEARTBEAT_FREQUENCY of workers and parent (Prefect's default is 180 s)."""
    startup_timeout: float = 240.0
    tag: str = field(default_factory=lambda: uuid.uuid4().hex)
    port: int = field(default_factory=free_port)
    postgres: LocalPostgres | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    driver_pids: dict[str, int] = field(default_factory=dict)
    deployment_ids: dict[str, str] = field(default_factory=dict)

    # --- addresses and environment -----------------------------------------------
    @property
    def api_url(self) -> str:
        return f"http://{HOST}:{self.port}/api"

    def ports(self) -> list[int]:
        """Every TCP port this stack listens on."""
        return [self.port] + ([self.postgres.port] if self.postgres else [])

    def env(self, **extra: str) -> dict[str, str]:
        """Environment of every child: tagged, offline, Prefect home and state in root."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_API_", "PREFECT__"))}
        env.update({
            TAG_ENV: self.tag,
            "PREFECT_HOME": str(self.root / "prefect-home"),
            # The caller's state folder: shard processes share its embedding cache.
            "MYTHLOOP_STATE_DIR": str(get_settings().state_root),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_LOGGING_LEVEL": env.get("PREFECT_LOGGING_LEVEL", "INFO"),
            "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        })
        env.update(extra)
        return env

    def client_env(self) -> dict[str, str]:
        """For processes that talk to the API (workers, driver commands, the CLI)."""
        database = ({DATABASE_ENV: f"PostgreSQL on {self.postgres.host}:{self.postgres.port}"}
                    if self.postgres else {})  # named by the CLI's line if it goes down
        # Shard processes send a flow-run heartbeat every 30 s (Prefect's least); the parent
        # sweep, reading the same setting, resubmits a running shard that goes quiet.
        return self.env(PREFECT_API_URL=self.api_url,
                        PREFECT_FLOWS_HEARTBEAT_FREQUENCY=str(self.heartbeat_s),
                        PREFECT_WORKER_QUERY_SECONDS=str(self.worker_poll_s),
                        PREFECT_WORKER_PREFETCH_SECONDS=str(self.worker_poll_s), **database)

    # --- lifecycle ---------------------------------------------------------------
    def start(self) -> ScaleStack:
        """Database, server, work pool, workers; on any failure everything is stopped."""
        try:
            self._timed("database", self._start_database)
            self._timed("server", self._start_server)
            self._timed("workers", lambda: self.add_workers(self.workers))
        except BaseException:
            self.stop()
            raise
        return self

    def _timed(self, what: str, step) -> None:
        started = time.monotonic()
        step()
        self.timings[f"start_{what}_s"] = round(time.monotonic() - started, 2)

    def _start_database(self) -> None:
        if self.database == "postgres":
            # its own temporary folder: the `postgres` account cannot enter root's 0700 one
            self.postgres = LocalPostgres(env=self.env()).start()

    def _start_server(self) -> None:
        extra = {"PREFECT_SERVER_API_HOST": HOST, "PREFECT_SERVER_API_PORT": str(self.port),
                 "PREFECT_SERVER_UI_API_URL": self.api_url, "PREFECT_UI_API_URL": self.api_url}
        if self.postgres:
            extra["PREFECT_SERVER_DATABASE_CONNECTION_URL"] = self.postgres.url
        proc = self.spawn("server", [sys.executable, "-m", "prefect", "server", "start",
                                      "--host", HOST, "--port", str(self.port)], self.env(**extra))
        self._wait(lambda: http_ok(f"{self.api_url}/health"), "Prefect server", "server", proc)

    def _pool_exists(self) -> bool:
        return api.pool_exists(self.api_url, POOL)

    def add_workers(self, count: int) -> None:
        """Start `count` more workers on the pool and wait until the API lists them online.

        The first worker creates the process work pool (`--type process`); the others start
        once it exists, so no two race to create it.
        """
        start = sum(1 for name in self.procs if name.startswith("worker-"))
        names = [f"worker-{start + i + 1}" for i in range(count)]
        batches = [names] if self._pool_exists() else [names[:1], names[1:]]
        for batch in (b for b in batches if b):
            for name in batch:
                argv = [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL,
                        "--type", "process", "--name", name, "--install-policy", "never"]
                if self.worker_limit:
                    argv += ["--limit", str(self.worker_limit)]
                self.spawn(name, argv, self.client_env(), cwd=repo_root())
            self._wait(lambda b=batch: set(b) <= set(api.online_workers(self.api_url, POOL)),
                       f"workers {', '.join(batch)}", batch[0], self.procs[batch[0]])

    def spawn(self, name: str, argv: list[str], env: dict[str, str],
              cwd: Path | None = None) -> subprocess.Popen:
        """Start a child of the stack (tagged, own session, log under root/logs); stop() ends it."""
        proc = start_process(argv, env=env, log_path=self.root / "logs" / f"{name}.log", cwd=cwd)
        self.procs[name] = proc
        return proc

    def _wait(self, check, what: str, log: str, proc: subprocess.Popen) -> None:
        try:
            wait_until(check, self.startup_timeout, what, alive=proc, interval=1.0)
        except (TimeoutError, RuntimeError) as exc:
            raise RuntimeError(f"{exc}; its log ends:\n{self.log(log)}") from None

    def driver(self, *args: str, timeout: float, name: str) -> dict:
        """Run `python -m mythloop_app.scale.driver ARGS` against the API; its JSON answer."""
        out = self.root / f"{name}.json"
        proc = self.spawn(name, [sys.executable, "-m", "mythloop_app.scale.driver", *args,
                                  "--out", str(out)], self.client_env(), cwd=repo_root())
        self.driver_pids[name] = proc.pid
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_process(proc, grace=10.0)
            raise TimeoutError(f"driver {name} ran past {timeout:.0f} s; its log ends:\n"
                               f"{self.log(name)}") from None
        finally:
            self.procs.pop(name, None)
        if code != 0 or not out.exists():
            raise RuntimeError(f"driver {name} failed (exit {code}); its log ends:\n"
                               f"{self.log(name)}")
        return json.loads(out.read_text(encoding="utf-8"))

    def deploy(self, timeout: float = 180.0) -> dict:
        """The condition-run and sharded-sweep deployments on the pool, from this checkout."""
        self.deployment_ids = self.driver("deploy", "--pool", POOL, "--source",
                                          str(repo_root()), timeout=timeout, name="deploy")
        return self.deployment_ids

    def run_sweep(self, config, timeout: float) -> dict:
        """The parent sweep as a child process here; its shards run on the workers."""
        path = self.root / "sweep-config.json"
        write_text_atomic(path, config.model_dump_json(indent=2))
        return self.driver("sweep", "--config", str(path), timeout=timeout, name="parent")

    def kill_worker(self, name: str, flow_run_pid: int | None = None) -> None:
        """SIGKILL worker NAME (a host lost), with the flow run process it started, if given:
        no clean-up of either, as when the host goes away."""
        proc = self.procs.pop(name)
        shard = [flow_run_pid, *tree_pids(flow_run_pid)] if flow_run_pid else []
        signal_group(proc.pid, signal.SIGKILL)  # the worker leads a session of its own
        for pid in shard:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def log(self, name: str, lines: int = 30) -> str:
        return log_tail(self.root / "logs" / f"{name}.log", lines)

    def stop(self) -> None:
        """Workers, then the server, then the database; then anything still carrying the tag."""
        for name in sorted(self.procs, key=lambda n: (n == "server", n)):
            stop_process(self.procs[name], grace=20.0)
        self.procs.clear()
        if self.postgres:
            self.postgres.stop()
        # Flow runs of the workers live in sessions of their own.
        kill_marked(TAG_ENV, self.tag)
        if not self.keep_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self) -> dict:
        """Processes, ports and temporary folders of this stack still there (none after stop())."""
        folders = [self.root] + ([self.postgres.root] if self.postgres else [])
        return {"pids": marked_pids(TAG_ENV, self.tag),
                "ports": [p for p in self.ports() if port_listening(HOST, p)],
                "dirs": [str(d) for d in folders if d.exists() and not self.keep_root]}

    def __enter__(self) -> ScaleStack:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
