"""Where the local Prefect server of this state folder is: `<state>/server.json`.

`mythloop server` writes the record while it runs; `sweep`, `film` and `serve` (through
`commands/runtime.py`) read it when PREFECT_API_URL is unset.
"""

from __future__ import annotations

import json
from pathlib import Path

from mythloop.procs import http_ok, pid_alive

__all__ = ["api_ok", "local_server_url", "server_file", "read_server_file"]


def server_file() -> Path:
    """Where a running `mythloop server` records its address."""
    from mythloop.settings import get_settings  # noqa: PLC0415 (keeps pydantic_settings off the CLI's start-up)

    return get_settings().state_root / "server.json"


def api_ok(api_url: str, timeout: float = 2.0) -> bool:
    """True when the Prefect API answers its health check."""
    return http_ok(f"{api_url}/health", timeout=timeout)


def read_server_file() -> dict | None:
    """The running local server's record, or None when there is none (or it is stale)."""
    path = server_file()
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not pid_alive(int(info.get("pid", 0) or 0)):
        return None
    return info


def local_server_url() -> str | None:
    """The API URL of a healthy `mythloop server` of this state folder, if one runs."""
    info = read_server_file()
    if info and api_ok(info["api_url"]):
        return info["api_url"]
    return None


