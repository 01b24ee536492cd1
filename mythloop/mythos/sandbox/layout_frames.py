"""The layout verdict: the probe's record (a hint) held against the frames that were rendered.

The layout probe runs inside the render, beside the scene's code, so its record is only the
scene's word: a scene can overwrite it after the probe wrote it (claim no texts, move the
boxes). The verdict's authority is computed here, outside the scene's process, from the
video itself: a few frames (SAMPLES times spread over the scene, the last one near its end;
times the record cannot choose) are decoded at FRAME_W x FRAME_H by ffmpeg in a sandbox of
their own (the render's bubblewrap view, `nobody`, the seccomp filter, rlimits, a deadline;
a fresh staging dir holding only a link to the video; no scene code), two frames 0.2 s
apart per time. From those:

- edge: content resting on the frame's border (ink in its outermost pixels in both frames
  of a time: a text or drawing cut by the edge, not one sweeping past), whatever the record
  says; only a planned zoom's own formula (the film's shot list, `layout.planned_zooms`)
  held in frame as the record claims may run off;
- unexplained: in a still frame, ink outside every box the record claims for that time
  (texts, formulas and drawings, a few pixels of slack): the record lied or missed
  something, so its findings cannot be trusted to be all;
- unchecked: the record could not be read (layout_record) or the frames could not be
  decoded.

The record's own findings (off_frame, overlap, too_small, ...) still come from
`layout.check_layout` and go to the repair prompt; a forged record can hide those only by
claiming boxes that still account for every pixel, and never hides content at the edge.
What the pixels cannot tell: text from a drawing (ink a record calls a drawing is not judged
as text), overlap and size of texts, or what happens between the sampled times.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mythloop.mythos.sandbox import stage_tree
from mythloop.mythos.sandbox.layout import (
    MAX_FINDINGS,
    Finding,
    PlannedZoom,
    _framed,
    check_layout,
)
from mythloop.mythos.sandbox.layout_record import read_record, unchecked

__all__ = ["judge", "judge_record", "sample_frames", "frame_findings", "Sample", "FRAME_W",
           "FRAME_H", "SAMPLES", "STATS"]

FRAME_W, FRAME_H = 256, 144  # decoded size (16:9; a frame unit is about 18 pixels)
SAMPLES = 6  # times per scene: five spread over it and one near its end
GAP_FRAMES = 3  # frames decoded per time, 0.1 s apart: the first and last are compared
FRAME_TIMEOUT = 60.0
INK = 40  # a pixel is ink when a channel differs from the background by more than this
MOVED = 24  # a pixel moved when a channel differs between the two frames by more than this
EDGE_MIN_PX = 2  # resting ink pixels on one border line that make an `edge` finding
SLACK_PX = 3  # each claimed box grows by this much (anti-aliasing, stroke width)
UNEXPLAINED_MIN_PX = 24  # about one small glyph at FRAME_W x FRAME_H
STILL_SHARE = 0.002  # a frame is still when at most this share of its pixels moved
MAX_SECONDS = 3600.0
STATS = {"runs": 0, "seconds": 0.0}

# Runs inside the frame sandbox (as `nobody`, in a staging dir holding only the video as
# `in.mp4` or `in.png`): the times from the video's own duration, then one ffmpeg run that
# writes GAP_FRAMES raw RGB frames per time to s<i>.rgb. Standard library only.
_FRAME_SCRIPT = r"""
import json, subprocess, sys
a = json.loads(sys.argv[1])
w, h, k, gap = a["w"], a["h"], a["samples"], a["gap"]
opts = ["-protocol_whitelist", "file"]
if a["src"] == "in.png":
    times, inputs = [0.0], [*opts, "-f", "png_pipe", "-i", "in.png"]
else:
    try:
        out = subprocess.run(["ffprobe", "-v", "error", *opts, "-f", "mov", "-show_entries",
                              "format=duration", "-of", "default=nw=1:nk=1", "in.mp4"],
                             capture_output=True, text=True, timeout=20).stdout
        duration = min(float(out.split()[0]), a["max_s"])
    except (IndexError, ValueError, OSError, subprocess.SubprocessError):
        print("ffprobe could not read the video's duration", flush=True)
        sys.exit(3)
    if not duration > 0:
        sys.exit(3)
    span = 0.1 * (gap - 1) + 0.05
    last = max(0.0, duration - span - 0.05)
    times = sorted({round(min(last, duration * (i + 1) / k), 3) for i in range(k - 1)}
                   | {round(last, 3)})
    inputs = []
    for t in times:
        inputs += ["-ss", f"{t:.3f}", "-t", f"{span:.3f}", *opts, "-f", "mov", "-i", "in.mp4"]
graph, outputs = [], []
for i in range(len(times)):
    graph.append(f"[{i}:v]fps=10,trim=end_frame={gap},scale={w}:{h}:flags=area,"
                 f"format=rgb24[o{i}]")
    outputs += ["-map", f"[o{i}]", "-f", "rawvideo", f"s{i}.rgb"]
with open("times.json", "w") as fh:
    json.dump(times, fh)
code = subprocess.run(["ffmpeg", "-v", "error", "-nostdin", "-y", "-threads", "1", *inputs,
                       "-filter_complex", ";".join(graph), *outputs]).returncode
sys.exit(4 if code else 0)
"""


@dataclass(frozen=True)
class Sample:
    """One sampled time of the rendered video: its first and last decoded frame
    (FRAME_H x FRAME_W x 3, uint8); the same array twice for a still image."""

    t: float
    first: np.ndarray
    last: np.ndarray


def sample_frames(output: Path | str, timeout: float = FRAME_TIMEOUT) -> list[Sample] | str:
    """Decode SAMPLES times of OUTPUT (the render's mp4, or the PNG of a still scene) in a
    sandbox; the samples, or one line saying why it could not be done."""
    from mythloop.mythos.sandbox import render as R  # noqa: PLC0415 (cycle: render imports this module)

    started = time.monotonic()
    output = Path(output)
    src = "in.png" if output.suffix.lower() == ".png" else "in.mp4"
    namespaced = R._namespaces_work()
    stage = R._make_stage(namespaced)
    try:
        try:  # a link when `nobody` may read the file (a render's own output), else a copy
            if not os.stat(output).st_mode & 0o004:
                raise PermissionError
            os.link(output, stage / src)
        except OSError:
            shutil.copyfile(output, stage / src)
            os.chmod(stage / src, 0o644)
        uid, gid = R._nobody()
        drop = os.geteuid() == 0 and namespaced
        if drop:
            os.chown(stage, uid, gid)
        inner = R.INNER_DIR if namespaced else str(stage)
        args = {"w": FRAME_W, "h": FRAME_H, "samples": SAMPLES, "gap": GAP_FRAMES,
                "src": src, "max_s": MAX_SECONDS}
        cpu = int(FRAME_TIMEOUT)
        spec = {"namespaced": namespaced, "inner": inner, "tmp_size": "16m",
                "uid": uid if drop else None, "gid": gid if drop else None,
                "worker_cmd": [sys.executable, "-I", "-c", _FRAME_SCRIPT, json.dumps(args)],
                "limits": {"AS": 2 << 30, "CPU": [cpu, cpu + 5], "FSIZE": 16 << 20,
                           "CORE": 0, "NOFILE": 256, **({"NPROC": R.HELPER_NPROC} if drop else {})}}
        launcher = R.sandbox_launcher(spec, sys.executable, [(str(stage), inner)])
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": inner,
               "TMPDIR": inner}
        log = stage.parent / f"{stage.name}.out"
        try:
            code, timed_out = R._run(launcher, stage, env, log, timeout)
        finally:
            log.unlink(missing_ok=True)
        if timed_out or code != 0:
            return ("the rendered video could not be decoded for the frame check"
                    + (" (timed out)" if timed_out else f" (exit {code})"))
        return _read_samples(stage)
    finally:
        stage_tree.remove_tree(stage)
        STATS["runs"] += 1
        STATS["seconds"] += time.monotonic() - started


def _read_samples(stage: Path) -> list[Sample] | str:
    size = FRAME_W * FRAME_H * 3
    try:
        with open(stage / "times.json", "rb") as fh:
            times = json.loads(fh.read(64 << 10))
        samples = []
        for i, t in enumerate(times[:SAMPLES]):
            with open(stage / f"s{i}.rgb", "rb") as fh:
                data = fh.read(GAP_FRAMES * size + 1)
            count = min(len(data) // size, GAP_FRAMES)
            if count < 1:
                continue
            frames = np.frombuffer(data[:count * size], np.uint8).reshape(
                count, FRAME_H, FRAME_W, 3)
            samples.append(Sample(t=float(t), first=frames[0], last=frames[-1]))
    except (OSError, ValueError, TypeError) as exc:
        return f"the frame check's output could not be read ({exc.__class__.__name__})"
    return samples or "the rendered video gave no frames to check"


def _background(frame: np.ndarray) -> np.ndarray:
    """The frame's most common colour (4 bits a channel), averaged over its pixels."""
    q = frame >> 4
    codes = (q[..., 0].astype(np.int32) << 8) | (q[..., 1].astype(np.int32) << 4) | q[..., 2]
    mode = np.bincount(codes.ravel(), minlength=4096).argmax()
    return frame[codes == mode].mean(axis=0)


def _claimed(snaps: Sequence[dict], shape: tuple[int, int]) -> np.ndarray:
    """Pixels covered by any box of SNAPS (frame units -> pixels, plus SLACK_PX)."""
    height, width = shape
    mask = np.zeros(shape, bool)
    for snap in snaps:
        fw, fh = snap["frame"]
        for item in snap["items"]:
            x0, y0, x1, y1 = item["box"]
            c0 = int(np.floor((x0 / fw + 0.5) * width)) - SLACK_PX
            c1 = int(np.ceil((x1 / fw + 0.5) * width)) + SLACK_PX
            r0 = int(np.floor((0.5 - y1 / fh) * height)) - SLACK_PX
            r1 = int(np.ceil((0.5 - y0 / fh) * height)) + SLACK_PX
            mask[max(0, r0):max(0, min(height, r1)), max(0, c0):max(0, min(width, c1))] = True
    return mask


def _around(snapshots: list[dict], t: float) -> list[dict]:
    """The record's snapshots at time T: the last one at or before it, the first one after
    it, and any within 0.3 s (a still frame is explained by the state around it)."""
    before = [s for s in snapshots if s["t"] <= t + 1e-6]
    after = [s for s in snapshots if s["t"] > t + 1e-6]
    near = [s for s in snapshots if abs(s["t"] - t) <= 0.3]
    picked = {id(s): s for s in [*near, *before[-1:], *after[:1]]}
    return list(picked.values())


def _place(mask: np.ndarray) -> str:
    rows, cols = np.nonzero(mask)
    height, width = mask.shape
    return (f"around {100 * cols.mean() / width:.0f}% across and "
            f"{100 * rows.mean() / height:.0f}% down the frame")


def frame_findings(samples: Sequence[Sample], record: dict | None,
                   zooms: Sequence[PlannedZoom] | None = None) -> list[Finding]:
    """`edge` and `unexplained` findings from the decoded SAMPLES (RECORD None: a record
    that could not be read, so nothing is explained and only edges are judged)."""
    findings: list[Finding] = []
    seen: set[tuple[str, str]] = set()

    def add(kind, t: float, key: str, what: str, detail: str) -> None:
        if (kind, key) not in seen:
            seen.add((kind, key))
            findings.append(Finding(kind=kind, at=f"frame {t:.2f}s", t=round(t, 3), what=what,
                                    detail=detail))

    snapshots = sorted((record or {}).get("snapshots", []), key=lambda s: s["t"])
    for sample in samples:
        last = sample.last.astype(np.int16)
        ink = np.abs(last - _background(sample.last)).max(axis=2) > INK
        moved = np.abs(last - sample.first.astype(np.int16)).max(axis=2) > MOVED
        resting = ink & ~moved
        around = _around(snapshots, sample.t) if record is not None else []
        framed = None
        if zooms and around:
            nearest = min(around, key=lambda s: abs(s["t"] - sample.t))
            hit = _framed(nearest, zooms)
            if hit is not None:  # a planned zoom held as the record claims: its formula may run off
                framed = _claimed([{**nearest, "items": [nearest["items"][hit[1]]]}], ink.shape)
        allowed = framed if framed is not None else np.zeros_like(resting)
        border = {"top": (resting[0] & ~allowed[0]), "bottom": (resting[-1] & ~allowed[-1]),
                  "left": (resting[:, 0] & ~allowed[:, 0]),
                  "right": (resting[:, -1] & ~allowed[:, -1])}
        for side, line in border.items():
            if int(line.sum()) >= EDGE_MIN_PX:
                add("edge", sample.t, side, f"content at the {side} edge of the frame",
                    f"{int(line.sum())} pixels of it rest on the border in the rendered "
                    "frames (cut by the edge); keep texts and drawings inside the safe area "
                    "(mythloop.scenekit.fit)")
        if record is None or moved.sum() > STILL_SHARE * moved.size:
            continue
        stray = ink & ~_claimed(around, ink.shape)
        if int(stray.sum()) >= UNEXPLAINED_MIN_PX:
            add("unexplained", sample.t, "", "ink the layout record does not account for",
                f"{int(stray.sum())} pixels {_place(stray)} lie outside every text, formula "
                "and drawing the record lists at this time: the record is missing or moved "
                "something (a scene must not write media/layout.json)")
    return findings


def judge(record_path: Path | str, output: Path | str | None,
          zooms: Sequence[PlannedZoom] | None = None, *,
          deadline: float | None = None) -> list[Finding]:
    """The layout verdict of a render: the record read as hostile data and judged
    (`check_layout`), then held against the rendered OUTPUT's frames (None: no frames, the
    record alone). At most MAX_FINDINGS findings; never raises on what the scene wrote."""
    record, problem = read_record(record_path)
    return judge_record(record, problem, output, zooms, deadline=deadline)


def judge_record(record: dict | None, problem: Finding | None, output: Path | str | None,
                 zooms: Sequence[PlannedZoom] | None = None, *,
                 deadline: float | None = None) -> list[Finding]:
    """`judge` for a record already read (`layout_record.read_record`'s pair)."""
    findings = [problem] if problem is not None else check_layout(record or {}, zooms)
    if output is not None:
        samples = sample_frames(output, FRAME_TIMEOUT if deadline is None else
                                max(0.5, min(FRAME_TIMEOUT, deadline - time.monotonic())))
        if isinstance(samples, str):
            findings.insert(0, unchecked(samples, "the rendered frames"))
        else:
            findings = frame_findings(samples, record, zooms) + findings
    return findings[:MAX_FINDINGS]
