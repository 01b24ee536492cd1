"""Counter and status rules for verdicts (reference section 1, "Verdicts and statuses").

- HELPFUL adds to `helpful` and resets the harmful streak.
- HARMFUL adds to `harmful` and to the streak.
- NEUTRAL changes nothing (no counter, no streak, no status); its row is still
  recorded, so it can be counted from the verdict log.
- `total` = helpful + harmful (NEUTRAL is not counted, as above).
- archived when the streak reaches 3; one-way.
- active -> suspect when total >= 5 and (harmful > 3 or harmful/total > 0.3).
- suspect -> active when harmful/total <= 0.15 and harmful <= 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["VERDICTS", "STATUSES", "Counters", "apply_verdict", "next_status"]

VERDICTS = ("HELPFUL", "HARMFUL", "NEUTRAL")
STATUSES = ("active", "suspect", "archived")
ARCHIVE_STREAK = 3
SUSPECT_MIN_TOTAL = 5


@dataclass(frozen=True)
class Counters:
    """A skill's verdict counters and status."""

    helpful: int = 0
    harmful: int = 0
    streak: int = 0
    status: str = "active"

    @property
    def total(self) -> int:
        return self.helpful + self.harmful


def next_status(c: Counters) -> str:
    """The status implied by the counters, starting from the current one."""
    if c.status == "archived" or c.streak >= ARCHIVE_STREAK:
        return "archived"
    total = c.total
    ratio = c.harmful / total if total else 0.0
    if c.status == "active" and total >= SUSPECT_MIN_TOTAL and (c.harmful > 3 or ratio > 0.3):
        return "suspect"
    if c.status == "suspect" and ratio <= 0.15 and c.harmful <= 1:
        return "active"
    return c.status


def apply_verdict(c: Counters, verdict: str) -> Counters:
    """Counters after one verdict (verdict already upper case and valid)."""
    if verdict == "HELPFUL":
        c = replace(c, helpful=c.helpful + 1, streak=0)
    elif verdict == "HARMFUL":
        c = replace(c, harmful=c.harmful + 1, streak=c.streak + 1)
    elif verdict == "NEUTRAL":
        return c
    else:
        raise ValueError(f"unknown verdict {verdict!r}; expected one of {VERDICTS}")
    return replace(c, status=next_status(c))
