"""Can a model backend work here? Asked before any Prefect server starts.

    backend_problem("claude")     # None, or one line: what is missing and how to fix it

A vendor CLI (gemini, claude, codex) must be found (on PATH, in the project's npm folder, or
at MYTHLOOP_COMMAND) and answer a no-cost probe, `<cli> --version`, within a short deadline
(a CLI whose interpreter is missing, e.g. node, fails there). The OpenAI-compatible endpoint
needs its base URL, a key (unless the URL is a local server, which often needs none) and an
answer to `GET <base_url>/models` within a short deadline; a 401/403 there means the key is
refused. Backends that call no model (offline, replay, simulated, oracle) need nothing.

No account is asked to spend anything; the checks write nothing. Standard library plus
httpx (already a dependency of the openai backend), imported only when that backend is asked.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from mythloop.llm.errors import ToolMissing, first_line, login_hint
from mythloop.llm.runner import resolve_executable, run_cli
from mythloop.settings import get_settings

__all__ = ["backend_problem", "PROBE_TIMEOUT_S", "NO_MODEL_BACKENDS"]

PROBE_TIMEOUT_S = 1.5
"""The deadline of one probe (`--version`, GET /models): the whole check stays under 2 s."""

NO_MODEL_BACKENDS = frozenset({"offline", "replay", "simulated", "oracle"})

_CLI_BACKENDS = ("gemini", "claude", "codex")
_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


def backend_problem(name: str, *, command: str | None = None,
                    timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why backend `name` cannot work on this machine now (None: it can, as far as a no-cost
    probe tells). `command` overrides the CLI's executable (default: MYTHLOOP_COMMAND, else
    the backend's own binary)."""
    if name in NO_MODEL_BACKENDS:
        return None
    if name in _CLI_BACKENDS:
        return _cli_problem(name, command, timeout)
    if name == "openai":
        return _openai_problem(timeout)
    return None  # a backend from an entry point: it checks itself when called


def _cli_problem(name: str, command: str | None, timeout: float) -> str | None:
    command = command or os.environ.get("MYTHLOOP_COMMAND") or os.environ.get("M2M_COMMAND") \
        or name
    try:
        exe = resolve_executable(command, name)
    except ToolMissing as exc:
        return f"{exc} (or choose a backend that needs no account)"
    try:
        res = run_cli([exe, "--version"], timeout=timeout, grace=0.2)
    except OSError as exc:  # not executable, a bad interpreter line
        return (f"{name}: cannot start {exe} ({exc.strerror or exc}); reinstall it, or point "
                "MYTHLOOP_COMMAND at a working one")
    if res.timed_out:
        return (f"{name}: `{exe} --version` gave no answer within {timeout:g} s; check the "
                "installation (run it by hand), or choose another backend")
    if res.rc != 0:
        detail = first_line(res.stderr) or first_line(res.stdout) or "no output"
        return (f"{name}: `{exe} --version` failed (exit {res.rc}: {detail}); reinstall it, or "
                f"fix what it names; {login_hint(name)} once it runs")
    return None


def _openai_problem(timeout: float) -> str | None:
    import httpx  # noqa: PLC0415 (only this backend needs it; ~0.1 s)

    settings = get_settings()
    base = (settings.openai_base_url or "").rstrip("/")
    key = settings.openai_api_key
    fix = "set MYTHLOOP_OPENAI_BASE_URL (e.g. http://127.0.0.1:8000/v1) and MYTHLOOP_OPENAI_API_KEY"
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"openai: no endpoint configured (base URL {base!r}); {fix}"
    local = parts.hostname in _LOCAL_HOSTS
    if not key and not local:
        return f"openai: no API key for {base}; set MYTHLOOP_OPENAI_API_KEY (or OPENAI_API_KEY)"
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(f"{base}/models", headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        return f"openai: {base} gave no answer within {timeout:g} s; start the server or {fix}"
    except httpx.HTTPError as exc:
        reason = first_line(str(exc)) or type(exc).__name__
        return f"openai: cannot reach {base} ({reason}); start the server or {fix}"
    if response.status_code in (401, 403):
        return (f"openai: {base} refused the key (HTTP {response.status_code}); "
                f"{login_hint('openai')}")
    return None
