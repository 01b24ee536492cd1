"""After the scenes are stitched: subtitles, an offline voice-over, a poster frame.

    scene_narrations(texts, curriculum)  each scene's own narration (codegen's NARRATION),
                                         one list of sentences per scene
    narration_for_scenes(curriculum, n)  the curriculum's act narratives, one list per scene
    finish_film(...)                     film.srt + film.vtt timed from the scene videos
                                         (without a voice, each cue on the shot it
                                         describes, from the render's layout record),
                                         optional voice (a clip per narration line, spoken
                                         when its caption appears where the captions quote
                                         the lines, else one after another from its scene's
                                         start; each cue spanning its line's speech; a
                                         scene held on its last frame while its narration
                                         runs on), muxed into film.mp4 (soft or burnt
                                         subtitles)
    poster_frame                         a PNG from the middle of the film
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from mythloop.mythos.media.avmux import (
    concat_videos,
    duration_of,
    hold_last_frame,
    last_picture_time,
    mux_film,
    speech_track,
    trim_silence,
)
from mythloop.mythos.media.subtitles import (
    SceneNarration,
    Shot,
    caption_starts,
    cues_for_scenes,
    cues_for_speech,
    speech_layout,
    write_subtitles,
)
from mythloop.mythos.media.tts import get_engine, wav_duration
from mythloop.mythos.records import MediaResult, SubtitlesInfo, VoiceInfo

__all__ = ["scene_narrations", "narration_for_scenes", "finish_film"]

_SPEECH_TAIL_S = 0.3  # a breath after a scene's narration before the next scene starts
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(" ".join(str(text or "").split())) if s.strip()]


def narration_for_scenes(curriculum: dict, count: int) -> list[list[str]]:
    """The curriculum's act narratives as narration, one list of sentences per scene.

    With one scene per act, each scene speaks its act; otherwise the sentences of all acts,
    in order, are shared out over the scenes as evenly as they go.
    """
    if count <= 0:
        return []
    acts = sorted((a for a in (curriculum or {}).get("acts", []) if isinstance(a, dict)),
                  key=lambda a: a.get("act_number", 0))
    per_act = [_sentences(a.get("narrative", "")) for a in acts]
    if len(per_act) == count:
        return per_act
    flat = [s for act in per_act for s in act]
    return [flat[len(flat) * k // count: len(flat) * (k + 1) // count] for k in range(count)]


def scene_narrations(texts: Sequence[str],
                     curriculum: dict | None = None) -> tuple[list[list[str]], list[str | None]]:
    """Per scene, the sentences spoken and shown over it, and where they came from.

    A scene's own narration (its class's NARRATION, written by codegen for that scene) comes
    first. A scene without one borrows its act's narrative only when the film has one scene
    per act; otherwise it stays silent rather than speak words meant for another scene.
    Returns (sentences per scene, source per scene: "scene", "curriculum act" or None).
    """
    count = len(texts)
    acts = narration_for_scenes(curriculum or {}, count)
    by_act = len([a for a in (curriculum or {}).get("acts", []) if isinstance(a, dict)]) == count
    lines: list[list[str]] = []
    sources: list[str | None] = []
    for index, text in enumerate(texts):
        own = _sentences(text)
        if own:
            lines.append(own)
            sources.append("scene")
        elif by_act and acts[index]:
            lines.append(acts[index])
            sources.append("curriculum act")
        else:
            lines.append([])
            sources.append(None)
    return lines, sources


def _shots(scene: dict) -> list[Shot]:
    """The scene's shots as the scene book hands them on ([start, end, text] each)."""
    return [Shot(float(start), float(end), str(text))
            for start, end, text in scene.get("shots") or ()]


def finish_film(film: Path, scenes: Sequence[dict], narration: Sequence[Sequence[str]], *,
                voice: str | None = None, burn: bool = False) -> MediaResult:
    """Subtitles (and with `voice` a spoken track) for the stitched FILM, muxed into it.

    `scenes` are the film's scenes in order, each with `label`, `video` and `duration`, and
    optionally `shots` ([start, end, text] in scene time, `subtitles.caption_shots`): without
    a voice each cue then spans the shot it describes, else its scene's share by words.
    With a voice, a scene whose shots are captions quoting its lines speaks each line when
    its caption appears (or after the line before it, if that runs later).
    Returns what the manifest records: the subtitle files, cues, voice clips and timings
    (a MediaResult without the poster).
    """
    film = Path(film)
    work = film.parent / "voice"
    spoken = [[" ".join(line.split()) for line in lines if line and line.strip()]
              for lines in narration]
    clips: list[list[Path]] = [[] for _ in scenes]  # per scene, one clip per line
    lengths: list[list[float]] = [[] for _ in scenes]  # their speech, silence trimmed
    speech: list[float] = [0.0] * len(scenes)  # per scene: its last line's end
    # per scene, where each line's clip lies from the scene's start: one placement that the
    # cues, the speech track, the manifest and the held frames all read
    layouts: list[list[tuple[float, float]]] = [[] for _ in scenes]
    engine_name = None
    if voice:
        engine = get_engine(voice)
        engine_name = engine.name
        for i, (scene, lines) in enumerate(zip(scenes, spoken, strict=True)):
            for j, line in enumerate(lines, start=1):
                raw = work / f"{scene['label']}-{j:02d}.raw.wav"
                clip = work / f"{scene['label']}-{j:02d}.wav"
                engine.synthesize(line, raw)
                trim_silence(raw, clip)
                raw.unlink(missing_ok=True)
                clips[i].append(clip)
                lengths[i].append(wav_duration(clip))
            if lines:
                layouts[i] = speech_layout(lengths[i], caption_starts(lines, _shots(scene)))
                speech[i] = layouts[i][-1][1]
    videos, held = [], []
    for i, scene in enumerate(scenes):
        video, duration = Path(scene["video"]), float(scene["duration"])
        extra = speech[i] + _SPEECH_TAIL_S - duration if clips[i] else 0.0
        if extra > 0.05:  # the narration runs longer than the animation: hold its final
            # picture (the frame before a closing fade-out, so the hold is never black)
            at = last_picture_time(video)
            video = hold_last_frame(video, extra, work / f"{scene['label']}.held.mp4", at=at)
            held.append({"scene": scene["label"], "held_s": round(extra, 3),
                         "at_s": None if at is None else round(at, 3)})
        videos.append(video)
    base = film
    if held:
        base = concat_videos(videos, work / "picture.mp4")
    spans = [duration_of(v, "video") or float(s["duration"]) for v, s in
             zip(videos, scenes, strict=True)]
    audio, placed = None, []
    if voice:
        cues = cues_for_speech(spans, spoken, layouts)
        # silence up to a scene's first line, then each line's clip padded to the next line's
        # start (the last one to its scene's end)
        parts: list[tuple[Path | None, float]] = []
        for span, scene_clips, layout in zip(spans, clips, layouts, strict=True):
            starts = [start for start, _ in layout]
            if not scene_clips:
                parts.append((None, span))
            elif starts[0] > 0:
                parts.append((None, starts[0]))
            for k, clip in enumerate(scene_clips):
                until = starts[k + 1] if k + 1 < len(starts) else span
                parts.append((clip, until - starts[k]))
        audio = speech_track(parts, work / "voice.wav")
        placed = [{"scene": scene["label"], "clip": str(clip), "start_s": round(start, 3),
                   "end_s": round(end, 3)}
                  for scene, scene_clips, layout in zip(scenes, clips, layouts, strict=True)
                  for clip, (start, end) in zip(scene_clips, layout, strict=True)]
    else:
        cues = cues_for_scenes([SceneNarration(span, lines, _shots(scene))
                                for span, lines, scene in zip(spans, spoken, scenes,
                                                              strict=True)])
    srt, vtt = write_subtitles(cues, film.with_suffix(""))
    mux_film(base, film, audio=audio, subtitles=srt, burn=burn)
    return MediaResult(
        subtitles=SubtitlesInfo(srt=str(srt), vtt=str(vtt), cues=len(cues), burnt=burn,
                                soft_track=not burn),
        voice=(VoiceInfo(engine=engine_name, clips=[str(c) for cs in clips for c in cs],
                         speech_s=[round(s, 3) for s in speech], held=held,
                         track=str(audio), lines=placed) if voice else None),
        scene_spans=[round(s, 3) for s in spans],
        duration=round(duration_of(film, "video"), 3),
    )
