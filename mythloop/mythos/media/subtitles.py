"""Subtitles for a film: cues timed from each scene's measured duration, as SRT and WebVTT.

With a voice (`cues_for_speech`), each narration line is spoken as its own clip and the
clips of a scene follow one another from the scene's start, `LINE_PAUSE_S` apart
(`speech_layout`): each cue spans exactly its own line's speech. Without one
(`cues_for_scenes`), a scene's lines share its time span in proportion to their length in
words (a line of twelve words stays up longer than one of three), with a short gap between
cues so players do not merge them. Times come from the stitched film (scene boundaries are
the cumulative durations of the scene videos), never from the plan's estimates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mythloop.fileio import write_text_atomic

__all__ = ["Cue", "SceneNarration", "cues_for_scenes", "speech_layout", "cues_for_speech",
           "LINE_PAUSE_S", "format_srt", "format_vtt", "write_subtitles"]

_GAP_S = 0.08  # between two cues of one scene
_MIN_CUE_S = 0.4
LINE_PAUSE_S = 0.4  # silence between two spoken lines of one scene


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class SceneNarration:
    """One scene of the stitched film: its measured duration and the lines spoken over it."""

    duration: float
    lines: Sequence[str]


def cues_for_scenes(scenes: Sequence[SceneNarration]) -> list[Cue]:
    """Cues in film time; every cue lies inside its scene's span [offset, offset + duration]."""
    cues: list[Cue] = []
    offset = 0.0
    for scene in scenes:
        lines = [" ".join(line.split()) for line in scene.lines if line and line.strip()]
        if lines and scene.duration > 0:
            weights = [max(len(line.split()), 1) for line in lines]
            total = float(sum(weights))
            start = offset
            for line, weight in zip(lines, weights, strict=True):
                span = scene.duration * weight / total
                end = min(start + span, offset + scene.duration)
                shown_end = max(end - _GAP_S, start + min(_MIN_CUE_S, end - start))
                cues.append(Cue(round(start, 3), round(shown_end, 3), line))
                start = end
        offset += max(scene.duration, 0.0)
    return cues


def speech_layout(durations: Sequence[float]) -> list[tuple[float, float]]:
    """Where each spoken line of one scene lies, in seconds from the scene's start: the lines
    one after another, LINE_PAUSE_S apart, the first at 0. (start, end) per line."""
    spans: list[tuple[float, float]] = []
    start = 0.0
    for duration in durations:
        end = start + max(float(duration), 0.0)
        spans.append((start, end))
        start = end + LINE_PAUSE_S
    return spans


def cues_for_speech(spans: Sequence[float], lines: Sequence[Sequence[str]],
                    speech: Sequence[Sequence[float]]) -> list[Cue]:
    """Cues in film time for a voiced film: scene i lasts spans[i] seconds and speaks
    lines[i], whose clips last speech[i] seconds each; every cue spans its line's speech as
    `speech_layout` places it (clipped to its scene, which the voice step lengthens to fit)."""
    cues: list[Cue] = []
    offset = 0.0
    for span, texts, durations in zip(spans, lines, speech, strict=True):
        for text, (start, end) in zip(texts, speech_layout(durations), strict=True):
            shown = " ".join(text.split())
            if shown and end > start:
                cues.append(Cue(round(offset + start, 3), round(offset + min(end, span), 3),
                                shown))
        offset += max(span, 0.0)
    return cues


def _clock(seconds: float, sep: str) -> str:
    millis = int(round(max(seconds, 0.0) * 1000))
    hours, millis = divmod(millis, 3_600_000)
    minutes, millis = divmod(millis, 60_000)
    secs, millis = divmod(millis, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{millis:03d}"


def format_srt(cues: Sequence[Cue]) -> str:
    blocks = [f"{i}\n{_clock(c.start, ',')} --> {_clock(c.end, ',')}\n{c.text}\n"
              for i, c in enumerate(cues, start=1)]
    return "\n".join(blocks)


def format_vtt(cues: Sequence[Cue]) -> str:
    blocks = [f"{_clock(c.start, '.')} --> {_clock(c.end, '.')}\n{c.text}\n" for c in cues]
    return "WEBVTT\n\n" + "\n".join(blocks)


def write_subtitles(cues: Sequence[Cue], stem: Path) -> tuple[Path, Path]:
    """Write `<stem>.srt` and `<stem>.vtt` atomically; returns both paths."""
    srt, vtt = stem.with_suffix(".srt"), stem.with_suffix(".vtt")
    write_text_atomic(srt, format_srt(cues))
    write_text_atomic(vtt, format_vtt(cues))
    return srt, vtt
