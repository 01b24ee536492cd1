"""Fallback ladder, error classes and the backend factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from mythloop.llm import (
    LLM_TAG,
    AuthError,
    BackendTimeout,
    FallbackLadder,
    ModelUnavailable,
    NetworkError,
    RateLimited,
    ServerError,
    get_backend,
    is_retriable,
)
from mythloop.llm.cli_backends import ClaudeBackend
from mythloop.llm.errors import EmptyOutput, MissingCassette, ToolMissing, classify_failure

FAKES = Path(__file__).parent / "fakes"


@pytest.fixture(autouse=True)
def fakes_on_path(monkeypatch):
    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    for name in ("MYTHLOOP_COMMAND", "M2M_COMMAND", "MYTHLOOP_MODEL", "M2M_MODEL", "FAKE_MODE",
                 "FAKE_BAD_MODELS", "MYTHLOOP_MODEL_FALLBACKS", "M2M_MODEL_FALLBACKS"):
        monkeypatch.delenv(name, raising=False)


class CountingClaude(ClaudeBackend):
    """The real claude backend (driving the fake CLI) that remembers each model it was asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[str] = []

    def complete(self, prompt, *, model=None, **kwargs):
        self.asked.append(model or self.model)
        return super().complete(prompt, model=model, **kwargs)


def test_ladder_walks_records_and_sticks(monkeypatch):
    monkeypatch.setenv("FAKE_BAD_MODELS", "opus-x,sonnet-x")
    backend = CountingClaude(model="opus-x")
    ladder = FallbackLadder(backend, ["sonnet-x", "haiku-ok", "last-resort"])
    first = ladder.complete("hello", timeout=30)
    assert first.model == "haiku-ok" and "Claude (haiku-ok)" in first.text
    assert backend.asked == ["opus-x", "sonnet-x", "haiku-ok"]
    assert len(ladder.switches) == 1
    switch = ladder.switches[0]
    assert (switch["from"], switch["to"]) == ("opus-x", "haiku-ok")
    assert "opus-x" in switch["reason"] and "sonnet-x" in switch["skipped"]
    assert first.fallbacks == ladder.switches and first.attempts == 3

    # Sticky: the next call goes straight to the model that answered.
    second = ladder.complete("again", timeout=30)
    assert backend.asked[3:] == ["haiku-ok"] and second.model == "haiku-ok"
    assert ladder.model == "haiku-ok" and len(ladder.switches) == 1


def test_auth_never_falls_back(monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "auth")
    backend = CountingClaude(model="opus")
    ladder = FallbackLadder(backend, ["sonnet", "haiku"])
    with pytest.raises(AuthError):
        ladder.complete("hello", timeout=30)
    assert backend.asked == ["opus"] and ladder.switches == [] and ladder.model == "opus"


def test_retriable_errors_propagate_without_walking(monkeypatch):
    monkeypatch.setenv("FAKE_MODE", "ratelimit")
    backend = CountingClaude(model="opus")
    ladder = FallbackLadder(backend, ["sonnet"])
    with pytest.raises(RateLimited):
        ladder.complete("hello", timeout=30)
    assert backend.asked == ["opus"] and ladder.model == "opus"


def test_every_model_failing_names_them_all(monkeypatch):
    monkeypatch.setenv("FAKE_BAD_MODELS", "a-model,b-model")
    ladder = FallbackLadder(ClaudeBackend(model="a-model"), ["b-model"])
    with pytest.raises(ModelUnavailable, match="a-model, b-model"):
        ladder.complete("hello", timeout=30)
    assert ladder.switches == []


def test_ladder_models_default_from_settings(monkeypatch):
    monkeypatch.setenv("M2M_MODEL_FALLBACKS", "sonnet, haiku ,opus")
    ladder = FallbackLadder(ClaudeBackend(model="opus"))
    assert ladder.models == ["opus", "sonnet", "haiku"]


@pytest.mark.parametrize(
    ("stdout", "stderr", "expected"),
    [
        ("Not logged in · Please run /login", "", AuthError),
        ("", "Failed to authenticate. API Error: 401 invalid authentication credentials", AuthError),
        ('API Error: 529 {"type":"overloaded_error"}', "", ModelUnavailable),
        ("", "API Error: 500 Internal server error", ServerError),
        ("", "Error: connect ECONNREFUSED 127.0.0.1:443", NetworkError),
        ("", "429 Too Many Requests", RateLimited),
    ],
)
def test_classify_real_failure_texts(stdout, stderr, expected):
    err = classify_failure("claude", 1, stdout, stderr, model="m")
    assert type(err) is expected
    assert "\n" not in str(err)


def test_is_retriable_exactly_the_transient_ones():
    retriable = [BackendTimeout("t"), RateLimited("r"), ServerError("s"), NetworkError("n")]
    final = [AuthError("a"), EmptyOutput("e"), ModelUnavailable("m"), MissingCassette("c"),
             ToolMissing("x"), ValueError("v")]
    assert all(is_retriable(e) for e in retriable)
    assert not any(is_retriable(e) for e in final)


def test_factory_names_and_errors():
    assert LLM_TAG == "llm"
    with pytest.raises(ValueError, match="gemini, claude, codex, openai, simulated, oracle, replay, offline"):
        get_backend("gpt-9000")
    with pytest.raises(ValueError, match="bad options"):
        get_backend("claude", colour="blue")
    assert get_backend("claude", model="haiku").model == "haiku"
