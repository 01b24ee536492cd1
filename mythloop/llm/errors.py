"""Errors raised by model backends, and the rules that classify CLI failures.

Every failure a backend can meet maps to one class here, so callers decide by
type: retry (`is_retriable`), walk the fallback ladder (`falls_back`), or stop
with one clear line (auth, missing tool, missing cassette, configuration).
"""

from __future__ import annotations

import re

__all__ = [
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
    "login_hint",
    "classify_failure",
    "AUTH_MARKERS",
]


class BackendError(Exception):
    """Base class: a model call did not produce a usable answer."""


class AuthError(BackendError):
    """Not logged in / bad credentials: never retried, never falls back."""


class RetriableError(BackendError):
    """A transient failure worth retrying with backoff."""


class BackendTimeout(RetriableError):
    """The call ran past its deadline (the process group was killed)."""


class RateLimited(RetriableError):
    """HTTP 429 / quota exhausted."""


class ServerError(RetriableError):
    """HTTP 5xx from the provider."""


class NetworkError(RetriableError):
    """Connection refused, DNS failure, reset."""


class EmptyOutput(BackendError):
    """The call succeeded but the reply was empty or could not be parsed."""


class ModelUnavailable(BackendError):
    """Model-specific failure (unknown, not found, overloaded): walks the fallback ladder."""


class MissingCassette(BackendError):
    """The replay backend has no recording for the requested key."""


class ToolMissing(BackendError):
    """The CLI executable of a backend is not on PATH."""


class ConfigError(BackendError):
    """The call cannot succeed as configured (e.g. untrusted workspace); fix the setup."""


class CLIFailed(BackendError):
    """A CLI exited non-zero for a reason none of the rules recognise."""


def is_retriable(exc: BaseException) -> bool:
    """True for timeouts, rate limits, 5xx and network errors; False for everything else."""
    return isinstance(exc, RetriableError)


def falls_back(exc: BaseException) -> bool:
    """True when another model may succeed where this one failed (never for auth)."""
    return isinstance(exc, ModelUnavailable | EmptyOutput | CLIFailed)


_LOGIN_HINTS = {
    "claude": "run `claude` then `/login`, or set ANTHROPIC_API_KEY",
    "gemini": "set GEMINI_API_KEY, or run `gemini` once to log in",
    "codex": "run `codex login`, or set OPENAI_API_KEY",
    "openai": "set MYTHLOOP_OPENAI_API_KEY (and MYTHLOOP_OPENAI_BASE_URL for a local server)",
}


def login_hint(backend: str) -> str:
    """The command that fixes an authentication failure of `backend`."""
    return _LOGIN_HINTS.get(backend, f"log in to the {backend} backend")


# Markers seen in the real CLIs' outputs (reference.md, plus gemini's own text).
AUTH_MARKERS = (
    "not logged in",
    "please run /login",
    "failed to authenticate",
    "invalid authentication credentials",
    "authentication_error",
    "please set an auth method",
    "invalid api key",
    "api key not valid",
    "unauthorized",
)
_AUTH_RE = re.compile(r"\b401\b")
_UNTRUSTED_MARKERS = ("not running in a trusted directory",)
_MODEL_MARKERS = (
    "model not found",
    "modelnotfounderror",
    "model_not_found",
    "not_found_error",
    "unknown model",
    "invalid model",
    "issue with the selected model",
    "requested entity was not found",
    "does not exist or you do not have access",
    "overloaded",
)
_RATE_MARKERS = ("rate limit", "rate_limit", "too many requests", "resource_exhausted", "quota")
_RATE_RE = re.compile(r"\b429\b")
_SERVER_MARKERS = ("internal server error", "service unavailable", "bad gateway", "api_error")
_SERVER_RE = re.compile(r"\b50[0-4]\b")
_NETWORK_MARKERS = (
    "econnrefused",
    "enotfound",
    "eai_again",
    "econnreset",
    "etimedout",
    "fetch failed",
    "getaddrinfo",
    "connection error",
    "network error",
    "socket hang up",
)

# Exit codes of gemini-cli (packages/cli: FatalAuthenticationError=41, untrusted folder=55).
_GEMINI_AUTH_EXIT = 41
_GEMINI_UNTRUSTED_EXIT = 55


def first_line(text: str, limit: int = 300) -> str:
    """The first non-blank line of `text`, shortened to `limit` characters."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def classify_failure(
    backend: str, rc: int | None, stdout: str, stderr: str, *, model: str | None = None
) -> BackendError:
    """Map a failed CLI call (non-zero exit or unusable output) to one error."""
    blob = f"{stdout}\n{stderr}".lower()
    detail = first_line(stderr) or first_line(stdout) or "no output"
    where = f"{backend} (model {model})" if model else backend
    if (backend == "gemini" and rc == _GEMINI_AUTH_EXIT) or any(m in blob for m in AUTH_MARKERS) or _AUTH_RE.search(blob):
        return AuthError(f"{where}: not authenticated ({detail}); fix: {login_hint(backend)}")
    if (backend == "gemini" and rc == _GEMINI_UNTRUSTED_EXIT) or any(m in blob for m in _UNTRUSTED_MARKERS):
        return ConfigError(
            f"{where}: workspace folder is not trusted ({detail}); "
            "fix: set GEMINI_CLI_TRUST_WORKSPACE=true"
        )
    if any(m in blob for m in _MODEL_MARKERS):
        return ModelUnavailable(f"{where}: model unavailable ({detail})")
    if _RATE_RE.search(blob) or any(m in blob for m in _RATE_MARKERS):
        return RateLimited(f"{where}: rate limited ({detail})")
    if _SERVER_RE.search(blob) or any(m in blob for m in _SERVER_MARKERS):
        return ServerError(f"{where}: provider server error ({detail})")
    if any(m in blob for m in _NETWORK_MARKERS):
        return NetworkError(f"{where}: network error ({detail})")
    return CLIFailed(f"{where}: exited {rc} ({detail})")
