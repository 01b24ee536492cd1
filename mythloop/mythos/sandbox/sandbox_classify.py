"""Turn a finished (or killed) render into a kind and one line saying what to do."""

from __future__ import annotations

import re
import signal
from typing import TYPE_CHECKING

from mythloop.textsafe import clean_line

if TYPE_CHECKING:  # at run time this module needs only the standard library
    from mythloop.vocab import RenderKind

__all__ = ["classify", "last_error_line"]

# (pattern in the log, the tool that is missing, how to install it)
_MISSING_TOOLS = (
    (re.compile(r"No such file or directory: '(latex|pdflatex|xelatex|lualatex)'"),
     "LaTeX", "apt-get install texlive-latex-base texlive-latex-extra"),
    (re.compile(r"No such file or directory: 'dvisvgm'"), "dvisvgm", "apt-get install dvisvgm"),
    (re.compile(r"File `standalone\.cls' not found|standalone\.cls"), "LaTeX standalone class",
     "apt-get install texlive-latex-extra"),
    (re.compile(r"No such file or directory: 'ffmpeg'|ffmpeg: not found|Unable to find ffmpeg",
                re.I), "ffmpeg", "apt-get install ffmpeg"),
    (re.compile(r"No module named '?(manim|av|cairo|manimpango)'?"), "a Python package",
     "pip install manim (in the environment that runs the render)"),
    (re.compile(r"No module named '?pyseccomp'?"), "pyseccomp (the sandbox's syscall filter)",
     "pip install pyseccomp (or run `make setup`)"),
    (re.compile(r"Unable to find libseccomp"), "libseccomp2", "apt-get install libseccomp2"),
)
_RESOURCE_PATTERNS = re.compile(
    r"MemoryError|Unable to allocate|Cannot allocate memory|\[Errno 12\]|File too large|"
    r"\[Errno 27\]|Resource temporarily unavailable|\[Errno 11\]|std::bad_alloc|out of memory|"
    r"No space left on device|\[Errno 28\]",
    re.I,
)
_RESOURCE_SIGNALS: dict[int, str] = {signal.SIGXCPU: "CPU time", signal.SIGXFSZ: "file size",
                     signal.SIGKILL: "memory or CPU (killed by the kernel)"}
_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning|Failure)"
                       r"|[A-Za-z_][\w.]*\.\w+Error): .*|^[A-Za-z_]\w*Error$")
_BOX = "│╭╰─┃"
# A scene writes the log, so it is hostile input: classification reads only its last
# CLASSIFY_BYTES, each line cut to LINE_CHARS and cleaned of terminal escapes and other
# control and format characters (the message goes to terminals, logs and artifacts), and uses
# no pattern that backtracks on a long line (scene-line lookups are plain substring
# searches): linear in what it reads.
CLASSIFY_BYTES = 256 << 10
LINE_CHARS = 1000


def _bounded_lines(log: str) -> list[str]:
    return [clean_line(ln[:LINE_CHARS]).rstrip() for ln in log[-CLASSIFY_BYTES:].splitlines()]


def _scene_line(line: str, scene_file: str) -> str | None:
    """The line number after the last `SCENE_FILE:N` or `SCENE_FILE", line N` in LINE."""
    found = None
    for marker in (scene_file + ":", scene_file + '", line '):
        at = line.rfind(marker)
        if at < 0:
            continue
        digits = line[at + len(marker):at + len(marker) + 9]
        number = digits[:len(digits) - len(digits.lstrip("0123456789"))]
        if number and (marker.endswith(":") or line.rfind('File "', 0, at) >= 0):
            found = number
    return found


def last_error_line(log: str, scene_file: str | None = None) -> str | None:
    """The final exception line of the log, with the scene's line number when found."""
    lines = _bounded_lines(log)
    error = None
    for ln in reversed(lines):
        stripped = ln.strip()
        if stripped and stripped[0] not in _BOX and _EXC_LINE.match(stripped):
            error = stripped
            break
    if error is None:
        return None
    if scene_file:  # rich traceback frame headers look like "│ /path/scene.py:12 in construct │"
        hits = [n for ln in lines for n in [_scene_line(ln, scene_file)] if n]
        if hits:
            error = f"{error} (scene line {hits[-1]})"
    return error[:400]


def classify(*, returncode: int | None, timed_out: bool, timeout: float, video: bool,
             log: str, scene_file: str, limits_text: str) -> tuple[RenderKind, str]:
    """Return (kind, one-line message) for a finished render; the message holds no control
    character, whatever the scene printed."""
    kind, message = _classify(returncode=returncode, timed_out=timed_out, timeout=timeout,
                              video=video, log=log, scene_file=scene_file,
                              limits_text=limits_text)
    return kind, clean_line(message)


def _classify(*, returncode: int | None, timed_out: bool, timeout: float, video: bool,
              log: str, scene_file: str, limits_text: str) -> tuple[RenderKind, str]:
    log = "\n".join(_bounded_lines(log))
    if timed_out:
        return "timeout", (f"render timed out after {timeout:g}s and was killed with its "
                           "process group; raise --timeout / M2M_RENDER_TIMEOUT or lower the "
                           "quality (-q l)")
    if returncode == 0 and video:
        return "ok", "rendered"
    for pattern, tool, fix in _MISSING_TOOLS:
        if pattern.search(log):
            return "missing_tool", f"{tool} is not installed or not on PATH; install it: {fix}"
    sig = _signal_of(returncode)
    if sig in _RESOURCE_SIGNALS:
        return "resource_limit", (f"the scene hit a resource limit ({_RESOURCE_SIGNALS[sig]}; "
                                  f"limits: {limits_text}); make it allocate, loop or write less")
    if _RESOURCE_PATTERNS.search(_tail_errors(log)):
        return "resource_limit", (f"the scene hit a resource limit ({limits_text}): "
                                  f"{last_error_line(log, scene_file) or 'out of memory'}; "
                                  "make it allocate or write less")
    if returncode == 0:
        return "scene_error", ("manim finished but wrote no video or image for a scene "
                               "asked for: does the file define the scene class named?")
    error = last_error_line(log, scene_file)
    if error is None:
        tail = [ln.strip() for ln in log.splitlines() if ln.strip()]
        error = f"manim exited with code {returncode}" + (f": {tail[-1][:300]}" if tail else "")
    return "scene_error", f"scene error: {error}; fix the scene code"


def _signal_of(returncode: int | None) -> int | None:
    """Signal number from a negative Popen code or the init's 128+N exit status."""
    if returncode is None:
        return None
    if returncode < 0:
        return -returncode
    if 128 < returncode < 160:
        return returncode - 128
    return None


def _tail_errors(log: str) -> str:
    """The last exception line (resource words elsewhere in the log do not count)."""
    return last_error_line(log) or log[-600:]
