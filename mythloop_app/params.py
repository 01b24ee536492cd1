"""The CLI's validation layer: what each option or argument may hold, checked while the
command line is parsed, before a command body runs (so before anything heavy is imported, a
state folder is prepared or a Prefect server starts).

Each checker is a typer `parser` (a function from the typed text to the value). A value it
refuses raises `Refused(what, fix)`; `mythloop_app.cli.usage_error_line` prints it as one line

    error: <what> (<option>): <what to do>

and the command exits 2 having written nothing.

    in_file(what, ...)      an existing readable regular file (size capped)
    in_dir(what, ...)       an existing readable folder
    out_dir(what)           a folder mythloop may create or write into
    out_file(what)          a file mythloop may write (its folder creatable)
    sqlite_store(...)       a SQLite file (by its header), or a new one in an existing folder
    model_ref               a sentence-transformers model: a folder of the right shape, or a name
    seconds(what)           a finite number of seconds, > 0 and at most a week
    baseline                'last' or a real calendar date YYYY-MM-DD
    host                    an IP address or a host name that resolves
    text(what, max_chars)   text that is valid UTF-8, not empty, not too long

Standard library only (the start-up path stays light; bench/startup.py).
"""

from __future__ import annotations

import datetime as _dt
import errno
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = ["Refused", "shown", "in_file", "in_dir", "out_dir", "out_file", "sqlite_store",
           "model_ref", "seconds", "baseline", "host", "text", "path_problem",
           "SCENE_FILE_CAP", "TEXT_FILE_CAP"]

PATH_MAX = 4095  # bytes of a whole path (Linux PATH_MAX is 4096 with its NUL)
NAME_MAX = 255  # bytes of one name in it
SCENE_FILE_CAP = 1 << 20  # a generated scene is a few KB; 1 MB is far beyond any real one
TEXT_FILE_CAP = 16 << 20  # model text, prompts files: as the prompts loader's own cap
MAX_SECONDS = 7 * 24 * 3600.0  # a timeout beyond a week is a typo (and inf overflows timers)
SQLITE_HEADER = b"SQLite format 3\x00"


class Refused(ValueError):
    """A value the CLI refuses: `what` is wrong with it, `fix` says what to do instead."""

    def __init__(self, what: str, fix: str) -> None:
        super().__init__(f"{what}: {fix}")
        self.what, self.fix = what, fix


def shown(value: object) -> str:
    """A path or text safe to print: bytes that are not UTF-8 (a file name's, kept by Python
    as surrogate escapes) are written as \\xNN, never as a broken character or an error."""
    text = os.fspath(value) if isinstance(value, os.PathLike) else str(value)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return os.fsencode(text).decode("utf-8", "backslashreplace")


def _encoding_and_length(value: str, what: str) -> None:
    """Paths mythloop records (JSON, manifests) must be text: not UTF-8 bytes are refused,
    and so is a path no file system can hold (one name over 255 bytes, the whole over 4095)."""
    try:
        raw = value.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused(f"{what} {shown(value)} is not valid UTF-8",
                      "rename it, or pass a path whose name is UTF-8 text") from None
    if not value:
        raise Refused(f"{what} is empty", "pass a path")
    if "\x00" in value:
        raise Refused(f"{what} holds a NUL byte", "pass a plain path")
    if len(raw) > PATH_MAX:
        raise Refused(f"{what} is {len(raw):,} bytes long, over the {PATH_MAX:,} a path may "
                      "have", "pass a shorter path")
    longest = max((len(part.encode("utf-8")) for part in value.split("/")), default=0)
    if longest > NAME_MAX:
        raise Refused(f"{what} has a name {longest:,} bytes long, over the {NAME_MAX} a file "
                      "name may have", "pass a shorter path")


def path_problem(path: Path, kind: str) -> str | None:
    """Why an existing `path` cannot be read as `kind` ("file" or "dir"), None when it can;
    "missing" when nothing is there. Symlink loops, a file in the middle of the path, a
    FIFO or device (reading one never ends) and unreadable entries are named."""
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop"
        if exc.errno == errno.ENOENT:
            return "missing"
        if exc.errno == errno.ENOTDIR:
            return "cannot exist: a part of its path is a file, not a folder"
        if exc.errno == errno.EACCES:
            return "cannot be reached (permission denied)"
        return f"cannot be read ({(exc.strerror or type(exc).__name__).lower()})"
    if kind == "file":
        if stat.S_ISDIR(info.st_mode):
            return "is a folder, not a file"
        if not stat.S_ISREG(info.st_mode):
            return "is not a regular file (a device, pipe or socket)"
    elif kind == "dir" and not stat.S_ISDIR(info.st_mode):
        return "is a file, not a folder"
    if not os.access(path, os.R_OK | (os.X_OK if kind == "dir" else 0)):
        return "is not readable (permission denied)"
    return None


def in_file(what: str, fix: str, *, cap: int | None = TEXT_FILE_CAP,
            stdin: bool = False) -> Callable[[str], Path]:
    """An existing, readable regular file of at most `cap` bytes ("-" too, with `stdin`)."""

    def parse(value: str) -> Path:
        if stdin and value == "-":
            return Path(value)
        _encoding_and_length(value, what)
        path = Path(value).expanduser()
        problem = path_problem(path, "file")
        if problem == "missing":
            problem = "does not exist"
        if problem:
            raise Refused(f"{what} {shown(value)} {problem}", fix)
        size = path.stat().st_size
        if cap is not None and size > cap:
            raise Refused(f"{what} {shown(value)} is larger than {_mb(cap)} "
                          f"({_mb(size)})", fix)
        return path

    return parse


def in_dir(what: str, fix: str) -> Callable[[str], Path]:
    """An existing, readable folder."""

    def parse(value: str) -> Path:
        _encoding_and_length(value, what)
        path = Path(value).expanduser()
        problem = path_problem(path, "dir")
        if problem == "missing":
            problem = "does not exist"
        if problem:
            raise Refused(f"{what} {shown(value)} {problem}", fix)
        return path

    return parse


def out_dir(what: str, fix: str) -> Callable[[str], Path]:
    """A folder mythloop may write into: it exists and is writable, or can be created (the
    check makes a probe folder in its nearest existing parent and removes it at once)."""

    def parse(value: str) -> Path:
        from mythloop.checks import dir_problem  # noqa: PLC0415 (stdlib only; cheap)

        _encoding_and_length(value, what)
        path = Path(value).expanduser()
        problem = path_problem(path, "dir")
        if problem not in (None, "missing", "is a file, not a folder",
                           "cannot exist: a part of its path is a file, not a folder"):
            raise Refused(f"{what} {shown(value)} {problem}", fix)
        problem = dir_problem(path, what)
        if problem:
            raise Refused(shown(problem), fix)
        return path

    return parse


def out_file(what: str, fix: str) -> Callable[[str], Path]:
    """A file mythloop may write: not a folder, and its folder can be created or written."""

    def parse(value: str) -> Path:
        from mythloop.checks import dir_problem  # noqa: PLC0415

        _encoding_and_length(value, what)
        path = Path(value).expanduser()
        problem = path_problem(path, "file")
        if problem not in (None, "missing"):
            raise Refused(f"{what} {shown(value)} {problem}", fix)
        problem = dir_problem(path.absolute().parent, f"the folder of {what}")
        if problem:
            raise Refused(shown(problem), fix)
        return path

    return parse


def sqlite_store(*, must_exist: bool) -> Callable[[str], Path]:
    """A verdict store: a SQLite file (its first 16 bytes say so; an empty file is a new
    store), or, unless `must_exist`, a new file in an existing, writable folder."""
    what = "verdict store"

    def parse(value: str) -> Path:
        _encoding_and_length(value, what)
        path = Path(value).expanduser()
        problem = path_problem(path, "file")
        if problem == "missing":
            if must_exist:
                raise Refused(f"{what} {shown(value)} does not exist",
                              "pass a verdict store (e.g. a sweep's <cond>-rep1/store.db)")
            parent = path.absolute().parent
            if not parent.is_dir():
                raise Refused(f"folder {shown(parent)} does not exist",
                              "create it first or pass a file in an existing folder")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise Refused(f"folder {shown(parent)} is not writable",
                              "pass a store in a folder you can write")
            return path
        if problem == "is a folder, not a file":
            raise Refused(f"{what} {shown(value)} is a folder",
                          f"pass the SQLite file to use, e.g. {shown(path / 'verdicts.db')}")
        if problem:
            raise Refused(f"{what} {shown(value)} {problem}", "pass a SQLite file")
        try:
            with open(path, "rb") as fh:
                head = fh.read(len(SQLITE_HEADER))
        except OSError as exc:
            raise Refused(f"{what} {shown(value)} cannot be read ({exc.strerror})",
                          "pass a readable SQLite file") from None
        if head and head != SQLITE_HEADER:
            raise Refused(f"{what} {shown(value)} is not a SQLite database",
                          "pass a verdict store (a SQLite file a sweep or `route` wrote)")
        return path

    return parse


_MODEL_MARKERS = ("modules.json", "config_sentence_transformers.json", "config.json")


def model_ref(value: str) -> str:
    """--embedder: a local sentence-transformers folder (it holds modules.json or config.json)
    or a model name (`all-MiniLM-L6-v2`, `org/name`). A value that looks like a path (it
    exists, starts with / . or ~, or has more than one /) must be such a folder; a name must
    be in the local Hugging Face cache while the hub is offline (mythloop's default)."""
    what = "embedding model"
    fix = ("pass a sentence-transformers model folder (one holding modules.json), or leave "
           "--embedder out for the bundled model")
    _encoding_and_length(value, what)
    path = Path(value).expanduser()
    looks_like_path = (os.path.lexists(path) or value.startswith(("/", ".", "~"))
                       or value.count("/") > 1)
    if not looks_like_path:
        if _hub_offline() and not _in_hub_cache(value):
            raise Refused(f"{what} {shown(value)!r} is neither a folder here nor in the "
                          "Hugging Face cache, and the hub is offline", fix)
        return value
    problem = path_problem(path, "dir")
    if problem == "missing":
        problem = "does not exist"
    if problem:
        raise Refused(f"{what} {shown(value)} {problem}", fix)
    if not any((path / marker).is_file() for marker in _MODEL_MARKERS):
        raise Refused(f"{what} {shown(value)} is a folder without modules.json or "
                      "config.json, not a model", fix)
    return str(path)


def _hub_offline() -> bool:
    """Whether models load offline: HF_HUB_OFFLINE, which mythloop sets to 1 when unset."""
    return os.environ.get("HF_HUB_OFFLINE", "1").strip().lower() not in ("0", "false", "no",
                                                                          "off", "")


def _in_hub_cache(name: str) -> bool:
    """Whether the Hugging Face cache holds the model `name` (a bare name is looked up as
    sentence-transformers' own, as the library does)."""
    repo = name if "/" in name else f"sentence-transformers/{name}"
    home = os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache",
                                                     "huggingface")
    cache = Path(os.environ.get("HF_HUB_CACHE") or os.path.join(home, "hub"))
    return any((cache / f"models--{r.replace('/', '--')}" / "snapshots").is_dir()
               for r in {repo, name})


def seconds(what: str, *, zero: bool = False) -> Callable[[str], float]:
    """A number of seconds: finite, more than 0 (or 0 itself, with `zero`), at most a week."""

    def parse(value: str) -> float:
        try:
            number = float(value)
        except ValueError:
            raise Refused(f"{what} '{shown(value)}' is not a number",
                          "give seconds, e.g. 120") from None
        if math.isnan(number) or math.isinf(number):
            raise Refused(f"{what} {value} is not a finite number", "give seconds, e.g. 120")
        if number < 0 or (number == 0 and not zero):
            raise Refused(f"{what} {value} is not more than 0" if not zero else
                          f"{what} {value} is negative",
                          "give a positive number of seconds, e.g. 120")
        if number > MAX_SECONDS:
            raise Refused(f"{what} {value} is over a week ({MAX_SECONDS:.0f} s)",
                          "give seconds, e.g. 120")
        return number

    return parse


def baseline(value: str) -> str:
    """--baseline: 'last' or a UTC date YYYY-MM-DD that exists on the calendar."""
    fix = "use 'last' or a UTC date YYYY-MM-DD, e.g. 2026-01-31"
    if value == "last":
        return value
    if len(value) != 10 or value[4] != "-" or value[7] != "-":
        raise Refused(f"'{shown(value)}' is neither 'last' nor a date", fix)
    try:
        _dt.date.fromisoformat(value)
    except ValueError:
        raise Refused(f"{shown(value)} is not a date", fix) from None
    return value


def host(value: str) -> str:
    """--host: an IP address, or a host name that this machine resolves."""
    import ipaddress  # noqa: PLC0415
    import socket  # noqa: PLC0415

    fix = "pass an IP address of this machine (127.0.0.1, 0.0.0.0) or a name that resolves"
    try:
        value.encode("ascii")
    except UnicodeEncodeError:
        raise Refused(f"host '{shown(value)}' is not an address", fix) from None
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    labels = value.rstrip(".").split(".")
    if (not value or len(value) > 253 or all(label.isdigit() for label in labels)
            or not all(label and len(label) <= 63 and label.replace("-", "").isalnum()
                       and not label.startswith("-") for label in labels)):
        raise Refused(f"host {value!r} is not a valid address", fix)
    try:
        socket.getaddrinfo(value, None)
    except (OSError, UnicodeError):
        raise Refused(f"host {value!r} does not resolve", fix) from None
    return value


def text(what: str, max_chars: int, fix: str) -> Callable[[str], str]:
    """Text given on the command line: valid UTF-8 (not stray bytes) and at most
    `max_chars` characters. Emptiness is left to the command (each says it its own way)."""

    def parse(value: str) -> str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise Refused(f"{what} is not valid UTF-8 text ('{shown(value)[:40]}')",
                          fix) from None
        if len(value) > max_chars:
            raise Refused(f"{what} is {len(value):,} characters long, over the "
                          f"{max_chars:,} it may have", fix)
        return value

    return parse


def _mb(size: int) -> str:
    return f"{size / (1 << 20):.0f} MB" if size >= 1 << 20 else f"{size / 1024:.0f} KB"
