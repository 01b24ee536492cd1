"""Crash-safe file writes shared by sweeps, films and backends.

A kill at any moment leaves either the old file or the new one, never half of one, and
appended JSONL rows are whole lines.

    write_text_atomic(path, text)   text via a temp file beside it, fsync, os.replace
    write_json_atomic(path, obj)    indented JSON, the same way
    copy_file_atomic(src, dst)      a copy of any size, the same way
    replacing(path)                 a temp path beside PATH for a writer that wants a file
                                    name (ffmpeg, espeak-ng, savefig); renamed over PATH
                                    when the block ends cleanly, removed otherwise
    append_jsonl(path, row)         one whole, fsynced line per row
    read_jsonl(path)                the rows, a torn last line dropped
    read_records(path, Model)       the rows validated as Model; a bad row other than a torn
                                    last line raises RecordError naming file and line
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["write_text_atomic", "write_json_atomic", "write_text_if_changed",
           "write_json_if_changed", "copy_file_atomic", "replacing",
           "append_jsonl", "read_jsonl", "jsonl_text", "read_records", "RecordError",
           "describe_invalid"]

M = TypeVar("M", bound=BaseModel)


class RecordError(ValueError):
    """A JSONL line that is not a valid record; the message names the file and line."""


@contextlib.contextmanager
def _temp_beside(target: Path, suffix: str) -> Iterator[int]:
    """An open descriptor of a new temp file beside TARGET (mkstemp: private, exclusive).
    The block writes and fsyncs through it (and closes it); when the block ends cleanly the
    temp file is renamed over TARGET, otherwise removed."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix, dir=target.parent)
    try:
        yield fd
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path | str, text: str) -> Path:
    """Write via a temp file in the same folder, fsync, then os.replace."""
    target = Path(path)
    with _temp_beside(target, ".tmp") as fd, os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return target


def write_json_atomic(path: Path | str, obj: Any) -> Path:
    """Indented JSON, written atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=2, ensure_ascii=False, default=str)
                             + "\n")


def write_text_if_changed(path: Path | str, text: str) -> Path:
    """As write_text_atomic, but a file that already holds `text` is left as it is (its
    mtime too): a resumed run does not rewrite what it had written."""
    target = Path(path)
    try:
        if target.is_file() and target.read_text(encoding="utf-8") == text:
            return target
    except (OSError, UnicodeDecodeError):
        pass
    return write_text_atomic(target, text)


def write_json_if_changed(path: Path | str, obj: Any) -> Path:
    """As write_json_atomic, but an identical file is left as it is."""
    return write_text_if_changed(path, json.dumps(obj, indent=2, ensure_ascii=False,
                                                  default=str) + "\n")


def copy_file_atomic(src: Path | str, dst: Path | str) -> Path:
    """Copy SRC to DST via a temp file beside DST, fsync, then os.replace (any size, binary)."""
    target = Path(dst)
    with (_temp_beside(target, ".part") as fd, os.fdopen(fd, "wb") as out,
          open(src, "rb") as data):
        shutil.copyfileobj(data, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    return target


@contextlib.contextmanager
def replacing(path: Path | str) -> Iterator[Path]:
    """A fresh temp path beside PATH (same suffix, so tools pick the format from the name;
    not created: the writer makes it). When the block ends without an exception the file is
    fsynced and renamed over PATH (FileNotFoundError when the writer made none); on an
    exception it is removed and PATH is left as it was."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.stem}.{secrets.token_hex(4)}.part{target.suffix}")
    try:
        yield tmp
        with open(tmp, "rb") as data:
            os.fsync(data.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _jsonable(row: BaseModel | dict) -> dict:
    return row.model_dump(mode="json") if isinstance(row, BaseModel) else row


def jsonl_text(rows) -> str:
    """Rows (models or dicts) as JSONL text, one line each."""
    return "".join(json.dumps(_jsonable(row), ensure_ascii=False, default=str) + "\n"
                   for row in rows)


def append_jsonl(path: Path | str, row: BaseModel | dict) -> None:
    """Append one row (a model is dumped in JSON mode) as a single flushed write, so a kill
    leaves whole lines only."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    line = jsonl_text([row])
    with open(target, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def read_jsonl(path: Path | str) -> list[dict]:
    """Rows of a JSONL file; a torn last line (a kill mid-write) is dropped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    return rows


def describe_invalid(exc: ValidationError) -> str:
    """A pydantic error as one short line: the first problem, its field, how many more."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"])
    if first["type"] == "json_invalid":
        text = f"malformed JSON ({first['msg'].removeprefix('Invalid JSON: ')})"
    else:
        text = f"field {where!r}: {first['msg']}" if where else first["msg"]
    more = len(errors) - 1
    return text + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def read_records(path: Path | str, model: type[M]) -> list[M]:
    """Rows of a JSONL file validated with MODEL (strictly: no number for a string, no bool for
    a number). A torn last line (a kill mid-write: no newline, not JSON) is dropped, as in
    `read_jsonl`; any other line that is not a valid row raises RecordError naming the file
    and line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(model.model_validate_json(line, strict=True))
        except ValidationError as exc:
            torn = (number == len(lines) and not text.endswith("\n")
                    and exc.errors()[0]["type"] == "json_invalid")
            if torn:
                continue
            raise RecordError(f"{path}:{number}: not a valid {model.__name__} row: "
                              f"{describe_invalid(exc)}; fix or remove that line") from None
    return rows
