"""Foundation: settings and their seed aliases, the data loader, the CLI shell, doctor."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from mythloop.data import data_path, data_root
from mythloop.settings import get_settings


def test_seed_aliases_are_read(monkeypatch, tmp_path):
    monkeypatch.setenv("MEGA_EVAL_BLEND", "0")
    monkeypatch.setenv("MEGA_TRON_STORE", str(tmp_path / "s.db"))
    monkeypatch.setenv("M2M_MODEL_FALLBACKS", "opus, sonnet ,haiku")
    monkeypatch.setenv("M2M_RENDER_TIMEOUT", "42")
    monkeypatch.setenv("M2M_RUNS_DIR", str(tmp_path / "runs"))
    s = get_settings()
    assert s.eval_blend is False
    assert s.resolved_store_path == (tmp_path / "s.db").resolve()
    assert s.resolved_verdict_embeddings == (tmp_path / "verdicts.npz").resolve()
    assert s.model_fallbacks == ["opus", "sonnet", "haiku"]
    assert s.render_timeout == 42.0
    assert s.resolved_runs_dir == (tmp_path / "runs").resolve()


def test_project_prefix_wins_over_seed_alias(monkeypatch):
    monkeypatch.setenv("MEGA_EVAL_BLEND", "0")
    monkeypatch.setenv("MYTHLOOP_EVAL_BLEND", "1")
    assert get_settings().eval_blend is True


def test_defaults_live_in_the_state_folder(monkeypatch, tmp_path):
    for name in ("MEGA_TRON_STORE", "MYTHLOOP_STORE", "M2M_RUNS_DIR", "MYTHLOOP_RUNS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path / "state"))
    s = get_settings()
    for path in (s.prefect_home, s.cache_dir, s.resolved_store_path, s.resolved_runs_dir,
                 s.resolved_results_dir):
        assert (tmp_path / "state").resolve() in path.parents


def test_data_loader_finds_the_checkout_and_rejects_unknown_folders(monkeypatch, tmp_path):
    assert (data_root() / "pyproject.toml").is_file()
    assert data_path("fixtures").is_dir()
    with pytest.raises(ValueError):
        data_path("secrets")
    monkeypatch.setenv("MYTHLOOP_DATA_ROOT", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="MYTHLOOP_DATA_ROOT"):
        data_root()


def _cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("mythloop")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300, **kwargs)


def test_cli_help_lists_commands():
    result = _cli("--help")
    assert result.returncode == 0, result.stderr
    assert "doctor" in result.stdout


@pytest.mark.slow  # doctor starts a temporary Prefect server
def test_doctor_prints_one_line_per_check_and_passes_here(tmp_path):
    env = dict(os.environ, MYTHLOOP_STATE_DIR=str(tmp_path / "state"))
    env.pop("PREFECT_HOME", None)
    result = _cli("doctor", cwd=tmp_path, env=env)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    assert result.returncode == 0, result.stdout + result.stderr
    names = [line.split()[1] for line in lines]
    assert names[:4] == ["python", "embedding", "latex", "ffmpeg"]
    assert all(line.split()[0] in {"ok", "warn", "FAIL"} for line in lines)
    # the temporary Prefect home stayed inside the state folder
    assert (tmp_path / "state" / "prefect").is_dir()


@pytest.mark.slow  # doctor starts a temporary Prefect server
def test_doctor_names_the_fix_when_a_tool_is_missing(tmp_path):
    env = dict(os.environ, MYTHLOOP_STATE_DIR=str(tmp_path / "state"),
               PATH=str(Path(sys.executable).parent))  # no latex, no ffmpeg
    result = _cli("doctor", cwd=tmp_path, env=env)
    assert result.returncode == 1
    ffmpeg_line = next(line for line in result.stdout.splitlines() if " ffmpeg " in line)
    assert ffmpeg_line.startswith("FAIL") and "apt-get install" in ffmpeg_line
    voice_line = next(line for line in result.stdout.splitlines() if " voice " in line)
    assert voice_line.startswith("warn") and "espeak-ng" in voice_line  # optional: a warning
