"""Backend preflight (mythloop.llm.preflight) and the commands that ask it before Prefect starts.

The vendor CLIs are the fakes in tests/fakes (they answer `--version` as the real ones do, and
fail it as an npm-installed CLI without node does); the OpenAI-compatible endpoint is a real
HTTP server on loopback. With no usable backend, `sweep --judge X` and `film --backend X` cost
one stderr line, exit 2, and write nothing: no state folder, no results dir, no run dir.
"""

from __future__ import annotations

import http.server
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mythloop.llm.preflight import backend_problem

FAKES = Path(__file__).parent / "fakes"
MODEL_BACKENDS = ("claude", "gemini", "codex", "openai")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("MYTHLOOP_COMMAND", "M2M_COMMAND", "FAKE_MODE", "FAKE_VERSION",
                 "MYTHLOOP_OPENAI_BASE_URL", "OPENAI_BASE_URL", "MYTHLOOP_OPENAI_API_KEY",
                 "OPENAI_API_KEY", "MYTHLOOP_BACKEND"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def empty_path(tmp_path, monkeypatch) -> Path:
    """PATH is one empty folder: no CLI of any vendor (nor the project's npm folder)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path / "state"))
    return folder


@pytest.mark.parametrize("name", ["claude", "gemini", "codex"])
def test_a_missing_cli_is_named_with_its_install_command(empty_path, name):
    problem = backend_problem(name)
    assert problem is not None
    assert f"executable {name!r} not found on PATH" in problem
    assert "npm install -g @" in problem and "MYTHLOOP_COMMAND" in problem


@pytest.mark.parametrize("name", ["claude", "gemini", "codex"])
def test_a_cli_that_answers_its_version_is_usable(monkeypatch, name):
    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_MODE", "auth")  # --version costs nothing and asks no login
    assert backend_problem(name) is None


def test_a_cli_that_cannot_start_is_refused_with_its_own_words(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_VERSION", "broken")  # npm's CLI without node: exit 127
    problem = backend_problem("claude")
    assert "`--version` failed (exit 127: /usr/bin/env: 'node': No such file" in \
        problem.replace(str(FAKES / "claude") + " ", "")
    assert "/login" in problem  # what to do once it runs


def test_a_cli_that_hangs_on_its_version_is_refused_at_the_deadline(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_VERSION", "hang")
    problem = backend_problem("codex", timeout=0.5)
    assert problem is not None and "gave no answer within 0.5 s" in problem


def test_no_model_backends_need_nothing(empty_path):
    assert [backend_problem(n) for n in ("offline", "replay", "simulated", "oracle")] == [None] * 4


class _Endpoint(http.server.BaseHTTPRequestHandler):
    status = 200

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"data": []}')

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    """A real OpenAI-compatible /models on loopback; set `.status` to what it answers."""
    handler = type("Handler", (_Endpoint,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_openai_endpoint_reachable_with_a_key_is_usable(monkeypatch, endpoint):
    handler, url = endpoint
    monkeypatch.setenv("MYTHLOOP_OPENAI_BASE_URL", url)
    monkeypatch.setenv("MYTHLOOP_OPENAI_API_KEY", "sk-test")
    assert backend_problem("openai") is None
    handler.status = 401
    assert "refused the key (HTTP 401)" in backend_problem("openai")


def test_openai_without_a_key_or_an_endpoint_is_refused(monkeypatch):
    monkeypatch.setenv("MYTHLOOP_OPENAI_BASE_URL", "https://api.example.invalid/v1")
    assert "no API key" in backend_problem("openai")
    monkeypatch.setenv("MYTHLOOP_OPENAI_BASE_URL", "not a url")
    assert "no endpoint configured" in backend_problem("openai")
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("MYTHLOOP_OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    problem = backend_problem("openai")
    assert f"cannot reach http://127.0.0.1:{port}/v1" in problem
    assert "MYTHLOOP_OPENAI_BASE_URL" in problem


# ---- the commands ---------------------------------------------------------------------------


def _cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """The CLI in tmp_path with an empty PATH folder, the default state folder (./.mythloop)
    and no Prefect API: whatever it writes would show in tmp_path."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PREFECT_", "MYTHLOOP_", "M2M_", "OPENAI_", "FAKE_"))}
    base.update(PATH=str(empty), MYTHLOOP_OPENAI_BASE_URL="http://127.0.0.1:9/v1", **env)
    return subprocess.run([sys.executable, "-m", "mythloop_app.cli", *args], cwd=tmp_path,
                          env=base, capture_output=True, text=True, timeout=120)


def _one_line(proc: subprocess.CompletedProcess, tmp_path: Path) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"], "something was written"
    return lines[0]


@pytest.mark.parametrize("judge", MODEL_BACKENDS)
def test_sweep_with_an_unusable_judge_costs_one_line(tmp_path, judge):
    line = _one_line(_cli(tmp_path, "sweep", "--judge", judge, "--results-dir",
                          str(tmp_path / "results")), tmp_path)
    assert f"judge {judge!r} cannot work here" in line and "--judge simulated" in line
    assert ("not found on PATH" if judge != "openai" else "cannot reach") in line


@pytest.mark.parametrize("backend", MODEL_BACKENDS)
def test_film_with_an_unusable_backend_costs_one_line(tmp_path, backend):
    line = _one_line(_cli(tmp_path, "film", "the Fourier transform", "--backend", backend,
                          "--runs-dir", str(tmp_path / "runs")), tmp_path)
    assert f"backend {backend!r} cannot work here" in line


def test_film_with_no_backend_configured_says_so_and_lists_the_choices(tmp_path):
    line = _one_line(_cli(tmp_path, "film", "the Fourier transform", "--render"), tmp_path)
    assert "no model is configured" in line
    assert "--backend claude | gemini | codex | openai" in line and "MYTHLOOP_BACKEND" in line
    assert "--backend replay" in line and "'the heat equation'" in line  # recorded topics
    assert "--backend offline" in line and "does not follow the prompt" in line
    # configured through the environment, the backend is asked like a given one
    line = _one_line(_cli(tmp_path, "film", "the Fourier transform", MYTHLOOP_BACKEND="gemini"),
                     tmp_path)
    assert "backend 'gemini' cannot work here" in line


def test_serve_checks_the_configured_backend_first(tmp_path):
    line = _one_line(_cli(tmp_path, "serve", MYTHLOOP_BACKEND="codex"), tmp_path)
    assert "MYTHLOOP_BACKEND=codex cannot work here" in line and "not found on PATH" in line


def test_doctor_lists_each_backend(monkeypatch):
    from mythloop_app.commands.doctor import _backends

    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    monkeypatch.setenv("MYTHLOOP_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    checks = {check.name: check for check in _backends()}
    assert [checks[f"backend {n}"].ok for n in MODEL_BACKENDS] == [True, True, True, False]
    assert not any(check.required for check in checks.values())
    assert "cannot reach" in checks["backend openai"].detail and checks["backend openai"].fix


@pytest.mark.slow  # a CLI sweep with its own temporary Prefect server, ~30 s
def test_a_sweep_whose_turns_all_fail_stops_in_one_line_and_records_no_night(tmp_path):
    """What the probe cannot see (here: a claude CLI that answers --version but is not
    logged in) shows in the turns: round 1 fails alike, the sweep stops with one stderr line
    naming the reason, the count and the resume command, exits 1, leaves no report and no
    night, and its flow run is Failed in Prefect."""
    import json
    import sqlite3

    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "MYTHLOOP_", "M2M_", "FAKE_"))}
    env.update(PATH=f"{FAKES}:{os.environ['PATH']}", FAKE_MODE="auth",
               MYTHLOOP_STATE_DIR=str(tmp_path / "state"),
               PREFECT_HOME=str(tmp_path / "state" / "prefect"))
    proc = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "sweep", "--judge",
                           "claude", "--conditions", "c0", "--rounds", "2", "--results-dir",
                           str(results)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 1, (proc.stdout[-2000:], proc.stderr[-3000:])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("error: the sweep stopped: ")
    assert "learning turns of c0-rep1 round 1 failed for the same reason" in lines[0]
    assert "not authenticated" in lines[0]
    assert lines[0].endswith("rerun the same command to resume: " + shlex.join(
        [sys.executable, "-m", "mythloop_app.cli"]) + " sweep --judge claude "
                             f"--conditions c0 --rounds 2 --results-dir {results}")
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (results / "report.md").exists()
    assert not (tmp_path / "state" / "history.jsonl").exists()
    with sqlite3.connect(tmp_path / "state" / "prefect" / "prefect.db") as db:
        states = dict(db.execute("select name, state_type from flow_run"))
    assert states["sweep-claude"] == "FAILED", states
    turns = [json.loads(line) for line in
             (results / "c0-rep1" / "turns.jsonl").read_text().splitlines()]
    assert turns and all(t["status"] == "failed" for t in turns)
