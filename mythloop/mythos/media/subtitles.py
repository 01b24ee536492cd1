"""Subtitles for a film: cues timed from each scene's measured duration, as SRT and WebVTT.

With a voice (`cues_for_speech`), each narration line is spoken as its own clip, placed by
`speech_layout`: where the scene's captions quote its lines (`caption_starts`), each line
starts when its first caption appears, or `LINE_PAUSE_S` after the previous line's speech
ends if that is later; otherwise the clips follow one another from the scene's start,
`LINE_PAUSE_S` apart. Each cue spans exactly its own line's speech. Without one
(`cues_for_scenes`), each cue spans the shot it describes: the scene's shots are read from
its render's layout record (`caption_shots`: the opening up to the first lane caption, then
one shot per caption of `mythloop.scenekit.CaptionLane`, from the play that fades it in to
the play that fades it out). Where the captions quote the narration lines (caption k is
line k, or a line split over consecutive captions: `quoted_lines`), each line goes to the
shot of its first caption, so the subtitle is the caption on screen; otherwise each line
goes to the shot whose words it shares most, in order (`align_lines`). A line holds until
the next line's shot starts. A scene whose render
reported no caption timeline falls back to sharing its time span among its lines in
proportion to their length in words. A short gap is left between cues so players do not
merge them. Times come from the stitched film (scene boundaries are the cumulative
durations of the scene videos), never from the plan's estimates.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mythloop.fileio import write_text_atomic

__all__ = ["Cue", "Shot", "SceneNarration", "caption_shots", "lane_captions", "quoted_lines",
           "caption_mismatch", "align_lines", "cues_for_scenes",
           "caption_starts", "speech_layout", "cues_for_speech", "LINE_PAUSE_S", "format_srt",
           "format_vtt", "write_subtitles"]

_GAP_S = 0.08  # between two cues of one scene
_MIN_CUE_S = 0.4
LINE_PAUSE_S = 0.4  # silence between two spoken lines of one scene


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Shot:
    """One shot of a scene, in seconds from the scene's start, and the words shown in it."""

    start: float
    end: float
    text: str


@dataclass(frozen=True)
class SceneNarration:
    """One scene of the stitched film: its measured duration, the lines spoken over it and
    its shots (empty: its render reported no caption timeline)."""

    duration: float
    lines: Sequence[str]
    shots: Sequence[Shot] = field(default_factory=tuple)


_PLAY = re.compile(r"^play \d+ at (\d+\.\d+)s$")
_WORD = re.compile(r"[a-z]{3,}")


def caption_shots(record: Mapping) -> list[Shot]:
    """A scene's shots from its layout record (`layout_record.parse_record`'s dict): the
    opening, up to the first lane caption, then one shot per caption on screen. A caption
    starts with the play that first shows it (a sample "play 4 at 0.25s" at t says play 4
    began at t - 0.25) and ends with the first play without it, or one sample interval after
    it was last seen; [] when the record shows no lane caption."""
    sample = float(record.get("sample_s") or 0.25)
    spans: list[list] = []  # [start, end, label], in order of appearance
    openers: list[str] = []
    current: list | None = None
    last_t = 0.0
    for snap in record.get("snapshots", ()):
        t = float(snap["t"])
        played = _PLAY.match(snap["at"])
        began = max(last_t, t - float(played.group(1))) if played else t
        captions = [i["label"] for i in snap["items"] if i.get("lane") == "caption"]
        label = captions[-1] if captions else None
        if current is not None and current[2] != label:
            current[1] = min(began, last_t + sample) if label is None else began
            current = None
        if label is not None and current is None:
            current = [began if played else last_t, t, label]
            spans.append(current)
        elif current is not None:
            current[1] = t
        if not spans:
            openers += [i["label"] for i in snap["items"]
                        if i.get("kind") in ("text", "math") and i["label"] not in openers]
        last_t = t
    if current is not None:
        current[1] = last_t
    if not spans:
        return []
    shots = [Shot(0.0, spans[0][0], " ".join(openers))] if spans[0][0] > 0 else []
    return shots + [Shot(start, max(end, start), text) for start, end, text in spans]


def lane_captions(record: Mapping) -> list[str]:
    """The lane captions a scene's layout record shows, in order of appearance (a caption
    seen in consecutive snapshots counts once)."""
    shown: list[str] = []
    for snap in record.get("snapshots", ()):
        for item in snap.get("items", ()):
            if item.get("lane") == "caption" and (not shown or shown[-1] != item["label"]):
                shown.append(item["label"])
    return shown


_NOT_WORD = re.compile(r"[^\w\s]+")


def _plain(text: str) -> str:
    """TEXT with case, punctuation and spacing folded: what a caption and a line compare on."""
    return " ".join(_NOT_WORD.sub(" ", text.lower()).split())


def _quotes(lines: Sequence[str], captions: Sequence[str]) -> tuple[list[int], str | None]:
    """For each caption, the line it quotes, while captions quote the lines in order (a line
    may run over consecutive captions, each a verbatim piece of it); and why not, or None."""
    place: list[int] = []
    line, said = 0, ""
    for k, caption in enumerate(captions):
        piece = _plain(caption)
        sofar = f"{said} {piece}".strip()
        want = _plain(lines[line]) if line < len(lines) else ""
        if want and sofar == want:
            place.append(line)
            line, said = line + 1, ""
        elif want and piece and want.startswith(sofar + " "):
            place.append(line)
            said = sofar
        else:
            verb = "does not go on with" if said else "is not"
            where = (f"{verb} line {line + 1} \"{lines[line][:80]}\"" if line < len(lines)
                     else f"has no line left ({len(lines)} line(s))")
            return place, f"caption {k + 1} \"{caption[:80]}\" {where}"
    if said or line < len(lines):
        return place, (f"{len(captions)} caption(s) quote {line} of {len(lines)} line(s); "
                       f"line {line + 1} \"{lines[line][:80]}\" is not on screen")
    return place, None


def quoted_lines(lines: Sequence[str], captions: Sequence[str]) -> list[int] | None:
    """For each caption, the index of the narration line it quotes, when the captions are
    the lines: caption k is line k (normalised case, punctuation and spacing), or a line is
    split over consecutive captions, each a verbatim piece, in order; every line on screen.
    None otherwise (or without captions)."""
    if not captions or not lines:
        return None
    place, why = _quotes(lines, captions)
    return None if why else place


def caption_mismatch(lines: Sequence[str], captions: Sequence[str]) -> str | None:
    """Why a scene's lane captions are not its narration lines, in one line; None when they
    are (or the scene shows no caption: its subtitles say what no caption does)."""
    if not captions:
        return None
    if not lines:
        return f"{len(captions)} caption(s) but no narration line"
    return _quotes(lines, captions)[1]


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def align_lines(lines: Sequence[str], shots: Sequence[Shot]) -> list[int]:
    """For each line, the index of the shot it describes: lines and shots both run in the
    order the scene shows them, so the indexes never go back; among such assignments the
    one whose lines share the most words with their shots (ties: the earlier shots)."""
    n, m = len(lines), len(shots)
    words = [_words(s.text) for s in shots]
    score = [[len(_words(line) & w) / (len(w) or 1) for w in words] for line in lines]
    best = [[0.0] * m for _ in range(n)]  # best[i][k]: lines 0..i placed, line i on shot k
    for i in range(n):
        running = float("-inf") if i else 0.0
        for k in range(m):
            if i:
                running = max(running, best[i - 1][k])
            best[i][k] = running + score[i][k]
    chosen: list[int] = []
    k = m - 1
    for i in range(n - 1, -1, -1):
        row = best[i]
        k = max(range(k + 1), key=lambda j: (row[j], -j))
        chosen.append(k)
    return chosen[::-1]


def _quoted_shots(lines: Sequence[str], shots: Sequence[Shot]) -> list[int] | None:
    """For each line, the index of the shot of its first caption, where the scene's captions
    quote its lines (`quoted_lines`, the opening shot aside); None otherwise."""
    for skip in (0, 1):  # the first shot may be the opening, before any caption
        quoted = quoted_lines(lines, [s.text for s in shots[skip:]])
        if quoted is not None:
            return [skip + quoted.index(i) for i in range(len(lines))]
    return None


def _placed(lines: Sequence[str], shots: Sequence[Shot]) -> list[int]:
    """For each line, the index of its shot: exact where the scene's captions quote its
    lines (the shot of the line's first caption), else `align_lines`."""
    quoted = _quoted_shots(lines, shots)
    return quoted if quoted is not None else align_lines(lines, shots)


def _timed_cues(offset: float, duration: float, lines: list[str],
                shots: Sequence[Shot]) -> list[Cue]:
    """One scene's cues from its shots: each line from its shot's start until the next
    line's shot starts (lines sharing a shot share it by words; the last line holds until
    its last shot's end)."""
    place = _placed(lines, shots)
    cues: list[Cue] = []
    for k in sorted(set(place)):
        group = [line for line, at in zip(lines, place, strict=True) if at == k]
        later = [at for at in place if at > k]
        start = shots[k].start
        end = shots[later[0]].start if later else max(s.end for s in shots[k:])
        end = min(max(end, start), duration)
        total = float(sum(max(len(line.split()), 1) for line in group))
        for line in group:
            until = start + (end - start) * max(len(line.split()), 1) / total
            shown = max(until - _GAP_S, start + min(_MIN_CUE_S, until - start))
            if until > start:
                cues.append(Cue(round(offset + start, 3), round(offset + shown, 3), line))
            start = until
    return cues


def cues_for_scenes(scenes: Sequence[SceneNarration]) -> list[Cue]:
    """Cues in film time; every cue lies inside its scene's span [offset, offset + duration].
    A scene with shots times each line to its shot; one without them (its render reported
    no caption timeline) shares its span among its lines by word count."""
    cues: list[Cue] = []
    offset = 0.0
    for scene in scenes:
        lines = [" ".join(line.split()) for line in scene.lines if line and line.strip()]
        if lines and scene.duration > 0 and scene.shots:
            cues += _timed_cues(offset, scene.duration, lines, scene.shots)
        elif lines and scene.duration > 0:
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


def caption_starts(lines: Sequence[str], shots: Sequence[Shot]) -> list[float] | None:
    """For each line, when its first caption appears (seconds from the scene's start), where
    the scene's captions quote its lines (`quoted_lines`, the opening shot aside); None
    otherwise (no shots, or captions that are not the lines)."""
    lines = [" ".join(line.split()) for line in lines if line and line.strip()]
    quoted = _quoted_shots(lines, shots)
    return None if quoted is None else [shots[k].start for k in quoted]


def speech_layout(durations: Sequence[float],
                  earliest: Sequence[float] | None = None) -> list[tuple[float, float]]:
    """Where each spoken line of one scene lies, in seconds from the scene's start: each line
    LINE_PAUSE_S after the previous one ends, the first at 0; with `earliest` (one time per
    line, `caption_starts`) a line never starts before its own time, so it is spoken when
    its caption appears unless the previous line is still being spoken. (start, end) per
    line."""
    if earliest is not None and len(earliest) != len(durations):
        raise ValueError(f"speech_layout: {len(durations)} line(s) but {len(earliest)} "
                         "earliest start(s)")
    spans: list[tuple[float, float]] = []
    start = 0.0
    for k, duration in enumerate(durations):
        if earliest is not None:
            start = max(start, float(earliest[k]), 0.0)
        end = start + max(float(duration), 0.0)
        spans.append((start, end))
        start = end + LINE_PAUSE_S
    return spans


def cues_for_speech(spans: Sequence[float], lines: Sequence[Sequence[str]],
                    layouts: Sequence[Sequence[tuple[float, float]]]) -> list[Cue]:
    """Cues in film time for a voiced film: scene i lasts spans[i] seconds and speaks
    lines[i], whose clips lie at layouts[i] ((start, end) per line from the scene's start,
    `speech_layout`'s): every cue spans its line's speech (clipped to its scene, which the
    voice step lengthens to fit)."""
    cues: list[Cue] = []
    offset = 0.0
    for span, texts, layout in zip(spans, lines, layouts, strict=True):
        for text, (start, end) in zip(texts, layout, strict=True):
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
