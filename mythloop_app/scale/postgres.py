"""A throwaway PostgreSQL cluster on loopback, from Debian's `postgresql` package.

initdb into a temporary folder, `postgres` on 127.0.0.1:<free port> with its unix socket in
that folder, one database for Prefect. PostgreSQL refuses to run as root, so under root the
cluster runs as the `postgres` account the package creates.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from mythloop.procs import free_port, log_tail, start_process, stop_process, wait_until

__all__ = ["LocalPostgres", "postgres_bin_dir", "ensure_postgres_installed"]

_APT_HINT = ("install it with `apt-get install -y --no-install-recommends postgresql` "
             "(or `make scale-demo`, which does)")


def postgres_bin_dir() -> Path | None:
    """Newest /usr/lib/postgresql/<major>/bin holding initdb, or the one on PATH."""
    def major(path: str) -> int:
        name = Path(path).parent.parent.name
        return int(name) if name.isdigit() else 0

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=major)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def ensure_postgres_installed() -> Path:
    """The PostgreSQL bin folder; apt-get installs the package when it is missing (as root)."""
    bin_dir = postgres_bin_dir()
    if bin_dir:
        return bin_dir
    if os.geteuid() != 0:
        raise RuntimeError(f"PostgreSQL is not installed: {_APT_HINT}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "postgresql"]):
        subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL)
    bin_dir = postgres_bin_dir()
    if not bin_dir:
        raise RuntimeError(f"apt-get installed postgresql but no initdb was found: {_APT_HINT}")
    return bin_dir


def _run_as() -> str | None:
    """The account to run PostgreSQL as: `postgres` under root, else the current user."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam("postgres")
    except KeyError as exc:
        raise RuntimeError("running as root but there is no `postgres` account: "
                           + _APT_HINT) from exc
    return "postgres"


@dataclass
class LocalPostgres:
    """One cluster, one database; use as a context manager (stops and deletes on exit)."""

    env: dict[str, str]
    """Environment for the server process (carries the stack's cleanup tag)."""
    database: str = "prefect"
    user: str = "prefect"
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mythloop-pg-")))
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        """SQLAlchemy URL Prefect's server takes (PREFECT_SERVER_DATABASE_CONNECTION_URL)."""
        return f"postgresql+asyncpg://{self.user}@{self.host}:{self.port}/{self.database}"

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    def start(self, timeout: float = 120.0) -> LocalPostgres:
        """initdb, start the server, create the database."""
        bin_dir = ensure_postgres_installed()
        account = _run_as()
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = self.root / "data"
        if account:
            pw = pwd.getpwnam(account)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        # trust is confined to this private cluster: loopback TCP and a socket in a 0700 folder.
        self._run([str(bin_dir / "initdb"), "-D", str(data), "-U", self.user, "--auth=trust",
                   "--encoding=UTF8", "--no-instructions"], account)
        self.proc = start_process(
            [str(bin_dir / "postgres"), "-D", str(data), "-p", str(self.port),
             "-c", f"listen_addresses={self.host}", "-c", f"unix_socket_directories={self.root}",
             "-c", "max_connections=200", "-c", "shared_buffers=64MB"],
            env=self.env, log_path=self.root / "postgres.out", user=account)
        wait_until(lambda: self._run([str(bin_dir / "pg_isready"), "-q", "-h", self.host,
                                      "-p", str(self.port)], account, check=False) == 0,
                   timeout, "PostgreSQL", alive=self.proc)
        self._run([str(bin_dir / "createdb"), "-h", self.host, "-p", str(self.port),
                   "-U", self.user, self.database], account)
        return self

    def _run(self, argv: list[str], account: str | None, check: bool = True) -> int:
        done = subprocess.run(argv, env=self.env, user=account, cwd=self.root,
                              capture_output=True, text=True)
        if check and done.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): "
                               f"{(done.stderr or done.stdout).strip()[-800:]}")
        return done.returncode

    def stop(self) -> None:
        """Fast shutdown (SIGINT), then delete the cluster's folder."""
        if self.proc is not None:
            stop_process(self.proc, first=signal.SIGINT, grace=30.0)
            self.proc = None
        for _ in range(10):  # a backend may still be unlinking its files for a moment
            shutil.rmtree(self.root, ignore_errors=True)
            if not self.root.exists():
                break
            time.sleep(0.5)

    def describe(self) -> str:
        return f"PostgreSQL on {self.host}:{self.port} (data in {self.root})"

    def log(self) -> str:
        return log_tail(self.root / "postgres.out")

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
