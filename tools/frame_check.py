"""Frame-by-frame look at a film, as a viewer would see it: every STEP seconds (0.25 by default)
a frame is decoded (ffmpeg) and judged with numpy.

- edge: something drawn touches the frame edge (more than EDGE_PIXELS pixels that differ from
  the background in the outermost BORDER pixels on a side): text cut by the frame;
- dark: a frame darker than the background (its mean brightness below the background's) or
  empty (less than EMPTY_SHARE of its pixels differ from the background): a dead frame.
  The first and last `--grace` seconds (0.5 by default, a fade in or out) are left out.

    python tools/frame_check.py FILM.mp4 [--step 0.25] [--grace 0.5] [--png DIR]

Prints one line per flagged frame and a summary; exit 1 when any frame is flagged. `--png`
also writes the flagged frames (and one per second otherwise) as PNG files to look at.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

BORDER = 2  # pixels on each side that count as "the edge"
EDGE_PIXELS = 3  # more drawn pixels than this on one side: something touches that edge
CONTENT_DIFF = 40  # a pixel differing from the background by more (any channel) is drawn
EMPTY_SHARE = 0.002  # a frame with fewer drawn pixels than this share is empty


def _size(film: Path) -> tuple[int, int, float]:
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "stream=width,height:format=duration", "-of", "json", str(film)],
                         capture_output=True, text=True, check=True).stdout
    data = json.loads(out)
    stream = data["streams"][0]
    return int(stream["width"]), int(stream["height"]), float(data["format"]["duration"])


def frames(film: Path, step: float):
    """(time, HxWx3 uint8 frame) every `step` seconds."""
    width, height, _ = _size(film)
    proc = subprocess.Popen([shutil.which("ffmpeg") or "ffmpeg", "-v", "error", "-i", str(film),
                             "-vf", f"fps=1/{step}:round=down", "-f", "rawvideo",
                             "-pix_fmt", "rgb24", "-"], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    size = width * height * 3
    index = 0
    while True:
        raw = proc.stdout.read(size)
        if len(raw) < size:
            break
        yield index * step, np.frombuffer(raw, np.uint8).reshape(height, width, 3)
        index += 1
    proc.wait()


def background(frame: np.ndarray) -> np.ndarray:
    """The most common colour of the frame (the scene's background)."""
    flat = frame.reshape(-1, 3)
    colours, counts = np.unique(flat[:: max(1, len(flat) // 20000)], axis=0,
                                return_counts=True)
    return colours[counts.argmax()].astype(int)


def judge(frame: np.ndarray, bg: np.ndarray) -> dict:
    drawn = np.abs(frame.astype(int) - bg).max(axis=2) > CONTENT_DIFF
    sides = {"top": drawn[:BORDER], "bottom": drawn[-BORDER:], "left": drawn[:, :BORDER],
             "right": drawn[:, -BORDER:]}
    brightness = float(frame.mean())
    return {"drawn": float(drawn.mean()),
            "edges": sorted(side for side, mask in sides.items() if mask.sum() > EDGE_PIXELS),
            "darker": brightness < float(bg.mean()) - 1.0}


def check(film: Path, step: float = 0.25, grace: float = 0.5, png: Path | None = None) -> dict:
    _, _, duration = _size(film)
    bg = None
    flagged, dark, edge, count = [], [], [], 0
    for t, frame in frames(film, step):
        count += 1
        if bg is None or t < step:
            bg = background(frame)
        verdict = judge(frame, bg)
        inside = grace <= t <= duration - grace
        why = []
        if verdict["edges"]:
            why.append("touches the " + "/".join(verdict["edges"]) + " edge")
            edge.append(t)
        if inside and (verdict["darker"] or verdict["drawn"] < EMPTY_SHARE):
            why.append(f"dead frame ({100 * verdict['drawn']:.2f}% drawn"
                       + (", darker than the background" if verdict["darker"] else "") + ")")
            dark.append(t)
        if why:
            flagged.append((t, why))
            print(f"{t:7.2f}s  " + "; ".join(why))
        if png is not None and (why or abs(t - round(t)) < 1e-6):
            png.mkdir(parents=True, exist_ok=True)
            _write_png(png / f"t{t:07.2f}{'-flagged' if why else ''}.png", frame)
    return {"film": str(film), "duration": duration, "frames": count, "step": step,
            "edge_frames": edge, "dead_frames": dark, "background": bg.tolist() if bg is not None
            else None}


def _write_png(path: Path, frame: np.ndarray) -> None:
    height, width, _ = frame.shape
    subprocess.run([shutil.which("ffmpeg") or "ffmpeg", "-v", "error", "-y", "-f", "rawvideo",
                    "-pix_fmt", "rgb24", "-s", f"{width}x{height}", "-i", "-", str(path)],
                   input=frame.tobytes(), check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("film", type=Path)
    parser.add_argument("--step", type=float, default=0.25)
    parser.add_argument("--grace", type=float, default=0.5)
    parser.add_argument("--png", type=Path, default=None)
    args = parser.parse_args(argv)
    if not args.film.is_file():
        print(f"error: {args.film} is not a file; pass a film's mp4", file=sys.stderr)
        return 2
    summary = check(args.film, args.step, args.grace, args.png)
    print(f"{summary['frames']} frames every {summary['step']} s of {summary['duration']:.1f} s: "
          f"{len(summary['edge_frames'])} touch the frame edge, "
          f"{len(summary['dead_frames'])} dead outside the first and last {args.grace} s")
    return 1 if summary["edge_frames"] or summary["dead_frames"] else 0


if __name__ == "__main__":
    sys.exit(main())
