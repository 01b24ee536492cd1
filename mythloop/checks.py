"""Input checks the CLI runs before any Prefect server starts: each returns one plain line.

    dir_problem(path, what)          a folder that is a file, or cannot be created or written
    plain_errors(exc, labels)        pydantic's ValidationError in plain words, one line
    phrase(error)                    one pydantic error (a field or a CLI value) in plain words
    cron_problem(cron, timezone)     a cron expression or IANA timezone that is not valid
    replay_problem(topic, dir)       a replay topic with no recording

Nothing here writes anything that stays: the folder check makes a probe folder in the nearest
existing parent and removes it at once. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mythloop.data import data_path
from mythloop.llm.replay import topic_slug

__all__ = ["dir_problem", "plain_errors", "phrase", "cron_problem", "replay_problem", "recorded_topics"]


def dir_problem(path: str | os.PathLike, what: str) -> str | None:
    """Why `path` cannot serve as a folder mythloop writes into (None: it can).

    `what` names it in the message ("results dir", "runs dir"). A missing folder is fine when
    it can be created: a probe folder is made in its nearest existing parent and removed.
    """
    target = Path(path).expanduser().absolute()
    if target.exists():
        if not target.is_dir():
            return f"{what} {target} is a file, not a folder"
        parent = target
    else:
        parent = target.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"{what} {target} cannot be created: {parent} is a file, not a folder"
    try:
        probe = tempfile.mkdtemp(prefix=".mythloop-probe-", dir=parent)
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
        if target == parent:
            return f"{what} {target} is not writable ({reason})"
        return f"{what} {target} cannot be created ({parent}: {reason})"
    with contextlib.suppress(OSError):
        os.rmdir(probe)
    return None


_PHRASES = {
    "missing": "is required",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_parsing": "must be a number",
    "bool_parsing": "must be true or false",
    "string_type": "must be text",
    "list_type": "must be a list",
}


def phrase(error: dict) -> str:
    """What is wrong with one value (a pydantic error dict), in plain words (no pydantic
    jargon): "must be at least 1 (got 0)"."""
    kind, ctx = error.get("type", ""), error.get("ctx") or {}
    given = error.get("input")
    if isinstance(given, float) and given != given:  # nan: no bound is the reason
        return "must be a number, not nan"
    if kind == "string_too_short":
        low = ctx.get("min_length", 1)
        return "is empty" if low == 1 else f"must be at least {low} characters long"
    if kind == "string_too_long":
        return f"is longer than {ctx.get('max_length')} characters"
    bounds = {"greater_than_equal": ("at least", "ge"), "greater_than": ("more than", "gt"),
              "less_than_equal": ("at most", "le"), "less_than": ("less than", "lt")}
    if kind in bounds:
        words, key = bounds[kind]
        return f"must be {words} {ctx.get(key)} (got {error.get('input')})"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected')} (got {error.get('input')!r})"
    if kind in _PHRASES:
        return _PHRASES[kind]
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def plain_errors(exc: Exception, labels: dict[str, str] | None = None) -> str:
    """A pydantic ValidationError as one line: "the prompt is empty; --rounds must be at most
    100 (got 500)". `labels` maps a field name to what the user knows it as; by default a
    field is named as its CLI option (`max_repairs` -> --max-repairs). A message that already
    names its subject (a validator's own "the prompt is empty") is kept as it is."""
    labels = labels or {}
    parts = []
    for error in getattr(exc, "errors", lambda: [])():
        loc = error.get("loc") or ()
        name = str(loc[-1]) if loc else ""
        label = labels.get(name, "--" + name.replace("_", "-") if name else "the input")
        said = phrase(error)
        if error.get("type") == "value_error" and said.startswith(("the ", label)):
            parts.append(said)
        else:
            parts.append(f"{label} {said}")
    return "; ".join(dict.fromkeys(parts)) or " ".join(str(exc).split())


_CRON_FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31),
                ("month", 1, 12), ("day of week", 0, 7))
_CRON_NAMES = {3: "jan feb mar apr may jun jul aug sep oct nov dec".split(),
               4: "sun mon tue wed thu fri sat".split()}
_CRON_ALIASES = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight",
                 "@hourly"}


def _cron_value(text: str, index: int) -> int | None:
    names = _CRON_NAMES.get(index, [])
    if text.lower() in names:
        return names.index(text.lower()) + (1 if index == 3 else 0)
    return int(text) if text.isdigit() else None


def _cron_field_problem(field: str, index: int) -> str | None:
    """Why one of the five fields is not valid (None: it is); L, W, # and ? pass through to
    the scheduler's own check, which knows them."""
    what, low, high = _CRON_FIELDS[index]
    for item in field.split(","):
        body, _, step = item.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            return f"the {what} step {step!r} is not a positive number"
        if body in ("*", "?") or (index in (2, 4) and any(c in body for c in "LW#")):
            continue
        for end in body.split("-", 1):
            value = _cron_value(end, index)
            if value is None:
                return f"the {what} field has {end!r}"
            if not low <= value <= high:
                return f"the {what} {value} is outside {low}..{high}"
    return None


def cron_problem(cron: str | None, timezone: str | None) -> str | None:
    """Why the cron expression or the IANA timezone is not valid (None: both are; a None
    argument is not checked).

    A local check, so a bad schedule costs one line before any server is asked; what passes
    it is checked again by Prefect's own schedule model when the deployment is built."""
    fields = (cron or "").split()
    why = None
    if cron is not None and cron.strip().lower() not in _CRON_ALIASES:
        if len(fields) not in (5, 6):
            why = f"it has {len(fields)} fields, not 5"
        else:
            why = next((p for i, f in enumerate(fields[:5])
                        if (p := _cron_field_problem(f, i))), None)
    if why:
        return (f"cron {cron!r} is not a valid cron expression ({why}; five fields: minute "
                "hour day-of-month month day-of-week, e.g. '0 2 * * *'); fix --cron "
                "(or MYTHLOOP_SCHEDULE_CRON)")
    if timezone is None:
        return None
    try:
        if not timezone or timezone != timezone.strip():
            raise ValueError(timezone)
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return (f"timezone {timezone!r} is not an IANA timezone (e.g. UTC, Europe/Berlin); "
                "fix --timezone (or MYTHLOOP_TIMEZONE)")
    return None


def recorded_topics(cassette_dir: Path) -> list[str]:
    """The topics recorded under cassette_dir (each folder's first cassette names its topic)."""
    topics = []
    with contextlib.suppress(OSError):
        for folder in sorted(p for p in Path(cassette_dir).iterdir() if p.is_dir()):
            for file in sorted(folder.glob("*.json")):
                with contextlib.suppress(OSError, ValueError, AttributeError):
                    topics.append(str(json.loads(file.read_text("utf-8"))["topic"]))
                    break
            else:
                continue
    return topics


def replay_problem(topic: str, cassette_dir: Path | None = None) -> str | None:
    """Why the replay backend cannot play `topic` (no recording), None when it can."""
    if cassette_dir is None:
        if os.environ.get("MYTHLOOP_CASSETTE_DIR"):  # as the film flow looks them up
            cassette_dir = Path(os.environ["MYTHLOOP_CASSETTE_DIR"])
        else:
            cassette_dir = data_path("fixtures", "cassettes")
    slug = topic_slug(topic)
    if slug and any((Path(cassette_dir) / slug).glob("*.json")):
        return None
    known = ", ".join(repr(t) for t in recorded_topics(Path(cassette_dir))) or "none"
    return (f"no recording to replay for {topic!r} (recorded topics: {known}); use one of "
            "those, --backend offline, or a real model")
