"""Model backends: one `complete(prompt, ...) -> Completion` over CLIs, HTTP, simulation and replay.

    from mythloop.llm import get_backend
    backend = get_backend("claude", model="sonnet")
    reply = backend.complete("Explain X", system="Be brief", timeout=120)

Backends: gemini, claude, codex (vendor CLIs), openai (chat-completions HTTP),
simulated / oracle (judges for sweeps), replay (cassettes), offline (stand-ins).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from mythloop.llm.base import DEFAULT_TIMEOUT, Backend, Completion
from mythloop.llm.errors import (
    AuthError,
    BackendError,
    BackendTimeout,
    CLIFailed,
    ConfigError,
    EmptyOutput,
    MissingCassette,
    ModelUnavailable,
    NetworkError,
    RateLimited,
    RetriableError,
    ServerError,
    ToolMissing,
    falls_back,
    is_retriable,
)
from mythloop.llm.ladder import FallbackLadder

__all__ = [
    "LLM_TAG",
    "BACKEND_NAMES",
    "DEFAULT_TIMEOUT",
    "Backend",
    "Completion",
    "FallbackLadder",
    "get_backend",
    "BackendError",
    "AuthError",
    "RetriableError",
    "BackendTimeout",
    "RateLimited",
    "ServerError",
    "NetworkError",
    "EmptyOutput",
    "ModelUnavailable",
    "MissingCassette",
    "ToolMissing",
    "ConfigError",
    "CLIFailed",
    "is_retriable",
    "falls_back",
]

LLM_TAG = "llm"
"""Prefect tag carried by every model-call task (a global concurrency limit caps it)."""


def _registry() -> dict[str, Callable[..., Backend]]:
    # Imported lazily so `import mythloop.llm` stays cheap.
    from mythloop.llm.cli_backends import ClaudeBackend, CodexBackend, GeminiBackend
    from mythloop.llm.offline import OfflineBackend
    from mythloop.llm.openai_backend import OpenAIBackend
    from mythloop.llm.replay import ReplayBackend
    from mythloop.llm.simulated import OracleJudge, SimulatedJudge

    return {
        "gemini": GeminiBackend,
        "claude": ClaudeBackend,
        "codex": CodexBackend,
        "openai": OpenAIBackend,
        "simulated": SimulatedJudge,
        "oracle": OracleJudge,
        "replay": ReplayBackend,
        "offline": OfflineBackend,
    }


BACKEND_NAMES = ("gemini", "claude", "codex", "openai", "simulated", "oracle", "replay", "offline")


def get_backend(name: str, **options) -> Backend:
    """Build the backend called `name` with `options` (e.g. model=, command=, topic=, tiers=)."""
    registry = _registry()
    cls = registry.get((name or "").strip().lower())
    if cls is None:
        raise ValueError(f"unknown model backend {name!r}; choose one of: {', '.join(BACKEND_NAMES)}")
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        raise ValueError(f"backend {name!r}: bad options {sorted(options)} ({exc})") from None
    return cls(**options)
