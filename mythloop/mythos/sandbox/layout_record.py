"""The layout probe's record, read as hostile data.

The probe runs inside the render, beside the scene's code, so the scene can overwrite its
record with anything (a 50 MB file, numbers where strings go, a forged "all clear"). The
parent reads it here and nowhere else: at most MAX_RECORD_BYTES from a regular file
(opened without following links), parsed and checked in one pass against a strict schema
(pydantic, in its Rust core: types are not coerced, numbers are finite and bounded, lists
and strings have a maximum length). A record that fails any of that is an `unchecked`
finding with one line saying why, never an exception; a record that passes is a plain dict
of the known fields only (what the scene cache keeps).

The record is a hint (docs/sandbox.md, "The layout verdict"): what it claims about the
texts is judged by `layout.check_layout`, and `layout_frames` holds it against the frames
that were rendered.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mythloop.mythos.sandbox.layout import Finding

__all__ = ["MAX_RECORD_BYTES", "MAX_SNAPSHOTS", "MAX_ITEMS", "MAX_TOTAL_ITEMS", "read_record",
           "parse_record", "unchecked"]

MAX_RECORD_BYTES = 4 << 20  # a real record is some 100 KB (a 30 s scene, a dozen items)
MAX_SNAPSHOTS = 10_000  # a sample every 0.25 s: 40 minutes of animation
MAX_ITEMS = 25_000  # texts and drawings in one snapshot
MAX_TOTAL_ITEMS = 200_000
MAX_PARTS = 64  # parts of one formula
_LIMIT = 1e4  # frame units: a frame is about 14 x 8

Coord = Annotated[float, Field(ge=-_LIMIT, le=_LIMIT)]
Box = tuple[Coord, Coord, Coord, Coord]
Label = Annotated[str, Field(max_length=200)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore", frozen=True)


class Part(_Strict):
    label: Label
    box: Box


MAX_INK = 400  # ink pieces of one kind in one drawing (the probe keeps at most 120)
Segment = tuple[Coord, Coord, Coord, Coord]


class Ink(_Strict):
    lines: Annotated[list[Segment], Field(max_length=MAX_INK)] = []
    areas: Annotated[list[Box], Field(max_length=MAX_INK)] = []
    width: Annotated[float, Field(ge=0, le=10)] = 0.0  # the strokes' width, frame units


class Item(_Strict):
    kind: Literal["text", "math", "shape"]
    label: Label
    box: Box
    em_px: Annotated[float, Field(ge=0, le=_LIMIT)] | None = None
    zoom: Annotated[float, Field(gt=0, le=_LIMIT)] | None = None
    lane: Annotated[str, Field(max_length=20)] | None = None
    parts: Annotated[list[Part], Field(max_length=MAX_PARTS)] | None = None
    ink: Ink | None = None


class Snapshot(_Strict):
    at: Annotated[str, Field(max_length=40,
                             pattern=r"^(start|end|wait \d{1,6}|play \d{1,6} at \d{1,6}\.\d{2}s)$")]
    t: Annotated[float, Field(ge=0, le=1e6)]
    camera: Annotated[list[Coord], Field(max_length=8)] | None = None
    frame: tuple[Annotated[float, Field(gt=0, le=_LIMIT)], Annotated[float, Field(gt=0, le=_LIMIT)]]
    items: Annotated[list[Item], Field(max_length=MAX_ITEMS)]


class Record(_Strict):
    scene: Annotated[str, Field(max_length=200)] | None = None
    pixel_height: Annotated[int, Field(gt=0, le=10_000)]
    probe_version: Annotated[int, Field(ge=0, le=1000)]
    sample_s: Annotated[float, Field(gt=0, le=60)] | None = None
    snapshots: Annotated[list[Snapshot], Field(max_length=MAX_SNAPSHOTS)]


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def unchecked(detail: str, what: str = "the layout record") -> Finding:
    """The finding for a record (or, WHAT, the frames) the check could not use."""
    return Finding(kind="unchecked", at="end", t=0.0, what=what, detail=detail)


def _where(error: Mapping[str, Any]) -> str:
    """An error's place in the record, e.g. `snapshots[3].items[0].label`: field names are
    the schema's (unknown keys are ignored), indexes are numbers; nothing the scene wrote."""
    out = ""
    for part in error.get("loc", ()):
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = re.sub(r"[^A-Za-z0-9_]", "", str(part))[:30]
            out += f".{name}" if out else name
    return out or "the record"


def parse_record(data: bytes) -> tuple[dict | None, Finding | None]:
    """DATA (the record's bytes) -> (the record as a plain dict of known fields, None), or
    (None, an `unchecked` finding saying what is wrong)."""
    try:
        record = Record.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        message = _CONTROL.sub("?", str(first.get("msg", "invalid")))[:160]
        more = exc.error_count() - 1
        return None, unchecked(f"the layout record is malformed: {_where(first)}: {message}"
                               + (f" (and {more} more problem(s))" if more > 0 else "")
                               + "; the scene must not write media/layout.json itself")
    total = sum(len(s.items) for s in record.snapshots)
    if total > MAX_TOTAL_ITEMS:
        return None, unchecked(f"the layout record lists {total} items (at most "
                               f"{MAX_TOTAL_ITEMS}); use fewer texts and drawings")
    dumped = record.model_dump(mode="python", exclude_none=True)
    for snap in dumped["snapshots"]:  # labels are scene text: no control characters
        for item in snap["items"]:
            item["label"] = _CONTROL.sub("?", item["label"])
            for part in item.get("parts", ()):
                part["label"] = _CONTROL.sub("?", part["label"])
    return dumped, None


def read_record(path: Path | str, max_bytes: int = MAX_RECORD_BYTES
                ) -> tuple[dict | None, Finding | None]:
    """The record at PATH (a file the scene could write): (record, None) or (None, an
    `unchecked` finding: missing, not a regular file, over MAX_BYTES, malformed). Reads at
    most MAX_BYTES + 1 bytes, never follows a link (neither the file nor its folder: the
    scene owns `media/` and could make either one)."""
    path = Path(path)
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                         dir_fd=folder)
        finally:
            os.close(folder)
    except FileNotFoundError:
        return None, unchecked("the render left no layout record (the probe did not finish, "
                               "or the scene removed media/layout.json)")
    except OSError as exc:
        return None, unchecked(f"the layout record cannot be opened ({exc.strerror}); "
                               "the scene must not touch media/layout.json")
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, unchecked("the layout record is not a regular file")
        if info.st_size > max_bytes:
            return None, unchecked(f"layout record too large ({info.st_size} bytes, at most "
                                   f"{max_bytes}); use fewer texts and drawings")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        return None, unchecked(f"the layout record cannot be read ({exc.strerror})")
    finally:
        os.close(fd)
    if len(data) > max_bytes:  # it grew after the stat
        return None, unchecked(f"layout record too large (over {max_bytes} bytes); use "
                               "fewer texts and drawings")
    return parse_record(data)
