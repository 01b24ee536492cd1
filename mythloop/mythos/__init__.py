"""Mythos films: plan, generate, check, render and finish a Manim film.

Subpackages by job (each with a docstring naming its modules):

    plan/      the stage specs, prompts and the film request          (imports code/)
    code/      extraction from replies, the scene split, safe parsing (imports nothing here)
    sandbox/   static check, sandboxed render, layout check, scene cache, and the files that
               run inside the sandbox (standard library only, + manim) (imports code/)
    media/     ffmpeg steps, subtitles, speech, the finished film     (not sandbox/ itself)
    standins/  the offline model stand-in and the replay cassettes    (imports plan/, code/)

and at the top the film session that ties them together (pipeline.py), the typed records of a
run (records.py) and the run directory (rundir.py). pyproject.toml's import contracts keep
that order.

The names below are what flows, tasks and the app use, importable from here
(`from mythloop.mythos import FilmRequest, render_scene`). They load on first use, so
`import mythloop.mythos` is cheap: it imports no subpackage, and nothing here ever imports
Prefect, Manim or torch (Manim runs only inside the render sandbox).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# public name -> the module under mythloop.mythos that defines it
_EXPORTS = {
    # plan/
    "FilmRequest": "plan.request",
    "STAGES": "plan.stages",
    # the session and its records
    "FilmSession": "pipeline",
    "open_session": "pipeline",
    "cache_basis": "pipeline",
    "SCENE_FILE": "pipeline",
    "FilmManifest": "records",
    "CodegenResult": "records",
    "FailedScene": "records",
    "MediaResult": "records",
    "RenderEntry": "records",
    "RepairEntry": "records",
    "RepairResult": "records",
    "SceneRecord": "records",
    "SceneRender": "records",
    "StageOutcome": "records",
    "StaticCheck": "records",
    "StitchResult": "records",
    "slugify": "rundir",
    "utc_now": "rundir",
    # code/
    "SceneUnit": "code.scenes",
    "split_film": "code.scenes",
    "join_film": "code.scenes",
    "scene_cache_key": "code.scenes",
    "scene_file_text": "code.scenes",
    "scene_narration": "code.scenes",
    # sandbox/
    "verify_scene": "sandbox.verify",
    "VerifyResult": "sandbox.verify",
    "render_scene": "sandbox.render",
    "RenderResult": "sandbox.render",
    "scene_names": "sandbox.render",
    "SceneCache": "sandbox.scene_cache",
    "Finding": "sandbox.layout",
    "format_findings": "sandbox.layout",
    # media/
    "duration_of": "media.avmux",
    "still_clip": "media.avmux",
    "concat_videos": "media.avmux",
    "poster_frame": "media.avmux",
    "thumbnail_data_url": "media.avmux",
    "finish_film": "media.filmmedia",
    "scene_narrations": "media.filmmedia",
    "get_engine": "media.tts",
    "engine_status": "media.tts",
    "TTSError": "media.tts",
}

__all__ = [  # the keys of _EXPORTS (a test checks)
    "CodegenResult", "FailedScene", "FilmManifest", "FilmRequest", "FilmSession", "Finding",
    "MediaResult", "RenderEntry", "RenderResult", "RepairEntry", "RepairResult", "SCENE_FILE",
    "STAGES", "SceneCache", "SceneRecord", "SceneRender", "SceneUnit", "StageOutcome",
    "StaticCheck", "StitchResult", "TTSError", "VerifyResult", "cache_basis", "concat_videos",
    "duration_of", "engine_status", "finish_film", "format_findings", "get_engine", "join_film",
    "open_session", "poster_frame", "render_scene", "scene_cache_key", "scene_file_text",
    "scene_names", "scene_narration", "scene_narrations", "slugify", "split_film", "still_clip",
    "thumbnail_data_url", "utc_now", "verify_scene"
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'mythloop.mythos' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads these
    from mythloop.mythos.code.scenes import (
        SceneUnit,
        join_film,
        scene_cache_key,
        scene_file_text,
        scene_narration,
        split_film,
    )
    from mythloop.mythos.media.avmux import (
        concat_videos,
        duration_of,
        poster_frame,
        still_clip,
        thumbnail_data_url,
    )
    from mythloop.mythos.media.filmmedia import finish_film, scene_narrations
    from mythloop.mythos.media.tts import TTSError, engine_status, get_engine
    from mythloop.mythos.pipeline import SCENE_FILE, FilmSession, cache_basis, open_session
    from mythloop.mythos.plan.request import FilmRequest
    from mythloop.mythos.plan.stages import STAGES
    from mythloop.mythos.records import (
        CodegenResult,
        FailedScene,
        FilmManifest,
        MediaResult,
        RenderEntry,
        RepairEntry,
        RepairResult,
        SceneRecord,
        SceneRender,
        StageOutcome,
        StaticCheck,
        StitchResult,
    )
    from mythloop.mythos.rundir import slugify, utc_now
    from mythloop.mythos.sandbox.layout import Finding, format_findings
    from mythloop.mythos.sandbox.render import RenderResult, render_scene, scene_names
    from mythloop.mythos.sandbox.scene_cache import SceneCache
    from mythloop.mythos.sandbox.verify import VerifyResult, verify_scene
