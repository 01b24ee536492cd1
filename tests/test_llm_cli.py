"""CLI backends against fake gemini/claude/codex executables that print the real formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mythloop.llm import (
    AuthError,
    BackendTimeout,
    CLIFailed,
    ConfigError,
    EmptyOutput,
    ModelUnavailable,
    NetworkError,
    RateLimited,
    ToolMissing,
    get_backend,
    is_retriable,
)
from mythloop.llm.cli_backends import parse_stream_json

FAKES = Path(__file__).parent / "fakes"


@pytest.fixture(autouse=True)
def fakes_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    for name in ("MYTHLOOP_COMMAND", "M2M_COMMAND", "MYTHLOOP_MODEL", "M2M_MODEL", "FAKE_MODE",
                 "FAKE_BAD_MODELS", "FAKE_ARGV_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def argv_file(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "argv.json"
    monkeypatch.setenv("FAKE_ARGV_FILE", str(path))
    return path


def _skill(root: Path, name: str) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: does {name}\n---\nbody\n")
    return d


# ------------------------------------------------------------------ gemini


def test_gemini_argv_env_and_delta_reply(tmp_path, argv_file):
    skills = [_skill(tmp_path / "pool", "regex-debugger"), _skill(tmp_path / "pool", "pytest-style")]
    ws = tmp_path / "sandbox" / "workspace"
    backend = get_backend("gemini", model="gemini-test", workspace=ws, skills=skills)
    reply = backend.complete("Fix my regex", timeout=30)

    seen = json.loads(argv_file.read_text())
    assert seen["argv"] == ["--prompt", "Fix my regex", "--model", "gemini-test",
                            "--approval-mode", "plan", "--output-format", "stream-json"]
    assert seen["cwd"] == str(ws.resolve())
    assert seen["env"]["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    home = Path(seen["home"])
    assert home != Path.home() and (home / ".gemini" / "skills").is_dir()
    assert (home / ".agents" / "skills").is_dir() and not any((home / ".gemini" / "skills").iterdir())
    # Skills are real copies, not symlinks.
    copied = ws / ".gemini" / "skills" / "regex-debugger"
    assert (copied / "SKILL.md").is_file() and not copied.is_symlink()
    assert (ws / ".gemini" / "skills" / "pytest-style" / "SKILL.md").is_file()

    # Deltas concatenated once; the final non-delta echo is not appended again.
    assert reply.text == "Answer from gemini-test: Fix my regex -- done."
    assert reply.model == "gemini-test" and reply.backend == "gemini" and not reply.simulated
    assert '"type": "init"' in reply.raw


def test_parse_stream_json_skips_echo_user_and_malformed_lines():
    lines = [
        {"type": "init", "model": "m"},
        {"type": "message", "role": "user", "content": "question"},
        {"type": "message", "role": "assistant", "content": "Hel", "delta": True},
        "not json at all",
        {"type": "message", "role": "assistant", "content": "lo", "delta": True},
        {"type": "message", "role": "assistant", "content": "Hello"},
    ]
    stdout = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
    text, events = parse_stream_json(stdout)
    assert text == "Hello"
    assert len(events) == 5


def test_gemini_system_text_leads_the_prompt(argv_file):
    get_backend("gemini").complete("task", system="be brief", timeout=30)
    argv = json.loads(argv_file.read_text())["argv"]
    assert argv[1].startswith("be brief") and argv[1].endswith("task")


def test_gemini_without_auth_is_auth_error_naming_the_fix(monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "auth")
    with pytest.raises(AuthError) as err:
        get_backend("gemini").complete("hi", timeout=30)
    msg = str(err.value)
    assert "GEMINI_API_KEY" in msg and "\n" not in msg
    assert not is_retriable(err.value)


def test_gemini_untrusted_folder_is_config_error(monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "untrusted")
    with pytest.raises(ConfigError, match="GEMINI_CLI_TRUST_WORKSPACE=true"):
        get_backend("gemini").complete("hi", timeout=30)


def test_gemini_unknown_model_is_model_unavailable(monkeypatch):
    monkeypatch.setenv("FAKE_BAD_MODELS", "gemini-nope")
    with pytest.raises(ModelUnavailable, match="gemini-nope"):
        get_backend("gemini", model="gemini-nope").complete("hi", timeout=30)


def test_gemini_quota_is_rate_limited_and_retriable(monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "ratelimit")
    with pytest.raises(RateLimited) as err:
        get_backend("gemini").complete("hi", timeout=30)
    assert is_retriable(err.value)


def test_prompt_words_do_not_decide_the_error_class(monkeypatch):
    # stdout echoes the prompt: a prompt about HTTP 401 must not turn a network error into auth.
    monkeypatch.setenv("FAKE_MODE", "network")
    with pytest.raises(NetworkError):
        get_backend("gemini").complete("why does my server answer 401 unauthorized?", timeout=30)


@pytest.mark.parametrize("mode", ["empty", "garbled"])
def test_gemini_empty_or_garbled_output(monkeypatch, mode):
    monkeypatch.setenv("FAKE_MODE", mode)
    with pytest.raises(EmptyOutput):
        get_backend("gemini").complete("hi", timeout=30)


def test_gemini_timeout_is_retriable(monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_MODE", "sleep")
    monkeypatch.setenv("FAKE_PIDFILE", str(tmp_path / "pids"))
    with pytest.raises(BackendTimeout) as err:
        get_backend("gemini").complete("hi", timeout=1)
    assert is_retriable(err.value)


def test_skills_without_workspace_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="workspace"):
        get_backend("gemini", skills=[_skill(tmp_path, "a-skill")])


# ------------------------------------------------------------------ claude


def test_claude_prompt_on_stdin_and_system_flag(argv_file):
    reply = get_backend("claude", model="opus").complete("Explain the heat equation", system="You are terse", timeout=30)
    seen = json.loads(argv_file.read_text())
    assert seen["argv"] == ["-p", "--output-format", "text", "--model", "opus",
                            "--append-system-prompt", "You are terse"]
    assert seen["stdin"] == "Explain the heat equation"
    assert reply.text.strip() == "Claude (opus) says: Explain the heat equation [system: You are terse]"


def test_claude_not_logged_in_is_auth_error(monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "auth")
    with pytest.raises(AuthError) as err:
        get_backend("claude").complete("hi", timeout=30)
    assert "/login" in str(err.value) and "ANTHROPIC_API_KEY" in str(err.value)


def test_claude_bad_model_and_empty(monkeypatch):
    monkeypatch.setenv("FAKE_BAD_MODELS", "claude-nope")
    with pytest.raises(ModelUnavailable):
        get_backend("claude", model="claude-nope").complete("hi", timeout=30)
    monkeypatch.setenv("FAKE_MODE", "empty")
    with pytest.raises(EmptyOutput):
        get_backend("claude").complete("hi", timeout=30)


def test_unrecognised_failure_is_cli_failed(tmp_path):
    script = tmp_path / "weird"
    script.write_text("#!/bin/sh\necho 'segfault in renderer' >&2\nexit 139\n")
    script.chmod(0o755)
    with pytest.raises(CLIFailed, match="exited 139"):
        get_backend("claude", command=str(script)).complete("hi", timeout=30)


def test_command_setting_and_missing_tool(monkeypatch):
    monkeypatch.setenv("M2M_COMMAND", "claude-not-installed")
    with pytest.raises(ToolMissing, match="@anthropic-ai/claude-code"):
        get_backend("claude").complete("hi", timeout=30)


# ------------------------------------------------------------------ codex


def test_codex_reads_the_last_message_file(argv_file):
    reply = get_backend("codex", model="gpt-test").complete("write a haiku", timeout=30)
    seen = json.loads(argv_file.read_text())
    assert seen["argv"][:3] == ["exec", "--model", "gpt-test"]
    assert seen["argv"][3] == "--output-last-message" and seen["argv"][-1] == "-"
    assert seen["stdin"] == "write a haiku"
    assert reply.text == "Codex (gpt-test) answered: write a haiku"
    assert "[codex] tokens used" in reply.raw


def test_codex_auth_and_empty(monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "auth")
    with pytest.raises(AuthError, match="codex login"):
        get_backend("codex").complete("hi", timeout=30)
    monkeypatch.setenv("FAKE_MODE", "empty")
    with pytest.raises(EmptyOutput):
        get_backend("codex").complete("hi", timeout=30)


def test_unstartable_executable_is_tool_missing(tmp_path):
    script = tmp_path / "claude"
    script.write_text("#!/nonexistent/interpreter\n")
    script.chmod(0o755)
    with pytest.raises(ToolMissing, match="cannot start"):
        get_backend("claude", command=str(script)).complete("hi", timeout=30)
