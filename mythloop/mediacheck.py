"""Media files a render hands back, read as hostile data before any tool of the parent uses them.

A scene runs as the sandbox's user and owns its render dir until the render ends: it can
rewrite the mp4 or PNG manim wrote with anything (a playlist naming another film's video,
an mp4 whose edit list repeats its frames a hundred times, a 16000x16000 PNG header). Every
file the parent takes from a render, and every scene video the stitch reads, goes through
`check`: one expected type, by its first bytes, then by ffprobe with that type's demuxer
forced and only the `file` protocol, each figure bounded. A file that fails raises
`MediaRejected` with one line saying why.

    check(path, kind, bounds)    MediaInfo, or MediaRejected
    check_structure(...)         the same without ffprobe (for files the parent made)
    Bounds.for_quality(q)        the bounds of a render at manim quality q
    tool_limits(...)             the rlimits every parent-side ffmpeg/ffprobe runs under
    output_cap(inputs)           the most bytes a tool may write for those inputs (`-fs`)

Standard library and procs only: the sandbox (which remuxes the accepted files) and the
media steps (which stitch them) both use it.
"""

from __future__ import annotations

import json
import math
import os
import resource
import shutil
import stat
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mythloop import procs

__all__ = ["MediaRejected", "MediaInfo", "Bounds", "check", "check_structure", "tool_limits", "output_cap",
           "ffmpeg_exe", "ffprobe_exe", "printable", "MP4_DEMUXER", "PNG_DEMUXER", "FRAME_SIZES"]

MediaKind = Literal["video", "image"]

MP4_DEMUXER = "mov"  # libavformat's "mov,mp4,m4a,3gp,3g2,mj2"
PNG_DEMUXER = "png_pipe"
FRAME_SIZES = {"l": (854, 480), "m": (1280, 720), "h": (1920, 1080), "p": (2560, 1440),
               "k": (3840, 2160)}  # manim's pixel sizes per quality
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_CONTAINERS = {b"moov", b"trak", b"edts"}  # the boxes walked down to each edit list
_MAX_TOP_BOXES = 64
_MAX_MOOV = 32 << 20
_MAX_EDITS = 2  # manim's mp4s carry one edit (the encoder's start delay) per track
_PROBE_TIMEOUT = 15.0


class MediaRejected(ValueError):
    """A file a render handed back is not the media expected; str() is the one-line reason."""


@dataclass(frozen=True)
class Bounds:
    """What a render's output may be: bytes, pixels, seconds, frames per second."""

    max_bytes: int = 512 << 20
    max_side: int = 3840
    max_pixels: int = 3840 * 2160
    max_duration_s: float = 3600.0
    max_fps: float = 120.0

    @classmethod
    def for_quality(cls, quality: str, max_bytes: int = 512 << 20) -> Bounds:
        """A render at manim quality QUALITY: its frame, either way round, and no bigger."""
        width, height = FRAME_SIZES.get(quality, FRAME_SIZES["k"])
        return cls(max_bytes=max_bytes, max_side=max(width, height),
                   max_pixels=width * height)


@dataclass(frozen=True)
class MediaInfo:
    """What the probe found in an accepted file."""

    kind: MediaKind
    size: int
    width: int
    height: int
    duration: float = 0.0
    fps: float = 0.0
    frames: int = 1
    audio: bool = False


def ffmpeg_exe() -> str:
    return _tool("ffmpeg")


def ffprobe_exe() -> str:
    return _tool("ffprobe")


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if not exe:
        raise FileNotFoundError(2, f"{name} not found; fix: apt-get install ffmpeg "
                                   "(make setup installs it)", name)
    return os.path.realpath(exe)


def tool_limits(*, cpu_s: float, write_bytes: int = 1 << 20,
                memory_bytes: int = 3 << 30) -> dict[int, int]:
    """Hard rlimits for one parent-side tool run: address space, CPU seconds, the largest
    file it may write (a write past it ends the tool with SIGXFSZ), no core file."""
    return {resource.RLIMIT_AS: memory_bytes, resource.RLIMIT_CPU: max(1, math.ceil(cpu_s)),
            resource.RLIMIT_FSIZE: max(1 << 16, write_bytes), resource.RLIMIT_CORE: 0}


def output_cap(inputs: list[Path | str] | tuple[Path | str, ...], *, factor: int = 4,
               extra: int = 32 << 20) -> int:
    """The most bytes a step that reads INPUTS may write (ffmpeg `-fs`): FACTOR times their
    size plus EXTRA (a re-encode, a held frame, a subtitle track); never their size times a
    hostile edit list's repeat count."""
    total = 0
    for path in inputs:
        try:
            total += os.stat(path).st_size
        except OSError:
            continue
    return factor * total + extra


def check(path: Path | str, kind: MediaKind, bounds: Bounds | None = None, *,
          timeout: float | None = None) -> MediaInfo:
    """PATH as KIND ("video": an mp4 of H.264 video with AAC audio or none; "image": a
    PNG), within BOUNDS; MediaRejected with the reason otherwise. The probe gets at most
    TIMEOUT seconds (and never more than its own 15 s)."""
    bounds = bounds or Bounds()
    size = check_structure(path, kind, bounds)
    return _probed(Path(path), kind, size, bounds,
                   _PROBE_TIMEOUT if timeout is None else max(0.5, min(timeout, _PROBE_TIMEOUT)))


def check_structure(path: Path | str, kind: MediaKind, bounds: Bounds | None = None) -> int:
    """The part of `check` that runs no tool (about a millisecond): a regular file within
    the size bound, the type's first bytes, an mp4's box structure and edit lists, a PNG's
    header and dimensions. Its size; MediaRejected otherwise. Enough for files the parent
    made itself (a remux, a stitch's inputs), which `check` has seen as the render's."""
    bounds = bounds or Bounds()
    path = Path(path)
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise MediaRejected(f"{path.name} cannot be read: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise MediaRejected(f"{path.name} is not a regular file")
    if st.st_size > bounds.max_bytes:
        raise MediaRejected(f"{path.name} is {st.st_size} bytes, over the "
                            f"{bounds.max_bytes} allowed")
    if kind == "video":
        _mp4_structure(path, st.st_size)
    else:
        _png_header(path, bounds)
    return st.st_size


def printable(text: object, limit: int = 200) -> str:
    """TEXT (a box name, a tool's error line: bytes a file chose) as at most LIMIT printable
    ASCII characters, anything else as '?': safe on a terminal, in a log, in markdown."""
    return "".join(ch if " " <= ch <= "~" and ch not in "`[]<>" else "?"
                   for ch in str(text)[:limit])


def _box_name(box: bytes) -> str:
    return printable(box.decode("latin-1"), 4)


def _read_at(fh, offset: int, count: int) -> bytes:
    fh.seek(offset)
    return fh.read(count)


def _mp4_structure(path: Path, size: int) -> None:
    """An ISO BMFF file (an `ftyp` box first), one `moov`, no edit list of more than
    _MAX_EDITS entries (a long one makes a remux repeat the frames, 100 entries 100 times)."""
    with open(path, "rb", opener=_no_follow) as fh:
        head = _read_at(fh, 0, 12)
        if len(head) < 12 or head[4:8] != b"ftyp":
            raise MediaRejected(f"{path.name} is not an mp4 (no `ftyp` box first: "
                                f"starts with {printable(repr(head[:8]))})")
        offset, moovs, boxes = 0, 0, 0
        while offset < size:
            boxes += 1
            if boxes > _MAX_TOP_BOXES:
                raise MediaRejected(f"{path.name} has over {_MAX_TOP_BOXES} top-level boxes")
            box, body, end = _box_at(fh, offset, size, path)
            if box == b"moov":
                moovs += 1
                if moovs > 1:
                    raise MediaRejected(f"{path.name} has more than one `moov` box")
                if end - body > _MAX_MOOV:
                    raise MediaRejected(f"{path.name}: its `moov` box is over {_MAX_MOOV} bytes")
                _edit_lists(_read_at(fh, body, end - body), path)
            offset = end
        if moovs == 0:
            raise MediaRejected(f"{path.name} has no `moov` box (not a finished mp4)")


def _box_at(fh, offset: int, limit: int, path: Path) -> tuple[bytes, int, int]:
    """(type, body offset, end offset) of the box at OFFSET, which must end by LIMIT."""
    head = _read_at(fh, offset, 16)
    if len(head) < 8:
        raise MediaRejected(f"{path.name} is cut short inside a box header at byte {offset}")
    size, box = struct.unpack(">I4s", head[:8])
    body = offset + 8
    if size == 1:
        if len(head) < 16:
            raise MediaRejected(f"{path.name} is cut short inside a box header at byte {offset}")
        size = struct.unpack(">Q", head[8:16])[0]
        body = offset + 16
    elif size == 0:
        size = limit - offset
    if size < body - offset or offset + size > limit:
        raise MediaRejected(f"{path.name}: a '{_box_name(box)}' box at byte {offset} "
                            f"runs past the end of the file (truncated or forged)")
    return box, body, offset + size


def _edit_lists(moov: bytes, path: Path) -> None:
    """Walk moov -> trak -> edts -> elst in memory; refuse an edit list of many entries."""
    stack = [(0, len(moov))]
    while stack:
        offset, end = stack.pop()
        while offset + 8 <= end:
            size, box = struct.unpack(">I4s", moov[offset:offset + 8])
            body = offset + 8
            if size == 1 and offset + 16 <= end:
                size = struct.unpack(">Q", moov[offset + 8:offset + 16])[0]
                body = offset + 16
            if size < body - offset or offset + size > end:
                raise MediaRejected(f"{path.name}: a '{_box_name(box)}' box inside "
                                    "`moov` runs past its parent (forged)")
            if box in _CONTAINERS:
                stack.append((body, offset + size))
            elif box == b"elst" and body + 8 <= offset + size:
                entries = struct.unpack(">I", moov[body + 4:body + 8])[0]
                if entries > _MAX_EDITS:
                    raise MediaRejected(
                        f"{path.name} has an edit list of {entries} entries (at most "
                        f"{_MAX_EDITS}): it would repeat the video {entries} times")
            offset += size


def _no_follow(file: str, flags: int) -> int:
    return os.open(file, flags | os.O_NOFOLLOW)


def _png_header(path: Path, bounds: Bounds) -> None:
    """The PNG signature and an IHDR within the bounds, before anything decodes it."""
    with open(path, "rb", opener=_no_follow) as fh:
        head = fh.read(33)
    if not head.startswith(_PNG_SIGNATURE):
        raise MediaRejected(f"{path.name} is not a PNG (starts with {printable(repr(head[:8]))})")
    if len(head) < 33 or head[12:16] != b"IHDR":
        raise MediaRejected(f"{path.name} is not a PNG (no IHDR chunk first)")
    width, height = struct.unpack(">II", head[16:24])
    _dimensions(path, width, height, bounds)


def _dimensions(path: Path, width: int, height: int, bounds: Bounds) -> None:
    if width < 1 or height < 1 or max(width, height) > bounds.max_side or \
            width * height > bounds.max_pixels:
        raise MediaRejected(f"{path.name} is {width}x{height} pixels; a render of this "
                            f"quality is at most {bounds.max_pixels} pixels, "
                            f"{bounds.max_side} a side")


def _probe_argv(path: Path, kind: MediaKind) -> list[str]:
    forced = ["-f", MP4_DEMUXER, "-ignore_editlist", "1", "-enable_drefs", "0"] \
        if kind == "video" else ["-f", PNG_DEMUXER]
    return [ffprobe_exe(), "-v", "error", "-hide_banner", *forced,
            "-protocol_whitelist", "file", "-show_entries",
            "stream=codec_type,codec_name,width,height,avg_frame_rate,r_frame_rate,"
            "duration,nb_frames:format=format_name,duration,nb_streams",
            "-of", "json", f"file:{path.resolve()}"]


def _probed(path: Path, kind: MediaKind, size: int, bounds: Bounds,
            timeout: float = _PROBE_TIMEOUT) -> MediaInfo:
    """ffprobe with the type's demuxer forced, only the file protocol, under rlimits and a
    deadline; every figure it reports checked against BOUNDS."""
    try:
        done = procs.run(_probe_argv(path, kind), timeout=timeout,
                         limits=tool_limits(cpu_s=_PROBE_TIMEOUT, memory_bytes=1 << 30))
    except subprocess.TimeoutExpired:
        raise MediaRejected(f"{path.name}: probing it took over {timeout:.1f} s") from None
    if done.returncode != 0:
        said = [ln for ln in done.stderr.splitlines() if ln.strip()]
        raise MediaRejected(f"{path.name} is not a readable "
                            f"{'mp4' if kind == 'video' else 'PNG'}: "
                            f"{printable(said[-1][-200:]) if said else f'ffprobe exit {done.returncode}'}")
    try:
        info = json.loads(done.stdout)
        streams = list(info.get("streams") or [])
        fmt = dict(info.get("format") or {})
    except (ValueError, TypeError, AttributeError):
        raise MediaRejected(f"{path.name}: the probe's answer is not readable") from None
    if kind == "video":
        return _video_info(path, size, streams, fmt, bounds)
    if len(streams) != 1 or streams[0].get("codec_name") != "png":
        raise MediaRejected(f"{path.name} is not a single PNG image "
                            f"({len(streams)} stream(s): {_codecs(streams)})")
    width, height = _int(streams[0].get("width")), _int(streams[0].get("height"))
    _dimensions(path, width, height, bounds)
    return MediaInfo(kind="image", size=size, width=width, height=height)


def _video_info(path: Path, size: int, streams: list, fmt: dict, bounds: Bounds) -> MediaInfo:
    videos = [s for s in streams if s.get("codec_type") == "video"]
    audios = [s for s in streams if s.get("codec_type") == "audio"]
    if len(streams) > 2 or len(videos) != 1 or len(audios) + 1 != len(streams):
        raise MediaRejected(f"{path.name} has {len(streams)} stream(s) ({_codecs(streams)}); "
                            "a scene video has one video stream and at most one audio stream")
    video = videos[0]
    if video.get("codec_name") != "h264":
        raise MediaRejected(f"{path.name}: its video is {printable(video.get('codec_name'), 20)}"
                            ", not H.264")
    if audios and audios[0].get("codec_name") != "aac":
        raise MediaRejected(f"{path.name}: its audio is "
                            f"{printable(audios[0].get('codec_name'), 20)}, not AAC")
    width, height = _int(video.get("width")), _int(video.get("height"))
    _dimensions(path, width, height, bounds)
    fps = max(_rate(video.get("avg_frame_rate")), _rate(video.get("r_frame_rate")))
    if not 0 < fps <= bounds.max_fps:
        raise MediaRejected(f"{path.name} runs at {fps:g} frames per second (at most "
                            f"{bounds.max_fps:g})")
    durations = [_float(s.get("duration")) for s in streams] + [_float(fmt.get("duration"))]
    duration = max(durations)
    if not 0 < duration <= bounds.max_duration_s:
        raise MediaRejected(f"{path.name} lasts {duration:g} s (at most "
                            f"{bounds.max_duration_s:g})")
    frames = _int(video.get("nb_frames"))
    if frames < 1 or frames > bounds.max_duration_s * bounds.max_fps:
        raise MediaRejected(f"{path.name} has {frames} video frames")
    return MediaInfo(kind="video", size=size, width=width, height=height, duration=duration,
                     fps=fps, frames=frames, audio=bool(audios))


def _codecs(streams: list) -> str:
    return ", ".join(printable(s.get("codec_name") or s.get("codec_type") or "?", 20)
                     for s in streams[:5]) + (", ..." if len(streams) > 5 else "") or "none"


def _int(value: object) -> int:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def _float(value: object) -> float:
    try:
        number = float(str(value))
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _rate(value: object) -> float:
    top, _, bottom = str(value or "0/1").partition("/")
    denominator = _float(bottom or "1")
    return _float(top) / denominator if denominator else 0.0
