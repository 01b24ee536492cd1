"""Where the local Prefect server of this state folder is: `<state>/server.json`.

`mythloop server` writes the record while it runs; `sweep`, `film` and `serve` (through
`commands/runtime.py`) read it when PREFECT_API_URL is unset.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

__all__ = ["local_server_url", "server_file", "read_server_file"]


def server_file() -> Path:
    """Where a running `mythloop server` records its address."""
    from mythloop.settings import get_settings

    return get_settings().state_root / "server.json"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


def _healthy(api_url: str, timeout: float = 2.0) -> bool:
    """True when the Prefect API answers its health check."""
    try:
        with urllib.request.urlopen(f"{api_url}/health", timeout=timeout) as response:
            return response.status == 200
    except (OSError, ValueError):
        return False


def read_server_file() -> dict | None:
    """The running local server's record, or None when there is none (or it is stale)."""
    path = server_file()
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not _pid_alive(int(info.get("pid", 0) or 0)):
        return None
    return info


def local_server_url() -> str | None:
    """The API URL of a healthy `mythloop server` of this state folder, if one runs."""
    info = read_server_file()
    if info and _healthy(info["api_url"]):
        return info["api_url"]
    return None


