"""Parse `<skill-used name=".." verdict=".." reason=".."/>` tags out of model text.

A small scanner, not one regex: a quoted value runs to its own closing quote,
so an apostrophe inside a double-quoted reason, or a `>` inside any quoted
value, is kept (the published regex stopped at the apostrophe and lost the
tag). Tag and attribute names are case-insensitive and `skill_used` is accepted.
Never raises; fragments that start like a tag but do not parse are counted.
"""

from __future__ import annotations

import html
import re

__all__ = ["parse_tags", "count_malformed_tags", "scan_tags"]

_START = re.compile(r"<\s*skill[-_]used\b", re.IGNORECASE)
_ATTR_NAME = re.compile(r"[A-Za-z_][\w-]*")
_UNQUOTED = re.compile(r"[^\s\"'<>/=`]+")
_WS = re.compile(r"\s*")


def _ws_end(text: str, pos: int) -> int:
    """Where the whitespace at `pos` ends (`\\s*` always matches)."""
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _parse_attrs(text: str, pos: int) -> tuple[dict[str, str], int] | None:
    """Read attributes from `pos` to the tag's `>`; None when the fragment is malformed."""
    attrs: dict[str, str] = {}
    n = len(text)
    while True:
        pos = _ws_end(text, pos)
        if text.startswith("/>", pos):
            return attrs, pos + 2
        if pos < n and text[pos] == ">":
            return attrs, pos + 1
        name = _ATTR_NAME.match(text, pos)
        if not name:
            return None
        pos = _ws_end(text, name.end())
        if pos >= n or text[pos] != "=":
            return None
        pos = _ws_end(text, pos + 1)
        if pos < n and text[pos] in "\"'":
            end = text.find(text[pos], pos + 1)
            # An unclosed quote would swallow the next tag: call the fragment malformed.
            if end < 0 or _START.search(text, pos, end):
                return None
            value, pos = text[pos + 1 : end], end + 1
        else:
            bare = _UNQUOTED.match(text, pos)
            if not bare:
                return None
            value, pos = bare.group(), bare.end()
        attrs.setdefault(name.group().lower(), html.unescape(value))


def scan_tags(text: object) -> tuple[list[dict[str, str]], int]:
    """Return (tags, malformed): tags with a name, and the count of tag-like
    fragments that did not parse or had no name."""
    if not isinstance(text, str):
        return [], 0
    tags: list[dict[str, str]] = []
    malformed = 0
    pos = 0
    while True:
        start = _START.search(text, pos)
        if not start:
            return tags, malformed
        parsed = _parse_attrs(text, start.end())
        if parsed is None:
            malformed += 1
            pos = start.end()
            continue
        attrs, pos = parsed
        name = " ".join(attrs.get("name", "").split())
        if not name:
            malformed += 1
            continue
        tags.append({
            "name": name,
            "verdict": attrs.get("verdict", "").strip().upper(),
            "reason": " ".join(attrs.get("reason", "").split()),
        })


def parse_tags(text: object) -> list[dict[str, str]]:
    """Every well-formed skill-used tag with a name, in order: {name, verdict, reason}."""
    return scan_tags(text)[0]


def count_malformed_tags(text: object) -> int:
    """How many skill-used tag fragments could not be parsed (or had no name)."""
    return scan_tags(text)[1]
