"""`ast.parse` that is safe to call from several threads at once.

CPython 3.11's AST converter keeps its recursion-depth bookkeeping per interpreter, not per
thread, so two threads parsing at the same time can fail with "SystemError: AST constructor
recursion depth mismatch" (renders and verifies run in Prefect's worker threads). One lock
serialises the parses; they take milliseconds.
"""

from __future__ import annotations

import ast
import threading

__all__ = ["parse"]

_LOCK = threading.Lock()


def parse(source: str, filename: str = "<unknown>") -> ast.Module:
    with _LOCK:
        return ast.parse(source, filename)
