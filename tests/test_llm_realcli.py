"""The real gemini / claude CLIs, without credentials, are classified (auth) within the timeout.

Run with `pytest -m realcli tests/test_llm_realcli.py -s`; skipped when a CLI is absent.
Install them locally with `npm install --prefix .mythloop/npm @google/gemini-cli @anthropic-ai/claude-code`.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from mythloop.llm import AuthError, BackendError, ToolMissing, get_backend

REPO = Path(__file__).resolve().parents[1]
CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "GEMINI_API_KEY",
                   "GOOGLE_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA",
                   "GOOGLE_APPLICATION_CREDENTIALS", "MYTHLOOP_COMMAND", "M2M_COMMAND")


def _find(binary: str) -> str | None:
    for folder in (REPO / ".mythloop" / "npm" / "node_modules" / ".bin", REPO / ".mythloop" / "npm" / "bin"):
        if (folder / binary).exists():
            return str(folder / binary)
    return shutil.which(binary)


@pytest.mark.realcli
@pytest.mark.parametrize(("backend", "model"), [("gemini", "gemini-2.5-flash"), ("claude", "sonnet")])
def test_real_cli_without_credentials_is_auth_error(backend, model, tmp_path, monkeypatch):
    exe = _find(backend)
    if exe is None:
        pytest.skip(f"{backend} CLI not installed")
    for name in CREDENTIAL_VARS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "empty-home"
    home.mkdir()
    monkeypatch.chdir(tmp_path)
    cli = get_backend(backend, command=exe, model=model, home=home)
    started = time.monotonic()
    with pytest.raises(BackendError) as err:
        cli.complete("Say OK.", timeout=90)
    seconds = time.monotonic() - started
    message = str(err.value)
    print(f"\n[realcli] {backend}: {type(err.value).__name__} after {seconds:.1f}s: {message}")
    assert isinstance(err.value, AuthError | ToolMissing), message
    assert "\n" not in message and message.strip()
