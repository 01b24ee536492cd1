"""Text from a scene or a model is data: cleaned before a terminal, a log line or an artifact.

A scene's exception message, a `Text` label, a log tail, a file name the scene chose, a model's
reply: any of them may hold terminal escape sequences (OSC 52 writes the clipboard, OSC 0 the
window title, OSC 8 makes hyperlinks, CSI 2J clears the screen), other control characters,
Unicode bidi overrides that show text in another order than it is read, or markdown that an
artifact viewer turns into an image it fetches. The sinks call these functions:

    clean_line(text)   one line for a terminal or a log: escape sequences removed whole, every
                       other control, format (Cf: bidi overrides and isolates, zero-width
                       characters), surrogate (a non-UTF-8 file name) and unassigned character
                       dropped or replaced, line breaks made spaces, the length capped
    clean_text(text)   the same, keeping newlines and tabs (a log tail, a multi-line message)
    md_text(text)      clean_line, then escaped for markdown: no raw HTML, no link, image,
                       emphasis, heading, table cell break or autolink survives
    md_code(text)      clean_line as a markdown code span

Standard library only (the categories are unicodedata's), so any layer may import it.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["clean_line", "clean_text", "md_text", "md_code", "LINE_LIMIT", "TEXT_LIMIT"]

LINE_LIMIT = 2000  # characters a cleaned line keeps by default
TEXT_LIMIT = 20000  # characters a cleaned block keeps by default
ELLIPSIS = "…"

# Escape sequences, removed as a whole so that their parameters do not show up as text:
# string commands (OSC, DCS, SOS, PM, APC; 7-bit and 8-bit introducers) up to BEL or ST (or
# the end of the text, where a terminal would swallow the rest), CSI with its parameters, and
# any other ESC sequence (intermediates and a final byte) or a lone ESC. Each alternative is a
# single pass over character classes: linear in the text, no backtracking.
_ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b[P\]X^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"
)
_INTRODUCER = re.compile(r"[\x1b\x90\x98\x9b\x9d\x9e\x9f]")
_DROPPED = frozenset({"Cc", "Cf", "Cn"})  # controls, format characters, unassigned
_BREAKS = frozenset({"Zl", "Zp"})  # LINE / PARAGRAPH SEPARATOR
_REPLACEMENT = "\ufffd"  # for a lone surrogate (a file name that is not UTF-8)


def _clean(text: object, limit: int, keep_breaks: bool) -> str:
    if not isinstance(text, str):
        text = str(text)
    text = text[: limit * 8 + 4096]  # bounded work, whatever the input's size
    if _INTRODUCER.search(text):
        text = _ESCAPE_SEQUENCE.sub("", text)
    if not text.isprintable():  # (printable: no Cc, Cf, Cs, Co, Cn, Zl, Zp; ASCII space only)
        if keep_breaks:
            text = text.replace("\r\n", "\n")
        out = []
        for ch in text:
            if ch in "\n\t\r":
                out.append(ch if keep_breaks and ch != "\r" else "\n" if keep_breaks else " ")
                continue
            category = unicodedata.category(ch)
            if category in _DROPPED:
                continue
            if category == "Cs":
                out.append(_REPLACEMENT)
            elif category in _BREAKS:
                out.append("\n" if keep_breaks else " ")
            else:  # other separators (spaces) and private-use characters show as they are
                out.append(ch)
        text = "".join(out)
    if len(text) > limit:
        text = text[: max(0, limit - 1)] + ELLIPSIS
    return text


def clean_line(text: object, limit: int = LINE_LIMIT) -> str:
    """TEXT as one line safe for a terminal or a log: no escape sequence, control, format or
    surrogate character, line breaks and tabs as spaces, at most LIMIT characters."""
    return _clean(text, limit, keep_breaks=False)


def clean_text(text: object, limit: int = TEXT_LIMIT) -> str:
    """TEXT safe for a terminal, a log or a prompt, keeping its newlines and tabs (a log tail,
    a traceback); at most LIMIT characters."""
    return _clean(text, limit, keep_breaks=True)


# What could start markup in a line of text is backslash-escaped (CommonMark escapes any ASCII
# punctuation): code spans, emphasis, links and images, headings, strikethrough, math; `.`, `:`
# and `@` too, so that no bare address becomes an autolink. `&` `<` `>` become entities (no raw
# HTML, no entity of the text's own), and `|` one too, which no table splits a cell on. (The
# text is one line put after other text: `-`, `+`, `=` start nothing there.)
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#!~.:@$^])")
_MD_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "|": "&#124;"})


def md_text(text: object, limit: int = LINE_LIMIT) -> str:
    """TEXT as one line of markdown that shows as the text itself: cleaned as `clean_line`,
    then every character that could start markup escaped (a table cell too)."""
    return _MD_SPECIAL.sub(r"\\\1", clean_line(text, limit)).translate(_MD_HTML)


def md_code(text: object, limit: int = LINE_LIMIT) -> str:
    """TEXT (cleaned as `clean_line`) as a markdown code span: its fence is longer than any
    run of backticks inside, so nothing in it is markup."""
    text = clean_line(text, limit)
    if not text:
        return ""
    runs = [len(run) for run in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"
