"""What a user asks for when they start a film (the `film` flow's one parameter).

The field descriptions are what the Prefect UI shows on the film deployment's
"Run" form; the Literal fields render as choices there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from mythloop.vocab import FILM_BACKENDS, QUALITIES, FilmBackend, Quality

__all__ = ["FilmBackend", "FilmRequest", "FILM_BACKENDS", "Quality", "QUALITIES"]
# FilmBackend and Quality (the CLI, the request and the UI form offer these) live in mythloop.vocab.


class FilmRequest(BaseModel):
    """A Mythos film: a prompt through six reasoning stages, codegen, verify, render, repair."""

    prompt: str = Field(..., min_length=1, max_length=2000,
                        description="What the film should explain, e.g. 'the heat equation'.")
    render: bool = Field(True, description="Render the scene to an mp4 after codegen and verify.")
    quality: Quality = Field(
        "l", description="Manim quality: l=480p15 (fast), m=720p30, h=1080p60, p=1440p60, k=4K.")
    backend: FilmBackend = Field(
        "offline", description="Model backend. offline = deterministic stand-ins; replay = "
        "recorded cassettes (the heat equation, Euler's identity); the others need an account.")
    model: str | None = Field(None, description="Model name for the backend (blank = default).")
    fallbacks: list[str] = Field(
        default_factory=list,
        description="Models to fall back to, in order, on model-specific failures "
                    "(default: M2M_MODEL_FALLBACKS).")
    max_repairs: int = Field(3, ge=0, le=10,
                             description="How many times a failed render may be repaired.")
    stage_timeout: float | None = Field(
        None, gt=0, description="Seconds per model call (default: M2M_TIMEOUT, 300).")
    render_timeout: float | None = Field(
        None, gt=0, description="Seconds per render (default: M2M_RENDER_TIMEOUT, 1800).")
    render_workers: int | None = Field(
        None, ge=1, le=64, description="How many scenes render at once (default: the CPU count).")
    voice: Literal["espeak"] | None = Field(
        None, description="Speak the narration over the film: espeak = espeak-ng, offline "
        "(blank = a silent film). A scene is held on its last frame while its narration runs.")
    burn_subtitles: bool = Field(
        False, description="Burn the subtitles into the picture (default: a soft subtitle "
                           "track; film.srt and film.vtt are written either way).")
    layout_repair: bool = Field(
        False, description="When the layout check finds text off-frame, overlapping or too "
        "small in a scene, spend one scoped repair on that scene with the findings.")
    fresh: bool = Field(False, description="Ignore cached stage results and scene videos; call "
                                           "the model and render again.")
    runs_dir: Path | None = Field(
        # (no angle brackets: the UI's form reads a description as markdown, and drops a
        # `<runs_dir>` as an HTML tag)
        None, description="Runs root (default: MYTHLOOP_RUNS_DIR or .mythloop/runs); the film "
                          "lands in RUNS_DIR/mythos/STAMP-SLUG/ (STAMP: the UTC time it "
                          "started; SLUG: from the prompt).")
    resume_dir: Path | None = Field(
        None, description="Continue an interrupted film in its own run dir (one holding its "
                          "manifest.json) instead of a new one; finished stages, rendered "
                          "scenes, failed renders and repairs are reused (blank = a new run "
                          "dir).")

    @field_validator("prompt")
    @classmethod
    def _clean_prompt(cls, value: str) -> str:
        value = value.replace("\ufeff", "").strip()
        if not value:
            raise ValueError("the prompt is empty")
        return value
