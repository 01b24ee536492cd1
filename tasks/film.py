"""Prefect tasks of a Mythos film: one per reasoning stage, codegen, and per scene verify,
render and scoped repair (`render-scene-03`, `repair-scene-03-1`), then the stitch.

Stage and codegen results are cached on (charter text, input artifact, backend,
model) so a rerun after a failed render calls no model for the finished steps. Each task
returns its record (mythloop.mythos.records); a cached result from before records were models
comes back as a dict, which the flow reads with `Model.model_validate`.

A render that failed ends its task run Failed, with the render's message and log tail in
the run's log; one that Ctrl-C or SIGTERM stopped ends Crashed. Either state carries the
SceneRender, which the flow reads (`return_state=True`) to decide on a repair. A repair in
flight when the command is stopped ends Crashed too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import get_run_logger
from prefect.context import TaskRunContext
from prefect.states import Crashed, Failed, State

from mythloop.mythos.media.avmux import concat_videos, duration_of, poster_frame, still_clip
from mythloop.mythos.media.filmmedia import finish_film
from mythloop.mythos.pipeline import FilmSession
from mythloop.mythos.records import (
    CodegenResult,
    MediaResult,
    RepairResult,
    SceneRender,
    StageOutcome,
    StitchResult,
    VerifyResult,
)
from mythloop.mythos.sandbox.layout import PlannedZoom
from mythloop.mythos.sandbox.render import render_scene
from mythloop.mythos.sandbox.scene_cache import SceneCache, record_failure, recorded_failure
from mythloop.mythos.sandbox.verify import verify_scene
from mythloop.procs import STOPPING
from mythloop.textsafe import clean_line, clean_text
from mythloop_tasks.common import mythloop_task, run_logger_info, told_by_the_flow

STILL_SCENE_S = 2.0  # how long a still scene shows before any narration hold
QUALITY_FPS = {"l": 15, "m": 30, "h": 60, "p": 60, "k": 60}  # manim's frame rates


def _film_cache_key(context: TaskRunContext, parameters: dict) -> str:
    return f"mythloop-film-{parameters['basis']}"


@mythloop_task(name="stage", llm=True, cache_key_fn=_film_cache_key)
def run_stage(session: FilmSession, slug: str, input_artifact: dict,
              basis: str) -> StageOutcome:
    """One reasoning agent: charter + input artifact -> validated JSON artifact."""
    return session.run_stage(slug, input_artifact)


@mythloop_task(name="codegen", llm=True, cache_key_fn=_film_cache_key)
def codegen(session: FilmSession, dossier: dict, basis: str) -> CodegenResult:
    """The six artifacts -> one Manim CE scene file."""
    return session.codegen(dossier)


@mythloop_task(name="verify", retries=0)
def verify(code: str, prompt: str) -> VerifyResult:
    """Static check of the untrusted scene code (`mythloop verify`)."""

    return verify_scene(code, prompt)


@mythloop_task(name="render-scene", retries=0)
def render_scene_task(scene_file: str, scene_name: str, quality: str, timeout: float,
                      out_dir: str, cache_key: str, use_cache: bool = True,
                      zooms: list[PlannedZoom] | None = None) -> SceneRender | State[Any]:
    """One scene: its cached video when its code, header, quality and Manim version are
    unchanged, else a sandboxed render whose video then enters the scene cache. `zooms`: the
    scene's planned zooms (the layout check treats what they frame as intended).

    Returns the SceneRender when it rendered; a Failed state holding it when it did not
    (its error in the run's log), a Crashed one when a stop ended it."""
    return _render_state(_render(scene_file, scene_name, quality, timeout, out_dir, cache_key,
                                use_cache, zooms))


def _render(scene_file: str, scene_name: str, quality: str, timeout: float, out_dir: str,
            cache_key: str, use_cache: bool, zooms: list[PlannedZoom] | None) -> SceneRender:
    cache = SceneCache()
    hit = cache.get(cache_key) if use_cache else None
    layout = cache.get_layout(cache_key, zooms) if hit is not None else None
    if hit is not None and layout is not None:  # a video probed by an older probe renders again
        return SceneRender(ok=True, kind="ok", video_path=str(hit), cache="hit",
                           seconds=0.0, message="cached", returncode=0, log_tail="",
                           isolation=[], layout_findings=layout)
    failed = _recorded_failure(out_dir, cache_key) if use_cache else None
    if failed is not None:  # a resumed film: this code failed in this run dir already
        return failed
    # the layout probe runs inside the same sandboxed render (findings cached with the video)
    rendered = render_scene(scene_file, scene=scene_name, quality=quality, timeout=timeout,
                            out_dir=out_dir, layout=True, layout_zooms=zooms,
                            progress=run_logger_info())
    if rendered.ok and not rendered.video_path and rendered.image_path:
        # a still scene (nothing played): its PNG becomes a held frame the film can stitch
        # (and hold longer for its narration, like any scene's last frame)
        image = Path(rendered.image_path)
        clip = still_clip(image, STILL_SCENE_S, image.with_suffix(".mp4"),
                          fps=QUALITY_FPS.get(quality, 15))
        rendered = rendered.model_copy(update={"video_path": str(clip)})
    result = SceneRender(**rendered.model_dump(), cache="miss")
    if result.ok and result.video_path:
        cache.put(cache_key, Path(result.video_path),
                  layout_record=Path(out_dir) / "media" / "layout.json")
    elif result.kind == "scene_error" and not STOPPING.is_set():
        # the code's own error (not a budget, a tool or a stop): a resume reads it back
        record_failure(out_dir, cache_key, result.model_dump(mode="json"))
    return result


def _recorded_failure(out_dir: str, cache_key: str) -> SceneRender | None:
    data = recorded_failure(out_dir, cache_key)
    try:
        found = SceneRender.model_validate(data) if data is not None else None
    except ValueError:
        return None
    if found is None or found.ok or found.kind != "scene_error":
        return None
    return found.model_copy(update={"cache": "hit", "seconds": 0.0, "cpu_s": None})


def _render_state(result: SceneRender) -> SceneRender | State[Any]:
    """The render task's end: the SceneRender itself when it rendered; else a Failed state
    (Crashed when Ctrl-C or SIGTERM stopped it) that holds it, its error logged."""
    if result.ok:
        return result
    message = clean_line(f"{result.kind}: {result.message}", 2000)
    told_by_the_flow()  # the flow's `[film] render-scene-01 -> ...` line tells the console
    if result.kind == "interrupted":
        return Crashed(message=message, data=result)
    recorded = " (the failure this run dir recorded for this code; not rendered again)" \
        if result.cache == "hit" else ""
    get_run_logger().error("render failed%s: %s\n%s", recorded, message,
                           clean_text(result.log_tail or "(no log)"))
    return Failed(message=message, data=result)


@mythloop_task(name="repair", llm=True)
def repair(session: FilmSession, index: int, name: str, attempt: int, header: str,
           scene_code: str, failure: str) -> RepairResult:
    """Scoped repair: one failing scene class + its error tail (shared header read-only).
    A repair this run dir already made for the same scene and error is read back (no model
    call). Ends Crashed when the command was stopped during it."""
    try:
        return session.repair_scene(index, name, attempt, header, scene_code, failure)
    except Exception as exc:
        if STOPPING.is_set():  # the model call was ended by the stop, not by the scene
            return Crashed(message=clean_line(f"stopped during the repair: {exc}", 2000))  # type: ignore[return-value]
        raise


@mythloop_task(name="stitch", retries=0)
def stitch(videos: list[str], target: str) -> StitchResult:
    """Concatenate the scene videos in plan order (ffmpeg concat demuxer, no re-encode)."""

    concat_videos(videos, target)
    return StitchResult(video_path=target, duration=round(duration_of(target), 3))


@mythloop_task(name="subtitles-and-voice", retries=0)
def finish_media(film: str, scenes: list[dict], narration: list[list[str]],
                 voice: str | None, burn: bool) -> MediaResult:
    """film.srt/film.vtt from the scene durations, the voice-over (when asked) and the mux;
    then a poster frame from the middle of the film."""

    done = finish_film(Path(film), scenes, narration, voice=voice, burn=burn)
    poster = str(poster_frame(Path(film), Path(film).with_name("poster.png")))
    return done.model_copy(update={"poster": poster})
