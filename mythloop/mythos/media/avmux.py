"""ffmpeg steps that turn rendered scenes into a film people can watch: stitching, voice, captions.

Every step writes its output under a temporary name beside the target and renames it at
the end, so a killed ffmpeg never leaves a half-written file under the real name. Errors
raise `MuxError` with the last line ffmpeg printed.

The scene videos and stills these steps read were checked and remade by the parent when
their render ended (`mythloop.mediacheck`, the sandbox's intake); still, every ffmpeg and
ffprobe here runs under rlimits (memory, CPU, the largest file it may write) and a
deadline, reads through the `file` protocol only, and writes at most `output_cap` of its
inputs (`-fs`; a step that reaches the cap fails). The stitch reads only links it made
itself, under plain names (`000.mp4`, the concat demuxer's `-safe 1`), each checked again
by its structure (`mediacheck.check_structure`).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from mythloop import mediacheck, procs
from mythloop.fileio import replacing
from mythloop.mediacheck import MediaRejected, output_cap, tool_limits

__all__ = ["MuxError", "probe", "duration_of", "hold_last_frame", "speech_track", "trim_silence",
           "mux_film",
           "poster_frame", "thumbnail_data_url", "frame_stats", "luma_profile", "last_picture_time",
           "concat_videos", "BURNT_STYLE", "burnt_band_share"]

_AUDIO_RATE = 22050  # espeak-ng's rate; every clip is brought to it so concat needs no re-encode


class MuxError(RuntimeError):
    """An ffmpeg/ffprobe step failed; the message has its last error line."""


def _ffmpeg() -> str:
    exe = shutil.which("ffmpeg")
    if not exe:
        raise MuxError("ffmpeg not found; fix: apt-get install ffmpeg (make setup installs it)")
    return exe


_ONLY_FILES = ["-protocol_whitelist", "file"]  # an input option: before each -i
_MP4 = ["-f", mediacheck.MP4_DEMUXER]  # a scene video or film is read as an mp4, never probed


def _run(args: list[str], *, cwd: Path | None = None, timeout: float = 600.0,
         write_bytes: int = 1 << 20) -> None:
    """ffmpeg ARGS under rlimits (CPU = the timeout, files up to WRITE_BYTES) and a deadline."""
    try:
        proc = procs.run(args, cwd=cwd, timeout=timeout,
                         limits=tool_limits(cpu_s=timeout, write_bytes=write_bytes))
    except subprocess.TimeoutExpired:
        raise MuxError(f"{Path(args[0]).name} took over {timeout:.0f} s and was stopped") \
            from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise MuxError(f"{Path(args[0]).name} failed (exit {proc.returncode}): "
                       f"{lines[-1] if lines else 'no output'}")


def _produce(args: list[str], out: Path, *, inputs: Sequence[Path | str],
             cwd: Path | None = None, timeout: float = 600.0) -> Path:
    """Run ffmpeg `args` + a temp output beside `out`, then rename it to `out`. The output
    may be at most `output_cap(inputs)` bytes: a step that reaches it fails (MuxError)."""
    cap = output_cap(list(inputs))
    with replacing(out) as tmp:
        _run([*args, "-fs", str(cap), str(tmp.resolve())], cwd=cwd, timeout=timeout,
             write_bytes=cap + (1 << 20))
        if tmp.stat().st_size >= cap:
            raise MuxError(f"ffmpeg's {out.name} reached its size cap ({cap} bytes, from "
                           "its inputs): an input is not what the film made")
    return out


_PROBED: OrderedDict[tuple, str] = OrderedDict()  # file identity -> ffprobe's JSON text
_PROBED_MAX = 256
_PROBED_LOCK = threading.Lock()


def _identity(path: Path | str) -> tuple | None:
    """What names one version of a file: its real path, device, inode, size and change time
    (every step here writes a new file and renames it into place: a new inode)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return (real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def probe(path: Path | str) -> dict:
    """ffprobe's JSON: {"streams": [...], "format": {...}}.

    Remembered per version of the file (`_identity`) for the life of the process: a film
    asks about each scene when it is rendered, again when it is stitched and again for its
    subtitles, and each ffprobe costs about 0.07 s of CPU."""
    key = _identity(path)
    text = None
    if key is not None:
        with _PROBED_LOCK:
            text = _PROBED.get(key)
            if text is not None:
                _PROBED.move_to_end(key)
    if text is None:
        exe = shutil.which("ffprobe")
        if not exe:
            raise MuxError("ffprobe not found; fix: apt-get install ffmpeg (make setup installs it)")
        try:
            proc = procs.run([exe, "-v", "error", *_ONLY_FILES, "-show_streams",
                              "-show_format", "-of", "json", str(path)], timeout=60,
                             limits=tool_limits(cpu_s=60, memory_bytes=1 << 30))
        except subprocess.TimeoutExpired:
            raise MuxError(f"ffprobe took over 60 s on {path}") from None
        if proc.returncode != 0:
            raise MuxError(f"ffprobe cannot read {path}: {proc.stderr.strip()[:200]}")
        text = proc.stdout
        if key is not None and key == _identity(path):  # unchanged while it was read
            with _PROBED_LOCK:
                _PROBED[key] = text
                while len(_PROBED) > _PROBED_MAX:
                    _PROBED.popitem(last=False)
    return json.loads(text)  # a fresh dict each time: callers may change theirs


def duration_of(path: Path | str, kind: str | None = None) -> float:
    """Duration in seconds of the file, or of its first stream of `kind` (video/audio)."""
    info = probe(path)
    if kind:
        for stream in info.get("streams", []):
            if stream.get("codec_type") == kind and stream.get("duration"):
                return float(stream["duration"])
    return float(info.get("format", {}).get("duration") or 0.0)


def frame_stats(video: Path) -> list[dict[str, float]]:
    """Per frame of `video`: its time `t` and ffmpeg signalstats' luma figures (YAVG, YMIN,
    YMAX, ... on a 0-255 scale)."""
    try:
        proc = procs.run([_ffmpeg(), "-v", "error", *_ONLY_FILES, *_MP4, "-i", str(video), "-vf",
                          "signalstats,metadata=print:file=-", "-an", "-f", "null", "-"],
                         timeout=300, limits=tool_limits(cpu_s=300))
    except subprocess.TimeoutExpired:
        raise MuxError(f"ffmpeg took over 300 s measuring {video}") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise MuxError(f"ffmpeg could not measure {video}: {lines[-1] if lines else 'no output'}")
    frames: list[dict[str, float]] = []
    for line in proc.stdout.splitlines():
        if "pts_time:" in line:
            frames.append({"t": float(line.rsplit("pts_time:", 1)[1].split()[0])})
        elif line.startswith("lavfi.signalstats.Y") and frames:
            key, _, value = line[len("lavfi.signalstats."):].partition("=")
            frames[-1][key] = float(value)
    return frames


def luma_profile(video: Path) -> list[tuple[float, float]]:
    """(time, mean luma 0-255) of every frame of `video`."""
    return [(f["t"], f.get("YAVG", 0.0)) for f in frame_stats(video)]


_BLANK_END = 0.25  # a last frame with at most this share of the scene's contrast is blank
_FLAT = 1.0  # contrast steps smaller than this (0-255 scale) are no change


def last_picture_time(video: Path) -> float | None:
    """When a scene ends by fading its picture out to an empty frame, the time of its last
    full picture (the frame just before the fade); None when its last frame shows something.

    A frame's contrast (brightest minus darkest luma) is near 0 on an empty background and
    high wherever text or a drawing is up; a fade-out lowers it step by step."""
    frames = frame_stats(video)
    if len(frames) < 3:
        return None
    contrast = [f.get("YMAX", 0.0) - f.get("YMIN", 0.0) for f in frames]
    if contrast[-1] > _BLANK_END * max(contrast) or max(contrast) <= _FLAT:
        return None
    start = len(contrast) - 1  # walk back up the fade-out to where it began
    while start > 0 and contrast[start - 1] >= contrast[start] - _FLAT:
        start -= 1
    peak = max(contrast[start:])
    last = max(i for i in range(start, len(contrast)) if contrast[i] >= 0.9 * peak)
    return frames[last]["t"]


def hold_last_frame(video: Path, seconds: float, out: Path, *,
                    at: float | None = None) -> Path:
    """A copy of `video` that stays `seconds` longer on one frame (re-encoded, same size):
    the last frame, or with `at` the frame at `at` seconds (the rest plays after the hold)."""
    if at is None:
        return _produce([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, *_MP4, "-i", str(video),
                         "-vf", f"tpad=stop_mode=clone:stop_duration={seconds:.3f}",
                         "-c:v", "libx264", "-pix_fmt", "yuv420p", "-an"], out,
                        inputs=[video])
    cut = at + 0.001
    graph = (f"[0:v]split[a][b];[a]trim=end={cut:.3f},setpts=PTS-STARTPTS,"
             f"tpad=stop_mode=clone:stop_duration={seconds:.3f}[held];"
             f"[b]trim=start={cut:.3f},setpts=PTS-STARTPTS[rest];"
             "[held][rest]concat=n=2:v=1:a=0[v]")
    return _produce([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, *_MP4, "-i", str(video),
                     "-filter_complex", graph, "-map", "[v]",
                     "-c:v", "libx264", "-pix_fmt", "yuv420p", "-an"], out, inputs=[video])


def still_clip(image: Path, seconds: float, out: Path, *, fps: int = 15) -> Path:
    """A SECONDS-long video of IMAGE held still (a still scene in a film), encoded like the
    held frames above (libx264, yuv420p, FPS), so it stitches with the animated scenes."""
    try:  # the intake remade it; its header once more before a decoder sees it
        mediacheck.check_structure(image, "image")
    except MediaRejected as exc:
        raise MuxError(f"still_clip: {exc}") from None
    return _produce([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, "-f", mediacheck.PNG_DEMUXER,
                     "-loop", "1", "-framerate", str(fps),
                     "-i", str(image), "-t", f"{seconds:.3f}", "-vf", "pad=ceil(iw/2)*2:"
                     "ceil(ih/2)*2", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-r", str(fps),
                     "-an", "-f", "mp4"], out, inputs=[image])


_SILENCE_DB = -50  # quieter than this at a clip's ends is the engine's padding, not speech
_TRIM = (f"silenceremove=start_periods=1:start_threshold={_SILENCE_DB}dB,areverse,"
         f"silenceremove=start_periods=1:start_threshold={_SILENCE_DB}dB,areverse")


def trim_silence(clip: Path, out: Path) -> Path:
    """CLIP without the silence a speech engine pads it with at either end (espeak-ng adds
    about 0.4 s after each line), as 16-bit mono at _AUDIO_RATE: its length is the speech's."""
    return _produce([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, "-f", "wav", "-i", str(clip),
                     "-af", _TRIM, "-ar", str(_AUDIO_RATE), "-ac", "1", "-c:a", "pcm_s16le",
                     "-f", "wav"], out, inputs=[clip])


def speech_track(clips: Sequence[tuple[Path | None, float]], out: Path) -> Path:
    """One WAV: each (clip, span) in order, the clip padded with silence to exactly `span`
    seconds (a missing clip is silence): a clip starts where the spans before it end, so a
    scene's first line starts where its picture does."""
    work = out.parent / f".{out.stem}.parts"
    work.mkdir(parents=True, exist_ok=True)
    try:
        parts = []
        for index, (clip, span) in enumerate(clips):
            part = work / f"{index:03d}.wav"
            source = (["-i", str(clip), "-af", "apad"] if clip else
                      ["-f", "lavfi", "-i", f"anullsrc=r={_AUDIO_RATE}:cl=mono"])
            # 16-bit mono at _AUDIO_RATE: span seconds of it, and a header
            size = int(span * _AUDIO_RATE * 2) + (1 << 16)
            _run([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, *source, "-t", f"{span:.3f}",
                  "-ar", str(_AUDIO_RATE), "-ac", "1", "-c:a", "pcm_s16le", "-fs", str(size),
                  str(part)], write_bytes=size + (1 << 20))
            parts.append(part)
        listing = work / "list.txt"  # names this function made: the concat demuxer's safe mode
        listing.write_text("".join(f"file '{p.name}'\n" for p in parts), encoding="utf-8")
        return _produce([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, "-f", "concat",
                         "-safe", "1", "-i", listing.name, "-c", "copy"], out, cwd=work,
                        inputs=parts)
    finally:
        shutil.rmtree(work, ignore_errors=True)


# Burnt subtitles sit in the bottom band scenes keep free (layout.SUBTITLE_SHARE of the
# frame height; mythloop.scenekit's caption lane sits above it): libass scales an SRT to a
# 288-unit-high script, so two lines of 12-unit text with a 3-unit margin fit in 46 units.
_SCRIPT_HEIGHT = 288
BURNT_FONT_SIZE = 12
BURNT_MARGIN_V = 3
BURNT_STYLE = (f"Fontsize={BURNT_FONT_SIZE},MarginV={BURNT_MARGIN_V},Alignment=2,"
               "Outline=1,Shadow=0,BorderStyle=1")


def burnt_band_share(lines: int = 2) -> float:
    """The share of the frame height that `lines` burnt subtitle lines take, margin included
    (1.2 line height per font unit)."""
    return (BURNT_MARGIN_V + lines * 1.2 * BURNT_FONT_SIZE) / _SCRIPT_HEIGHT


def mux_film(video: Path, out: Path, *, audio: Path | None = None,
             subtitles: Path | None = None, burn: bool = False) -> Path:
    """`video` plus an AAC audio track and subtitles: a soft mov_text track, or burnt into
    the picture with `burn` (re-encodes the video)."""
    args = [_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, *_MP4, "-i", str(video.resolve())]
    maps = ["-map", "0:v:0"]
    inputs: list[Path] = [video]
    if audio:
        inputs.append(audio)
        args += [*_ONLY_FILES, "-i", str(audio.resolve())]
        maps += ["-map", "1:a:0"]
    codecs = ["-c:a", "aac", "-b:a", "96k"] if audio else []
    cwd = None
    if subtitles and burn:
        # The subtitles filter parses its argument: run beside the file, name it bare.
        cwd = subtitles.parent
        codecs += ["-vf", f"subtitles={subtitles.name}:force_style='{BURNT_STYLE}'",
                   "-c:v", "libx264",
                   "-pix_fmt", "yuv420p"]
    else:
        codecs += ["-c:v", "copy"]
        if subtitles:
            args += [*_ONLY_FILES, "-i", str(subtitles.resolve())]
            maps += ["-map", f"{2 if audio else 1}:s:0"]
            codecs += ["-c:s", "mov_text", "-metadata:s:s:0", "language=eng"]
    return _produce([*args, *maps, *codecs, "-movflags", "+faststart"], out, cwd=cwd,
                    inputs=inputs)


def poster_frame(video: Path, out: Path, *, at: float | None = None) -> Path:
    """A PNG of the frame at `at` seconds (default: the middle of the video)."""
    when = duration_of(video, "video") / 2 if at is None else at
    return _produce([_ffmpeg(), "-y", "-v", "error", "-ss", f"{when:.3f}", *_ONLY_FILES,
                     *_MP4, "-i", str(video), "-frames:v", "1", "-f", "image2"], out, inputs=[video])


def thumbnail_data_url(image: Path, *, width: int = 320) -> str:
    """A small JPEG of `image` as a `data:` URL (a few tens of KB), for markdown that must
    show a picture without a server to fetch it from."""
    with tempfile.TemporaryDirectory(prefix="mythloop-thumb-") as tmp:
        out = Path(tmp) / "thumb.jpg"
        _run([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, "-i", str(image), "-vf",
              f"scale={width}:-2", "-frames:v", "1", "-q:v", "5", "-fs", str(4 << 20),
              str(out)], timeout=60, write_bytes=5 << 20)
        return "data:image/jpeg;base64," + base64.b64encode(out.read_bytes()).decode("ascii")


def concat_videos(videos: Sequence[Path | str], target: Path | str) -> Path:
    """Concatenate VIDEOS in order into TARGET with the concat demuxer, without re-encoding.

    Each video is checked by its structure (an mp4, no long edit list: `mediacheck`) and
    linked into a private folder as `000.mp4`, `001.mp4`, ...: the list names only those
    (the demuxer's safe mode), never a path a scene could have chosen, and the film is at
    most `output_cap` of the videos' size."""
    if not videos:
        raise ValueError("no scene videos to stitch")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{target.stem}.stitch-", dir=target.parent))
    try:
        names = []
        for index, video in enumerate(videos):
            try:
                mediacheck.check_structure(video, "video")
            except MediaRejected as exc:
                raise MuxError(f"could not stitch scene {index + 1}: {exc}") from None
            name = f"{index:03d}.mp4"
            try:
                os.link(video, work / name)
            except OSError:  # another filesystem
                os.symlink(os.path.realpath(video), work / name)
            names.append(name)
        (work / "list.txt").write_text("".join(f"file '{n}'\n" for n in names),
                                       encoding="utf-8")
        try:
            _produce([_ffmpeg(), "-y", "-v", "error", *_ONLY_FILES, "-f", "concat", "-safe", "1",
                      "-i", "list.txt", "-c", "copy", "-movflags", "+faststart", "-f", "mp4"],
                     target, cwd=work, inputs=list(videos))
        except MuxError as exc:
            raise RuntimeError(f"ffmpeg could not stitch the scenes: {exc}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target
