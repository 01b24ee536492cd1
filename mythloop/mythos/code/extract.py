"""Pull structured content out of raw model text: one JSON object, one python block, a scene class."""

from __future__ import annotations

import ast
import json
import re

from mythloop.mythos.code.safe_ast import parse

__all__ = [
    "ExtractionError",
    "extract_json_object",
    "extract_python_block",
    "find_scene_class",
    "base_class_name",
]

# JSON's own escapes; a backslash followed by anything else is LaTeX the model forgot to double.
_JSON_ESCAPES = set('"\\/bfnrtu')
# A raw-string prefix (r"...", R'...') that Python-minded models put in front of JSON strings.
_RAW_PREFIX = re.compile(r'(?<![A-Za-z0-9_"])[rR](?=")')
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
_SCENE_BASES = {"Scene", "ThreeDScene", "MovingCameraScene", "ZoomedScene"}


class ExtractionError(ValueError):
    """The model text held nothing that could be extracted."""


def _balanced_spans(text: str) -> list[tuple[int, int]]:
    """Spans of top-level {...} regions, string-aware so braces in strings don't count."""
    spans: list[tuple[int, int]] = []
    depth = 0
    start = -1
    quote: str | None = None
    escaped = False
    for index, char in enumerate(text):
        if quote is not None:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = None
            continue
        if char == '"' and depth > 0:
            quote = char
        elif char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                spans.append((start, index + 1))
    return spans


def _repair_backslashes(candidate: str) -> str:
    """Double every backslash inside strings that does not start a valid JSON escape."""
    out: list[str] = []
    in_string = False
    index = 0
    while index < len(candidate):
        char = candidate[index]
        if not in_string:
            in_string = char == '"'
            out.append(char)
            index += 1
            continue
        if char == "\\":
            nxt = candidate[index + 1] if index + 1 < len(candidate) else ""
            # \b, \f, \n, \r, \t before a letter are LaTeX commands (\beta, \frac, \nabla...),
            # not control characters: a model writing JSON by hand never means a form feed there.
            latex_like = nxt in "bfnrt" and index + 2 < len(candidate) and candidate[index + 2].isalpha()
            bad_unicode = nxt == "u" and not re.fullmatch(r"[0-9a-fA-F]{4}", candidate[index + 2 : index + 6])
            if nxt in _JSON_ESCAPES and not latex_like and not bad_unicode:
                out.append(char + nxt)
                index += 2
                continue
            out.append("\\\\")
            index += 1
            continue
        if char == '"':
            in_string = False
        elif char == "\n":
            char = "\\n"  # raw newlines inside strings are invalid JSON
        out.append(char)
        index += 1
    return "".join(out)


def _loads_lenient(candidate: str) -> object:
    """json.loads, then retried with raw-string prefixes removed and LaTeX backslashes doubled."""
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    cleaned = _RAW_PREFIX.sub("", candidate)
    try:
        return json.loads(_repair_backslashes(cleaned))
    except json.JSONDecodeError:
        pass
    # Trailing commas are the last common slip.
    return json.loads(re.sub(r",(\s*[}\]])", r"\1", _repair_backslashes(cleaned)))


def extract_json_object(text: str) -> dict:
    """Return the first complete JSON object in `text` (fenced, bare, or wrapped in prose)."""
    if not isinstance(text, str) or not text.strip():
        raise ExtractionError("model output is empty: no JSON object to extract")
    candidates: list[str] = []
    for lang, body in _FENCE.findall(text):
        if lang.lower() in ("", "json", "jsonc", "javascript", "js"):
            candidates.extend(text_ for s, e in _balanced_spans(body) for text_ in [body[s:e]])
    candidates.extend(text[s:e] for s, e in _balanced_spans(text))
    last_error = ""
    for candidate in candidates:
        try:
            value = _loads_lenient(candidate)
        except json.JSONDecodeError as exc:
            last_error = f" (last parse error: {exc.msg} at line {exc.lineno} col {exc.colno})"
            continue
        if isinstance(value, dict):
            return value
    head = text.strip()[:80].replace("\n", " ")
    raise ExtractionError(
        f"no complete JSON object found in model output starting {head!r}{last_error}; "
        "the stage must answer with exactly one JSON object"
    )


def _looks_like_code(text: str) -> bool:
    """True when the text parses as Python and mentions manim or a class."""
    try:
        parse(text)
    except SyntaxError:
        return False
    return "import" in text or "class " in text


def extract_python_block(text: str) -> str:
    """Return the (longest) fenced python block, else the whole text when it already is code."""
    if not isinstance(text, str) or not text.strip():
        raise ExtractionError("model output is empty: no python code to extract")
    blocks = [body for lang, body in _FENCE.findall(text) if lang.lower() in ("python", "py", "")]
    if blocks:
        code = max(blocks, key=len)
        return code.strip("\n") + "\n"
    stripped = text.strip()
    if _looks_like_code(stripped):
        return stripped + "\n"
    head = stripped[:80].replace("\n", " ")
    raise ExtractionError(
        f"no fenced python block in model output starting {head!r}; "
        "codegen must answer with one ```python block holding the whole file"
    )


def base_class_name(node: ast.expr) -> str:
    """Name of a base class expression: `ThreeDScene` or `manim.ThreeDScene`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def find_scene_class(code: str) -> str:
    """Name of the first Scene subclass in `code` (ThreeDScene preferred)."""
    try:
        tree = parse(code)
    except SyntaxError as exc:
        raise ExtractionError(f"scene code does not parse (line {exc.lineno}: {exc.msg})") from exc
    found: list[tuple[str, str]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = {base_class_name(base) for base in node.bases}
            hit = bases & _SCENE_BASES
            if hit:
                found.append((node.name, sorted(hit)[0]))
    if not found:
        raise ExtractionError("no Scene subclass found in the scene code; define `class X(ThreeDScene)`")
    for name, base in found:
        if base == "ThreeDScene":
            return name
    return found[0][0]
