"""Model backends: one `complete(prompt, ...) -> Completion` over CLIs, HTTP, simulation and replay.

    from mythloop.llm import get_backend
    backend = get_backend("claude", model="sonnet")
    reply = backend.complete("Explain X", system="Be brief", timeout=120)

Backends: gemini, claude, codex (vendor CLIs), openai (chat-completions HTTP),
simulated / oracle (judges for sweeps), replay (cassettes), offline (stand-ins; the class
lives in mythloop.mythos.standins.offline and is found through the `mythloop.backends`
entry-point group). Each backend class registers itself with `@register_backend(name)`
(mythloop.llm.registry); `backend_names()` lists them.
"""

from __future__ import annotations

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
from mythloop.llm.registry import backend_names, get_backend, register_backend

__all__ = [
    "LLM_TAG",
    "BACKEND_NAMES",
    "DEFAULT_TIMEOUT",
    "Backend",
    "Completion",
    "FallbackLadder",
    "get_backend",
    "backend_names",
    "register_backend",
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


def __getattr__(name: str):
    # BACKEND_NAMES is read from the registry on first use (importing the backend modules).
    if name == "BACKEND_NAMES":
        return backend_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
