"""`mythloop server` / `mythloop serve` edges and the deployment definitions (no server needed)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from mythloop.mythos.plan.request import FilmRequest
from mythloop.settings import Settings
from mythloop.sweep import SweepConfig
from mythloop_app.discovery import local_server_url

# Module-path entrypoints: the installed flows, from a checkout or a wheel, any working folder.
STAGE_FLOWS = {"nightly-sweep": "mythloop_flows.feedback_loop.sweep",
               "film": "mythloop_flows.film.film"}


def _mythloop(args: list[str], state: Path, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    full_env.update({"MYTHLOOP_STATE_DIR": str(state), "PREFECT_HOME": str(state / "prefect"),
                     **env})
    return subprocess.run([sys.executable, "-m", "mythloop_app.cli", *args], env=full_env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def serve_entry():
    from mythloop_app import deployments

    return deployments


def test_server_respects_an_existing_api_url(tmp_path):
    result = _mythloop(["server"], tmp_path, PREFECT_API_URL="http://127.0.0.1:4999/api")
    assert result.returncode == 0, result.stderr
    assert "http://127.0.0.1:4999/api" in result.stdout
    assert "not starting another" in result.stdout
    assert not (tmp_path / "server.json").exists()


def test_server_refuses_a_busy_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = _mythloop(["server", "--port", str(port)], tmp_path)
    assert result.returncode == 2
    assert f"port {port}" in result.stderr and "in use" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_serve_without_a_server_says_what_to_do(tmp_path):
    result = _mythloop(["serve"], tmp_path)
    assert result.returncode == 2
    assert "mythloop server" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("cron, timezone, word", [("61 2 * * *", "UTC", "cron"),
                                                  ("0 2 * * *", "Mars/Olympus", "Mars/Olympus")])
def test_a_bad_schedule_is_one_clear_line(serve_entry, cron, timezone, word):
    with pytest.raises(ValueError) as caught:
        serve_entry.build_deployments(cron=cron, timezone=timezone)
    line = serve_entry.first_error_line(caught.value)
    assert word in line and "--cron" in line
    assert "\n" not in line


def test_serve_waits_for_nothing_when_the_given_api_is_dead(tmp_path):
    result = _mythloop(["serve"], tmp_path, PREFECT_API_URL="http://127.0.0.1:9/api")
    assert result.returncode == 2
    assert "http://127.0.0.1:9/api does not answer" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_stale_server_file_is_ignored(tmp_path, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "server.json").write_text(json.dumps(
        {"api_url": "http://127.0.0.1:9/api", "pid": dead.pid}), encoding="utf-8")
    assert local_server_url() is None
    (tmp_path / "server.json").write_text(json.dumps(
        {"api_url": "http://127.0.0.1:9/api", "pid": os.getpid()}), encoding="utf-8")
    assert local_server_url() is None  # alive, but nothing answers there


def test_served_deployments_carry_schedule_and_form_defaults(serve_entry):
    nightly, film = serve_entry.build_deployments(cron="15 3 * * 1-5", timezone="Europe/Berlin")
    assert (nightly.name, film.name) == ("nightly-sweep", "film")
    assert (nightly.flow_name, film.flow_name) == ("sweep", "film")
    schedule = nightly.schedules[0].schedule
    assert (schedule.cron, schedule.timezone) == ("15 3 * * 1-5", "Europe/Berlin")
    assert not film.schedules
    assert nightly.entrypoint == STAGE_FLOWS["nightly-sweep"]
    assert film.entrypoint == STAGE_FLOWS["film"]
    # The parameters the UI pre-fills must be valid inputs of the flows.
    # the flow's defaults, with enough replicates for an interval (nights are compared)
    assert SweepConfig.model_validate(nightly.parameters["config"]) == SweepConfig(replicates=3)
    request = FilmRequest.model_validate(film.parameters["request"])
    assert request.backend == "offline" and request.render
    # The form: one `request` object whose fields carry descriptions and choices.
    schema = film._parameter_openapi_schema.model_dump()
    fields = schema["definitions"]["FilmRequest"]["properties"]
    assert set(fields["quality"]["enum"]) == {"l", "m", "h", "p", "k"}
    assert "offline" in fields["backend"]["enum"] and "replay" in fields["backend"]["enum"]
    assert fields["render"]["type"] == "boolean"
    assert fields["max_repairs"]["type"] == "integer"
    for name in ("prompt", "render", "quality", "backend", "max_repairs"):
        assert fields[name]["description"], name


def test_prefect_yaml_matches_the_served_deployments():
    from prefect.flows import load_flow_from_entrypoint

    from mythloop.data import data_path

    spec = yaml.safe_load(data_path("deployments", "prefect.yaml").read_text())
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert set(deployments) == set(STAGE_FLOWS)
    for name, entrypoint in STAGE_FLOWS.items():
        assert deployments[name]["entrypoint"] == entrypoint
        assert load_flow_from_entrypoint(entrypoint).name == name.removeprefix("nightly-")
        assert deployments[name]["work_pool"]["name"] == "mythloop"
    cron = deployments["nightly-sweep"]["schedules"][0]
    defaults = Settings.model_fields
    assert (cron["cron"], cron["timezone"]) == (defaults["schedule_cron"].default,
                                                defaults["timezone"].default)
    FilmRequest.model_validate(deployments["film"]["parameters"]["request"])
