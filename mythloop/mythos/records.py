"""A film's records: what each step's task returns to the flow, and the run's manifest.json.

The field names are the manifest keys of docs/contracts.md ("A film as scenes"). The flow
reads these models' attributes; `Manifest` (rundir.py) holds a `FilmManifest` and writes it
with `model_dump(mode="json", exclude_unset=True)`, so a manifest carries exactly the keys
that were set (as when it was a dict) and a key that was never set is not written as null.
Every manifest model keeps keys it does not know (`extra="allow"`): an older or newer
manifest loads, and is written back, whole. Step results that a task cache may hand back from
an earlier version as a plain dict are read with `Model.model_validate(result)` (a model is
passed through as it is).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mythloop.mythos.sandbox.layout import Finding
from mythloop.mythos.sandbox.render import RenderResult
from mythloop.mythos.sandbox.verify import VerifyResult
from mythloop.vocab import RenderKind

__all__ = [
    "CodegenResult", "FailedScene", "FilmInfo", "FilmManifest", "FilmResult", "MediaResult",
    "RenderEntry",
    "RepairEntry", "RepairResult", "SceneCode", "SceneRecord", "SceneRender", "StageOutcome",
    "StageRecord", "StaticCheck", "StitchResult", "SubtitlesInfo", "VerifyResult",
    "VoiceInfo",
]


# --- what the film's tasks return -----------------------------------------------------------
class StageOutcome(BaseModel):
    """One reasoning stage: its validated artifact and the raw reply it came from."""

    artifact: dict[str, Any]
    raw: str = ""
    retried: bool = False
    model: str | None = None
    seconds: float = 0.0
    simulated: bool = False


class SceneCode(BaseModel):
    """One Scene class of the generated film, in plan order (index from 1)."""

    index: int
    name: str
    code: str
    narration: str = ""  # the scene class's NARRATION ("" when codegen wrote none)


class CodegenResult(BaseModel):
    """Codegen: the whole file, its shared header and its scenes."""

    code: str
    scene_name: str | None = None
    header: str
    scenes: list[SceneCode]
    raw: str = ""
    model: str | None = None
    seconds: float = 0.0


class RepairResult(BaseModel):
    """A scoped repair: the repaired scene class alone."""

    code: str
    raw: str = ""
    model: str | None = None
    seconds: float = 0.0
    reused: bool = False
    """Read back from the run dir (a resumed film's repair made before): no model call."""


class SceneRender(RenderResult):
    """A scene's render as the flow sees it: a sandboxed render, or a scene-cache hit."""

    cache: Literal["hit", "miss"] = "miss"


class StitchResult(BaseModel):
    video_path: str
    duration: float


class _Open(BaseModel):
    """A manifest part: unknown keys are kept; assignments are validated."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)


class SubtitlesInfo(_Open):
    srt: str | None = None
    vtt: str | None = None
    cues: int = 0
    burnt: bool = False
    soft_track: bool = True


class VoiceInfo(_Open):
    engine: str | None = None
    clips: list[str | None] = Field(default_factory=list)
    speech_s: list[float] = Field(default_factory=list)
    held: list[dict[str, Any]] = Field(default_factory=list)
    track: str | None = None
    # one per narration line: {scene, clip, start_s, end_s}, seconds from its scene's start
    lines: list[dict[str, Any]] = Field(default_factory=list)


class MediaResult(BaseModel):
    """Subtitles, the voice-over (None without one) and the poster of the stitched film
    (`finish_film` returns it without the poster; the film's task adds the poster)."""

    subtitles: SubtitlesInfo
    voice: VoiceInfo | None = None
    scene_spans: list[float] = Field(default_factory=list)
    duration: float
    poster: str | None = None


# --- the manifest -----------------------------------------------------------------------
class StageRecord(_Open):
    """A manifest `stages` row: a reasoning stage, codegen or a repair."""

    stage: str | None = None
    artifact: str | None = None
    seconds: float | None = None
    retried: bool | None = None
    cached: bool | None = None
    attempts: int | None = None
    model: str | None = None
    prefect_task_run_id: str | None = None


class StaticCheck(_Open):
    passed: bool | None = None
    detail: str | None = None
    line: int | None = None


class RenderEntry(_Open):
    """A manifest `renders` row (and, with fewer keys, a scene record's `renders` row)."""

    scene: int | None = None
    name: str | None = None
    attempt: int | None = None
    ok: bool | None = None
    kind: RenderKind | None = None
    cache: str | None = None
    returncode: int | None = None
    seconds: float | None = None
    cpu_s: float | None = None
    message: str | None = None
    video_path: str | None = None
    isolation: list[str] | None = None


class RepairEntry(_Open):
    """A manifest `repairs` row (and, with fewer keys, a scene record's `repairs` row)."""

    scene: int | None = None
    name: str | None = None
    attempt: int | None = None
    seconds: float | None = None
    model: str | None = None
    failure: str | None = None
    reused: bool = False
    """Made before in this run dir (a resumed film) and read back: no model call."""


class SceneRecord(_Open):
    """One scene of the film in the manifest's `scenes` list."""

    index: int | None = None
    name: str | None = None
    label: str | None = None
    file: str | None = None
    ok: bool | None = None
    attempts: int = 0
    cache: str | None = None
    render_seconds: float = 0.0
    renders: list[RenderEntry] = Field(default_factory=list)
    repairs: list[RepairEntry] = Field(default_factory=list)
    static_check: StaticCheck | None = None
    layout: list[Finding] | None = None  # the layout check's findings (same keys as ever)
    video: str | None = None
    duration: float | None = None
    error: str | None = None
    narration: str | None = None  # what a teacher says over this scene (voice and subtitles)
    failed_repair: dict[str, Any] | None = None  # a repair that could not help; video kept


class FilmInfo(_Open):
    file: str | None = None
    duration: float | None = None
    scene_durations_sum: float | None = None
    method: str | None = None
    scene_spans: list[float] | None = None


class FailedScene(_Open):
    scene: int | None = None
    name: str | None = None
    kind: RenderKind | None = None
    error: str | None = None


class FilmManifest(_Open):
    """manifest.json of a film run dir."""

    run_id: str | None = None
    created_utc: str | None = None
    stages: list[StageRecord] = Field(default_factory=list)
    prompt: str | None = None
    backend: str | None = None
    model: str | None = None
    offline: bool = False
    replay: bool = False
    request: dict[str, Any] | None = None
    prefect_flow_run_id: str | None = None
    model_fallbacks: list[dict[str, Any]] = Field(default_factory=list)
    scene_count: int | None = None
    shared_header: str | None = None
    render_workers: int | None = None
    scenes: list[SceneRecord] = Field(default_factory=list)
    static_check: StaticCheck | None = None
    renders: list[RenderEntry] = Field(default_factory=list)
    repairs: list[RepairEntry] = Field(default_factory=list)
    render_timed_out: bool | None = None
    render_problem: str | None = None
    film: FilmInfo | None = None
    subtitles: SubtitlesInfo | None = None
    voice: VoiceInfo | None = None
    poster: str | None = None
    scene_file: str | None = None
    scene_name: str | None = None
    video_path: str | None = None
    model_calls: int = 0
    completed_utc: str | None = None
    failed: dict[str, Any] | None = None
    failed_scenes: list[FailedScene] = Field(default_factory=list)
    kept_scenes: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)  # e.g. a scene kept after a failed repair


# --- what the film flow returns ------------------------------------------------------------
class FilmResult(BaseModel):
    """The film flow's result: where the run dir, the film and its scene file are."""

    run_dir: str
    video_path: str | None = None  # None: not rendered (no --render)
    video_url: str | None = None  # the film's preview address while `mythloop serve` runs
    scene_file: str
    scenes: int
    repairs: int
    model_calls: int
