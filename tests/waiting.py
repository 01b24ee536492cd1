"""How tests wait: one polling loop, `mythloop.procs.wait_until`, for every deadline.

`wait_for` returns the first truthy value of `check` and raises at the deadline (TimeoutError
naming what it waited for; RuntimeError at once when the watched process exits);
`settle` waits the same way but returns the last value seen either way, so that the test's
own assert after it says what was wrong. Timeouts only catch a hang: a loaded machine may
need all of them (wall-clock bounds belong in bench/).

Imported as `from waiting import wait_for, settle` (tests/ is on sys.path, like `browser`).
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable
from typing import TypeVar

from mythloop import procs

__all__ = ["wait_for", "settle"]

T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float, what: str, *,
             alive: subprocess.Popen | None = None, interval: float = 0.5) -> T:
    """Poll `check` until it returns a truthy value, and return that value."""
    seen: list[T] = []

    def ready() -> bool:
        seen[:] = [check()]
        return bool(seen[0])

    procs.wait_until(ready, timeout, what, alive=alive, interval=interval)
    return seen[0]


def settle(check: Callable[[], T], timeout: float, *, until: Callable[[T], object] = bool,
           interval: float = 0.5) -> T:
    """Poll `check` until `until` holds for its value (by default: a truthy value) or `timeout`
    passes; its last value either way."""
    seen: list[T] = []

    def ready() -> bool:
        seen[:] = [check()]
        return bool(until(seen[0]))

    with contextlib.suppress(TimeoutError):
        procs.wait_until(ready, timeout, "settle", interval=interval)
    return seen[0]
