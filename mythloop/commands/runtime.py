"""How CLI commands run flows: quiet console, heartbeats, and where the UI is."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

__all__ = ["flow_runtime", "ui_hint"]


@contextlib.contextmanager
def flow_runtime(*, verbose: bool = False) -> Iterator[None]:
    """Run flows from the CLI.

    - The repo root goes on sys.path so the top-level `flows` and `tasks` packages import
      from a source checkout.
    - Prefect's per-task console lines are hidden unless --verbose (the flows print one
      line per round or stage; every log still reaches the Prefect API and UI).
    - Without PREFECT_API_URL, a running `mythloop server` of this state folder is used
      (its `server.json`), so runs stay browsable in its UI.
    - Otherwise Prefect runs a temporary local server for this process;
      flow heartbeats (crash detection for long-lived servers) are turned off there, as
      each flow would otherwise wait ~1 s at exit for its heartbeat thread.
    """
    from mythloop.commands.server import local_server_url
    from mythloop.data import data_root

    if not os.environ.get("PREFECT_API_URL"):
        local = local_server_url()
        if local:  # set before Prefect reads its settings; child processes inherit it
            os.environ["PREFECT_API_URL"] = local

    root = str(data_root())
    if root not in sys.path:
        sys.path.insert(0, root)
    if not verbose:
        for handler in ("CONSOLE", "CONSOLE_FLOW_RUNS", "CONSOLE_TASK_RUNS"):
            os.environ.setdefault(f"PREFECT_LOGGING_HANDLERS_{handler}_LEVEL", "WARNING")
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    if PREFECT_API_URL.value():
        yield
        return
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield


def ui_hint() -> str:
    """Where to look at the runs in the Prefect UI."""
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL

    api = PREFECT_API_URL.value()
    if api:
        ui = PREFECT_UI_URL.value() or api.rsplit("/api", 1)[0]
        return f"Prefect UI: {ui}/runs"
    return ("Prefect UI: this run used a temporary server that has now stopped; start "
            "`mythloop server` and export the PREFECT_API_URL it prints to keep runs "
            "browsable")
