"""The temporary Prefect server a CLI command starts when no server is set.

It is launched before the command imports Prefect, so its start overlaps the command's own;
a Prefect profile can still name a server, which only Prefect's settings (read after that
import) tell. Both ends against the real CLI in a subprocess: with no server set, the command
runs on a temporary server of its state folder and leaves no process behind; with a profile
that names a server, the runs go there and the server launched on the chance is stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_interrupts import EXE, _env, _processes_of

pytestmark = pytest.mark.slow

FILM = ["film", "the heat equation", "--backend", "replay", "-q", "l", "--fresh"]


def _film_runs(db: Path) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        return [state for (state,) in con.execute(
            "SELECT fr.state_type FROM flow_run fr JOIN flow f ON f.id = fr.flow_id "
            "WHERE f.name = 'film'")]


def test_with_no_server_set_the_film_runs_on_a_temporary_one_and_leaves_nothing(tmp_path):
    state = tmp_path / "state"
    proc = subprocess.run([EXE, *FILM], env=_env(state), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "no server was running, so a temporary one ran this command" in proc.stdout
    assert _film_runs(state / "prefect" / "prefect.db") == ["COMPLETED"]
    assert _processes_of(state) == []


def test_a_profile_that_names_a_server_gets_the_runs_and_no_temporary_server_is_left(
        tmp_path, prefect_harness):
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()  # the session's test server: what the profile names
    state = tmp_path / "state"
    home = state / "prefect"
    home.mkdir(parents=True)
    (home / "profiles.toml").write_text(
        f'active = "elsewhere"\n\n[profiles.elsewhere]\nPREFECT_API_URL = "{url}"\n',
        encoding="utf-8")
    proc = subprocess.run([EXE, *FILM], env=_env(state), capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "temporary one ran this command" not in proc.stdout
    run_dir = Path(next(line.split(":", 1)[1].strip() for line in proc.stdout.splitlines()
                        if line.startswith("run dir:")))
    run_id = json.loads((run_dir / "manifest.json").read_text())["prefect_flow_run_id"]

    async def read_run():
        from prefect.client.orchestration import get_client

        async with get_client() as client:
            return await client.read_flow_run(run_id)

    run = asyncio.run(read_run())  # the film's flow run is on the profile's server
    assert run.name == "film-the-heat-equation" and run.state and run.state.is_completed()
    assert not (home / "prefect.db").exists() or _film_runs(home / "prefect.db") == []
    assert _processes_of(state) == []


def test_a_stopped_server_is_not_signalled_again(tmp_path, monkeypatch):
    """The command stops its server at the end and again in its last cleanup: the second
    call must send nothing, as the server's process group number may name another group by
    then."""
    from mythloop import procs
    from mythloop_app.commands.tempserver import TemporaryServer

    server = TemporaryServer(prefect_home=tmp_path / "prefect")
    server.proc = procs.start_process([sys.executable, "-c", "import time; time.sleep(60)"],
                                      env=dict(os.environ), log_path=tmp_path / "sleep.log")
    sent: list[tuple[int, int]] = []
    real = procs.signal_group

    def counting(pgid: int, sig: int) -> bool:
        sent.append((pgid, sig))
        return real(pgid, sig)

    monkeypatch.setattr(procs, "signal_group", counting)
    server.stop(grace=5.0)
    assert server.proc.poll() is not None and sent, "the first stop signals the group"
    first = len(sent)
    server.stop(grace=5.0)
    assert len(sent) == first
