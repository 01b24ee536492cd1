"""When a sweep stops on its own: most of a round's learning turns failed for one reason.

The rule (docs/operations.md, "A failing sweep stops"): after each round's learn step, when more
than half of that round's learning turns failed and the most common reason accounts for more
than half of them, the sweep stops (`SweepFailing`) instead of measuring and learning on: a
missing login, a refused key or an unreachable endpoint fails every later turn the same way,
and a night measured on verdicts that never came would be recorded as if it were real. The
round is not marked complete, so the rerun after the fix redoes it and goes on.

Turns that fail now and then (a timeout here, a rate limit there) stay under the threshold:
the round goes on, the failures are counted in the report.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

__all__ = ["SweepFailing", "failing_reason", "reason_key"]


class SweepFailing(RuntimeError):
    """The sweep stopped: most learning turns of a round failed for the same reason."""


def reason_key(status: str, error: str | None) -> str:
    """What makes two failures "the same reason": the status and the error text with its
    numbers (elapsed seconds, ids, ports) blanked."""
    return f"{status}: {re.sub(r'[0-9]+', '#', (error or '').strip())[:160]}"


def failing_reason(rows: Iterable) -> tuple[str, int, int] | None:
    """(an example error, how many turns failed for it, how many turns the round had) when
    more than half of the round's turns failed for one reason; None otherwise. `rows` are
    the round's TurnRows (`ok`, `status`, `error`)."""
    rows = list(rows)
    failed = [row for row in rows if not row.ok]
    if not rows or 2 * len(failed) <= len(rows):
        return None
    counts = Counter(reason_key(row.status, row.error) for row in failed)
    key, count = counts.most_common(1)[0]
    if 2 * count <= len(rows):
        return None
    example = next(row for row in failed if reason_key(row.status, row.error) == key)
    return (example.error or example.status), count, len(rows)
