"""The film flow under the Prefect harness: stages, cache, verify, render, repair, fallbacks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mythloop.mythos.plan.request import FilmRequest
from mythloop.mythos.plan.stages import STAGES

pytestmark = pytest.mark.usefixtures("prefect_harness")

FAKES = Path(__file__).parent / "fakes"
STAGE_NAMES = [spec.slug for spec in STAGES]


def _film(request: FilmRequest):
    from mythloop_flows.film import film

    return film(request, return_state=True)


def _manifest(run_dir: Path) -> dict:
    return json.loads((Path(run_dir) / "manifest.json").read_text())


def _only_run_dir(runs: Path) -> Path:
    dirs = sorted((runs / "mythos").iterdir())
    assert len(dirs) == 1, dirs
    return dirs[0]


def _fake_claude_bin(tmp_path: Path) -> Path:
    """A `claude` on PATH that runs the fake CLI with this interpreter (mythloop importable)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "claude"
    wrapper.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.path.insert(0, {str(FAKES)!r})\n"
        f"runpy.run_path({str(FAKES / 'claude')!r}, run_name='__main__')\n")
    wrapper.chmod(0o755)
    return bin_dir


@pytest.mark.slow
def test_offline_film_renders_and_a_rerun_calls_no_model(tmp_path):
    runs = tmp_path / "runs"
    request = FilmRequest(prompt="the heat equation", backend="offline", render=True,
                          runs_dir=runs)
    state = _film(request)
    assert state.is_completed(), state.message
    result = state.result()
    video = Path(result.video_path)
    assert video.is_file() and video.suffix == ".mp4"
    assert Path(result.run_dir) in video.parents  # media stays inside the run dir
    duration = float(subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0",
         str(video)], capture_output=True, text=True, check=True).stdout)
    assert duration > 1.0
    manifest = _manifest(result.run_dir)
    assert [s["stage"] for s in manifest["stages"]] == [*STAGE_NAMES, "codegen"]
    assert manifest["static_check"]["passed"] is True
    assert manifest["renders"][-1]["ok"] is True
    # where the renders' CPU went: each render's tree, and the warm workers' start-up
    rendered = [r for r in manifest["renders"] if r["cache"] == "miss"]
    assert all(r["cpu_s"] > 0 for r in rendered), manifest["renders"]
    if rendered:  # (a film whose scenes all came from the scene cache starts no worker)
        assert manifest["warm_workers"]["started"] >= 1
        assert manifest["warm_workers"]["startup_cpu_s"] > 0
    assert manifest["model_calls"] == 7
    assert all(s["prefect_task_run_id"] for s in manifest["stages"])
    for spec in STAGES:
        assert (Path(result.run_dir) / spec.artifact_name).is_file()

    # The same film again: every stage and codegen come from the cache, no model call.
    again = _film(request.model_copy(update={"render": False}))
    assert again.is_completed(), again.message
    second = _manifest(again.result().run_dir)
    assert second["model_calls"] == 0
    assert all(stage["cached"] for stage in second["stages"])
    # ... and --fresh calls the model again.
    fresh = _film(request.model_copy(update={"render": False, "fresh": True}))
    assert _manifest(fresh.result().run_dir)["model_calls"] == 7


@pytest.mark.slow
def test_render_timeout_spends_no_repair(tmp_path):
    runs = tmp_path / "runs"
    # 0.1 s: no render of a real scene finishes in it, however warm its worker (a 1 s budget
    # let a warm worker render the title scene in time on a fast machine).
    state = _film(FilmRequest(prompt="a render that runs out of time", backend="offline",
                              render=True, render_timeout=0.1, runs_dir=runs))
    assert state.is_failed()
    with pytest.raises(Exception, match=r"timed out after 0\.1s"):
        state.result()
    manifest = _manifest(_only_run_dir(runs))
    assert manifest["renders"] and {r["kind"] for r in manifest["renders"]} == {"timeout"}
    assert manifest.get("repairs", []) == []
    assert manifest["render_timed_out"] is True
    # in the UI: each render that ran out of time is Failed, with the timeout it had as a
    # tag (Prefect shows a task run's tags, not its timeout); so is each model step's
    from test_film_scenes import _task_runs

    from mythloop.settings import get_settings

    runs_of_film = _task_runs(manifest["prefect_flow_run_id"], {"render-scene-01", "intent"})
    renders = [run for run in runs_of_film if run.name.startswith("render-")]
    assert renders and {run.state_type.value for run in renders} == {"FAILED"}
    assert all("timeout:0.1s" in run.tags for run in renders), [r.tags for r in renders]
    assert all("timed out" in run.state.message for run in renders)
    stage_timeout = f"timeout:{get_settings().timeout + 60:g}s"
    assert stage_timeout in next(run for run in runs_of_film if run.name == "intent").tags


def test_the_film_form_says_where_a_film_lands_in_plain_text():
    """The UI's Run form reads each field's description as markdown: a `<runs_dir>` there
    is an HTML tag it drops. No description holds one."""
    import re

    from prefect.utilities.callables import parameter_schema

    from mythloop_flows.film import film

    fields = parameter_schema(film.fn).model_dump()["definitions"]["FilmRequest"]["properties"]
    described = {name: field.get("description", "") for name, field in fields.items()}
    assert [name for name, text in described.items() if re.search(r"<[A-Za-z/]", text)] == []
    assert "RUNS_DIR/mythos/STAMP-SLUG/" in described["runs_dir"]


@pytest.mark.slow
def test_missing_latex_spends_no_repair(tmp_path, monkeypatch):
    # A PATH with ffmpeg but no latex / dvisvgm: an environment problem, not the scene's.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("ffmpeg", "ffprobe"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    runs = tmp_path / "runs"
    state = _film(FilmRequest(prompt="euler without latex", backend="offline", render=True,
                              runs_dir=runs))
    assert state.is_failed()
    manifest = _manifest(_only_run_dir(runs))
    # the LaTeX scenes fail for the environment (the title-only scene may render)
    assert "missing_tool" in {r["kind"] for r in manifest["renders"]}
    assert manifest.get("repairs", []) == []
    assert "latex" in manifest["failed"]["error"].lower()


def test_degenerate_stage_is_retried_once_then_fails_naming_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_claude_bin(tmp_path)}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MODE", "mythos")
    monkeypatch.setenv("FAKE_DEGENERATE", "math-director")
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_CALL_LOG", str(calls))
    runs = tmp_path / "runs"
    state = _film(FilmRequest(prompt="the wave equation", backend="claude", model="model-a",
                              render=False, runs_dir=runs, fresh=True))
    assert state.is_failed()
    with pytest.raises(Exception) as info:
        state.result()
    message = str(info.value)
    run_dir = _only_run_dir(runs)
    assert "math-director" in message and "twice" in message
    assert str(run_dir / "04_math_dossier.retry.raw.txt") in message
    steps = [line.split()[1] for line in calls.read_text().splitlines()]
    assert steps == ["intent", "cartographer", "curriculum", "math-director", "math-director"]
    assert "math-director" in _manifest(run_dir)["failed"]["error"]


def test_fallback_ladder_is_recorded_in_the_manifest(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_claude_bin(tmp_path)}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MODE", "mythos")
    monkeypatch.setenv("FAKE_BAD_MODELS", "model-a")
    calls = tmp_path / "calls.log"
    monkeypatch.setenv("FAKE_CALL_LOG", str(calls))
    runs = tmp_path / "runs"
    state = _film(FilmRequest(prompt="the wave equation", backend="claude", model="model-a",
                              fallbacks=["model-b"], render=False, runs_dir=runs, fresh=True))
    assert state.is_completed(), state.message
    manifest = _manifest(state.result().run_dir)
    assert manifest["model"] == "model-b"
    [switch] = manifest["model_fallbacks"]
    assert switch["from"] == "model-a" and switch["to"] == "model-b"
    # model-a failed before answering anything; model-b then answered all 7 calls (sticky)
    models = [line.split()[0] for line in calls.read_text().splitlines()]
    assert models == ["model-b"] * 7
    assert "model unavailable" in switch["reason"]


def test_auth_failure_never_falls_back_and_says_how_to_log_in(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{_fake_claude_bin(tmp_path)}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MODE", "auth")
    runs = tmp_path / "runs"
    state = _film(FilmRequest(prompt="the wave equation", backend="claude", model="model-a",
                              fallbacks=["model-b"], render=False, runs_dir=runs, fresh=True))
    assert state.is_failed()
    with pytest.raises(Exception, match="(?i)log ?in"):
        state.result()
    assert "model_fallbacks" not in _manifest(_only_run_dir(runs))


@pytest.mark.slow
def test_replayed_heat_equation_film_repairs_once_and_plays_30s(tmp_path):
    """The recorded codegen is a 5-scene film whose scene 1 carries a real Manim error; the
    recorded scoped repair fixes that scene alone and the stitched film plays >= 30 s."""
    from typer.testing import CliRunner

    from mythloop.mythos.media.avmux import duration_of
    from mythloop_app.cli import app

    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["film", "the heat equation", "--backend", "replay",
                                      "--render", "-q", "l", "--runs-dir", str(runs)])
    assert result.exit_code == 0, result.output
    run_dir = _only_run_dir(runs)
    assert f"run dir: {run_dir}" in result.output
    manifest = _manifest(run_dir)
    video = Path(manifest["video_path"])
    assert video == run_dir / "film.mp4"
    assert f"video:   {video}" in result.output
    duration = float(subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0",
         str(video)], capture_output=True, text=True, check=True).stdout)
    assert duration >= 30.0
    scenes = manifest["scenes"]
    assert len(scenes) >= 3
    assert abs(duration - sum(s["duration"] for s in scenes)) <= 0.5
    for scene in scenes:
        assert scene["ok"] and scene["renders"] and scene["renders"][-1]["kind"] == "ok"
        assert {"file", "duration", "render_seconds", "attempts", "cache"} <= set(scene)
    [repair] = manifest["repairs"]
    assert repair["scene"] == 1  # scoped: only the broken scene was repaired
    assert [r["kind"] for r in scenes[0]["renders"]] == ["scene_error", "ok"]
    assert all(len(s["renders"]) == 1 for s in scenes[1:])
    assert manifest["replay"] is True and manifest["model"].startswith("replay")
    # every stage says it answered from a recording, not a live model
    assert all(stage["model"].startswith("replay:") for stage in manifest["stages"]
               if stage["stage"] in STAGE_NAMES)
    assert duration_of(video) == pytest.approx(duration, abs=0.01)
