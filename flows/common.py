"""What the flows share."""

from __future__ import annotations

from prefect import get_run_logger


def say(message: str) -> None:
    """A console line for the person watching, as well as the Prefect log."""
    print(message, flush=True)
    try:
        get_run_logger().info(message)
    except Exception:  # outside a run context
        pass
