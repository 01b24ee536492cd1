"""The parent's intake of a render's outputs: each file checked, then remade outside the scene.

A scene owns its render dir until the render ends, so the mp4 or PNG manim wrote there may
have been rewritten by scene code (with `verify` skipped or fooled). Before any tool of the
parent reads one, `take_over`

1. copies it (never following a link, at most the render's file-size limit) into a fresh
   staging dir of the parent's (`_make_stage`: root-owned, under the state dir);
2. checks the copy as the one type expected (`mediacheck.check`: an mp4 of H.264 video with
   AAC audio or none, or a PNG; first bytes, box structure, then ffprobe with the demuxer
   forced and only the `file` protocol, under rlimits and a deadline; size, pixels, duration,
   frame rate, streams and edit lists bounded);
3. remuxes it into a fresh container with one ffmpeg run inside a sandbox of its own (the
   render's bubblewrap view, `nobody`, the seccomp filter, rlimits, a deadline; no scene code;
   the mp4's first video and audio streams copied with edit lists ignored, metadata dropped;
   a PNG decoded and encoded again), each output capped at a size from its input (`-fs` and
   RLIMIT_FSIZE);
4. checks the remuxed file again and puts it, as a new file of the parent's, where the
   scene's file was; `_hand_over_media` then moves it into DIR.

So DIR, the scene cache and the stitch only ever hold files the parent made. A file that
fails makes the render a `scene_error` whose message says which file and why (the repair
prompt gets it too).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mythloop import mediacheck, procs
from mythloop.mediacheck import Bounds, MediaRejected
from mythloop.mythos.sandbox import stage_tree
from mythloop.vocab import RenderKind

__all__ = ["take_over", "REMUX_TIMEOUT", "stats"]

REMUX_TIMEOUT = 30.0
_STATS = {"files": 0, "seconds": 0.0}
_STATS_LOCK = threading.Lock()  # a film renders its scenes in threads


def stats() -> dict:
    """Files taken over and the seconds it took, in this process (tests, bench)."""
    with _STATS_LOCK:
        return dict(_STATS)


@dataclass
class _Job:
    src: Path  # the scene's file in the stage
    kind: mediacheck.MediaKind
    copy: Path  # the parent's copy of it, checked
    out: Path  # the remade file
    cap: int = 0  # the most bytes the remade file may have


def _left(deadline: float | None, cap: float) -> float:
    """Seconds a step may take: its own CAP, or what is left before DEADLINE (monotonic)."""
    return cap if deadline is None else max(0.5, min(cap, deadline - time.monotonic()))


def take_over(files: Sequence[Path], *, quality: str, max_bytes: int,
              namespaced: bool, deadline: float | None = None) -> tuple[RenderKind, str]:
    """Check and remake each of FILES (paths inside a finished render's stage) in place.

    ("ok", "") when all were accepted; otherwise (kind, one-line message): `scene_error`
    for a file that is not the media expected, `missing_tool` without ffmpeg/ffprobe,
    `resource_limit` when the parent's own disk refuses the copies, `interrupted` when a
    Ctrl-C or SIGTERM stopped the remux. DEADLINE (monotonic): the probes and the remux end
    by then whatever their own caps (the render's timeout + a few seconds)."""
    if not files:
        return "ok", ""
    from mythloop.mythos.sandbox import render as R  # noqa: PLC0415 (cycle: render imports this module)

    started = time.monotonic()
    bounds = Bounds.for_quality(quality, max_bytes=max_bytes)
    box = R._make_stage(namespaced)
    try:
        jobs = []
        for index, src in enumerate(files):
            kind: mediacheck.MediaKind = "video" if src.suffix == ".mp4" else "image"
            ext = ".mp4" if kind == "video" else ".png"
            job = _Job(src, kind, box / f"in{index}{ext}", box / f"out{index}{ext}")
            shown = mediacheck.printable(src.name, 120)  # a name the scene may have chosen
            _copy_bounded(src, job.copy, bounds.max_bytes, shown=shown)
            info = _checked(job.copy, kind, bounds, shown,
                            timeout=_left(deadline, REMUX_TIMEOUT))
            # a copy's remux is about its input's size; a PNG at most its raw RGBA64 pixels
            job.cap = info.size + (1 << 20) if kind == "video" else \
                info.width * info.height * 8 + (1 << 20)
            jobs.append(job)
        _remux(R, box, jobs, namespaced, _left(deadline, REMUX_TIMEOUT))
        for job in jobs:
            # what the sandboxed ffmpeg wrote: its structure again (its figures were probed
            # on the input, and its packets are the input's)
            _checked(job.out, job.kind, bounds,
                     f"{mediacheck.printable(job.src.name, 120)} (remade)", probe=False)
            _replace(job.out, job.src)
        return "ok", ""
    except MediaRejected as exc:
        if procs.STOPPING.is_set():  # Ctrl-C / SIGTERM stopped the remux, not the scene
            return "interrupted", ("render interrupted (Ctrl-C or SIGTERM) while its outputs "
                                   "were checked; not a scene error: rerun to render it")
        return "scene_error", (f"scene error: a file the render handed back was refused: "
                               f"{exc}; a scene must leave the files manim writes alone")
    except FileNotFoundError as exc:
        if exc.filename in ("ffmpeg", "ffprobe"):
            return "missing_tool", str(exc.strerror)
        return "scene_error", f"scene error: an output of the render is gone ({exc.strerror})"
    except OSError as exc:  # the parent's own disk (full, read-only): no traceback either
        return "resource_limit", (f"the render's outputs could not be taken over: "
                                  f"{exc.strerror}; free disk space under the state dir "
                                  "and rerun")
    finally:
        stage_tree.remove_tree(box)
        with _STATS_LOCK:
            _STATS["files"] += len(files)
            _STATS["seconds"] += time.monotonic() - started


def _checked(path: Path, kind: mediacheck.MediaKind, bounds: Bounds, shown: str, *,
             probe: bool = True, timeout: float | None = None) -> mediacheck.MediaInfo:
    """mediacheck.check (`probe=False`: check_structure), its reason naming the file as
    SHOWN (not the copy's name)."""
    try:
        if not probe:
            size = mediacheck.check_structure(path, kind, bounds)
            return mediacheck.MediaInfo(kind=kind, size=size, width=0, height=0)
        return mediacheck.check(path, kind, bounds, timeout=timeout)
    except MediaRejected as exc:
        text = str(exc)
        raise MediaRejected(shown + text[len(path.name):] if text.startswith(path.name)
                            else f"{shown}: {text}") from None


def _copy_bounded(src: Path, dst: Path, limit: int, *, shown: str) -> None:
    """SRC's bytes into a new file DST of this process: never through a link, nothing but a
    regular, singly linked file, at most LIMIT bytes (MediaRejected otherwise)."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise MediaRejected(f"{shown} is not a regular file (a link)" if exc.errno == errno.ELOOP
                            else f"{shown} cannot be read: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as data:
        st = os.fstat(data.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise MediaRejected(f"{shown} is not a regular, singly linked file")
        copied = 0
        with open(dst, "xb") as out:
            while chunk := data.read(1 << 20):
                copied += len(chunk)
                if copied > limit:
                    raise MediaRejected(f"{shown} is over {limit} bytes")
                out.write(chunk)
    dst.chmod(0o644)


def _remux_argv(ffmpeg: str, jobs: list[_Job], inner: str) -> list[str]:
    """One ffmpeg command remaking every accepted file, each output capped (`-fs`)."""
    inputs: list[str] = []
    outputs: list[str] = []
    for index, job in enumerate(jobs):
        if job.kind == "video":
            inputs += ["-f", mediacheck.MP4_DEMUXER, "-ignore_editlist", "1",
                       "-enable_drefs", "0", "-i", f"file:{inner}/{job.copy.name}"]
            outputs += ["-map", f"{index}:v:0", "-map", f"{index}:a:0?", "-c", "copy",
                        "-map_metadata", "-1", "-map_chapters", "-1", "-fs", str(job.cap),
                        "-f", "mp4", f"file:{inner}/{job.out.name}"]
        else:
            inputs += ["-f", mediacheck.PNG_DEMUXER, "-i", f"file:{inner}/{job.copy.name}"]
            outputs += ["-map", f"{index}:v:0", "-frames:v", "1", "-c:v", "png",
                        "-map_metadata", "-1", "-fs", str(job.cap), "-f", "image2",
                        "-update", "1", f"file:{inner}/{job.out.name}"]
    return [ffmpeg, "-nostdin", "-hide_banner", "-v", "error", "-y",
            "-protocol_whitelist", "file", *inputs, *outputs]


def _remux(R, box: Path, jobs: list[_Job], namespaced: bool,  # noqa: N803 (the module)
           timeout: float = REMUX_TIMEOUT) -> None:
    """Run the remux in a sandbox of its own: the render's view, `nobody`, the seccomp
    filter, rlimits and a deadline, BOX (holding only the checked copies) its one writable
    folder. MediaRejected when ffmpeg fails, runs out of time or fills a cap."""
    uid, gid = R._nobody()
    drop = os.geteuid() == 0 and namespaced
    if drop:
        os.chown(box, uid, gid)
    inner = R.INNER_DIR if namespaced else str(box)
    argv = _remux_argv(mediacheck.ffmpeg_exe(), jobs, inner)
    cpu = int(REMUX_TIMEOUT)
    spec = {"namespaced": namespaced, "inner": inner, "tmp_size": "16m",
            "uid": uid if drop else None, "gid": gid if drop else None, "worker_cmd": argv,
            "limits": {"AS": 2 << 30, "CPU": [cpu, cpu + 5],
                       "FSIZE": max(job.cap for job in jobs) + (1 << 20), "CORE": 0,
                       "NOFILE": 64, **({"NPROC": R.HELPER_NPROC} if drop else {})}}
    launcher = R.sandbox_launcher(spec, sys.executable, [(str(box), inner)])
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": inner, "TMPDIR": inner}
    said = box.parent / f"{box.name}.remux.log"
    try:
        code, timed_out = R._run(launcher, box, env, said, timeout)
        tail = stage_tree.read_tail(said, 4096)
    finally:
        said.unlink(missing_ok=True)
    first = mediacheck.printable(jobs[0].src.name, 120)
    name = first if len(jobs) == 1 else f"{first} and the rest"
    if timed_out:
        raise MediaRejected(f"{name}: remaking it took over {timeout:.1f} s")
    if code != 0:
        lines = [ln for ln in tail.splitlines() if ln.strip()]
        raise MediaRejected(f"{name}: ffmpeg could not remake it (exit {code}): "
                            f"{mediacheck.printable(lines[-1][-200:]) if lines else 'no output'}")
    for job in jobs:
        with contextlib.suppress(OSError):
            if job.out.stat().st_size >= job.cap:
                raise MediaRejected(f"{mediacheck.printable(job.src.name, 120)}: the remade "
                                    f"file reached its size cap "
                                    f"({job.cap} bytes)")


def _replace(out: Path, target: Path) -> None:
    """The remade OUT's bytes as a new file of this process at TARGET (the scene's file is
    unlinked first: whatever it was, it is not read again)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(target)
    tmp = target.with_name(f".{target.name}.intake")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)
    _copy_bounded(out, tmp, out.stat().st_size, shown=out.name)
    os.replace(tmp, target)
