"""OpenAI-compatible chat-completions over HTTP (hosted APIs and local servers alike)."""

from __future__ import annotations

import json
import time

import httpx

from mythloop.llm.base import DEFAULT_TIMEOUT, Backend, Completion
from mythloop.llm.errors import (
    AuthError,
    BackendError,
    BackendTimeout,
    EmptyOutput,
    ModelUnavailable,
    NetworkError,
    RateLimited,
    ServerError,
    first_line,
    login_hint,
)
from mythloop.llm.registry import register_backend
from mythloop.settings import get_settings

__all__ = ["OpenAIBackend"]


@register_backend("openai")
class OpenAIBackend(Backend):
    """POST `<base_url>/chat/completions`; base URL and key from settings unless given."""

    name = "openai"
    default_model = "gpt-4o-mini"

    def __init__(
        self, model: str | None = None, *, base_url: str | None = None, api_key: str | None = None
    ) -> None:
        settings = get_settings()
        super().__init__(model or settings.model)
        self.base_url = (base_url or settings.openai_base_url).rstrip("/")
        self.api_key = api_key if api_key is not None else settings.openai_api_key

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _http_error(self, response: httpx.Response, model: str) -> BackendError:
        """Map an HTTP status to the error class the callers act on."""
        body = response.text
        detail = first_line(_error_message(body)) or response.reason_phrase or "no body"
        where = f"openai (model {model}) at {self.base_url}"
        code = response.status_code
        if code in (401, 403):
            return AuthError(f"{where}: HTTP {code} ({detail}); fix: {login_hint('openai')}")
        if code == 429:
            return RateLimited(f"{where}: HTTP 429 rate limited ({detail})")
        if code >= 500:
            return ServerError(f"{where}: HTTP {code} ({detail})")
        low = body.lower()
        if code == 404 or (code == 400 and "model" in low and ("not" in low or "unknown" in low)):
            return ModelUnavailable(f"{where}: HTTP {code} model unavailable ({detail})")
        return BackendError(f"{where}: HTTP {code} ({detail})")

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """One chat-completions request; the reply is the first choice's message content."""
        model = model or self.model
        messages = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": prompt}
        ]
        started = time.monotonic()
        try:
            response = httpx.post(f"{self.base_url}/chat/completions",
                                  json={"model": model, "messages": messages},
                                  headers=self._headers(), timeout=timeout,
                                  follow_redirects=True)
        except httpx.TimeoutException as exc:
            raise BackendTimeout(f"openai (model {model}): no answer within {timeout:g}s") from exc
        except httpx.TransportError as exc:
            reason = first_line(str(exc)) or type(exc).__name__
            raise NetworkError(f"openai: cannot reach {self.base_url} ({reason})") from exc
        if response.is_error:
            raise self._http_error(response, model) from None
        raw = response.text
        elapsed = time.monotonic() - started
        text, answered_by = _parse_reply(raw, model)
        if not text.strip():
            raise EmptyOutput(f"openai (model {model}): the reply had no message content")
        return Completion(text=text, model=answered_by, elapsed_s=elapsed, raw=raw, backend=self.name)


def _error_message(body: str) -> str:
    """The `error.message` of an OpenAI-style error body, else the body itself."""
    try:
        err = json.loads(body).get("error")
    except (json.JSONDecodeError, AttributeError):
        return body
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err or body)


def _parse_reply(raw: str, model: str) -> tuple[str, str]:
    """(content of choices[0].message, model that answered) or EmptyOutput for garbled JSON."""
    try:
        data = json.loads(raw)
        content = data["choices"][0]["message"].get("content") or ""
    except (json.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise EmptyOutput(f"openai (model {model}): reply is not a chat completion: {raw[:120]!r}") from exc
    return str(content), str(data.get("model") or model)
