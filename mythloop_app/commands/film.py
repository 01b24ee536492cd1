"""`mythloop film`: run the Mythos film flow from the command line."""

from __future__ import annotations

from pathlib import Path

import typer

from mythloop.vocab import FILM_BACKENDS, QUALITIES
from mythloop_app.commands.runtime import flow_runtime, ui_hint


def film(
    prompt: str = typer.Argument(..., help="What the film should explain, e.g. "
                                            "'the heat equation'."),
    render: bool = typer.Option(False, "--render/--no-render",
                                help="Render the scene to an mp4 (and repair it when it fails)."),
    quality: str = typer.Option("l", "-q", "--quality",
                                help="Manim quality: " + " | ".join(QUALITIES)
                                + " (l 480p15 ... k 4K)."),
    backend: str = typer.Option("offline", help="Model backend: " + " | ".join(FILM_BACKENDS)
                                + ". offline and replay need no account."),
    model: str | None = typer.Option(None, help="Model name (default: M2M_MODEL or the "
                                                "backend's own)."),
    fallback: list[str] = typer.Option(
        [], "--fallback", help="Fallback model for model-specific failures (repeatable; "
                               "default: M2M_MODEL_FALLBACKS)."),
    max_repairs: int = typer.Option(3, min=0, max=10, help="Repairs allowed after a failed "
                                                          "render."),
    timeout: float | None = typer.Option(None, help="Seconds per model call (M2M_TIMEOUT)."),
    render_timeout: float | None = typer.Option(None, help="Seconds per render "
                                                           "(M2M_RENDER_TIMEOUT)."),
    render_workers: int | None = typer.Option(
        None, "--render-workers", min=1, max=64,
        help="Scenes rendered at once (default: the CPU count)."),
    voice: str | None = typer.Option(
        None, "--voice", help="Voice-over of the narration: espeak (offline, espeak-ng). "
        "Default: silent."),
    burn_subtitles: bool = typer.Option(
        False, "--burn-subtitles", help="Burn subtitles into the picture (default: a soft "
        "subtitle track; film.srt/film.vtt are written either way)."),
    layout_repair: bool = typer.Option(
        False, "--layout-repair", help="Spend one scoped repair on a scene whose text the "
        "layout check finds off-frame, overlapping or too small."),
    fresh: bool = typer.Option(False, "--fresh", help="Call the model again even for stages "
                                                      "with cached results, and render every "
                                                      "scene again (no scene cache)."),
    runs_dir: Path | None = typer.Option(None, help="Runs root (default: M2M_RUNS_DIR or "
                                                    ".mythloop/runs)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs."),
) -> None:
    """Turn PROMPT into a Manim film: six reasoning stages, codegen, verify, render, repair.

    Prints the run dir (artifacts, raw model traces, manifest.json, mythos_scene.py) and
    the video path.
    """
    from pydantic import ValidationError

    from mythloop.mythos.request import FilmRequest

    try:
        request = FilmRequest(prompt=prompt, render=render, quality=quality, backend=backend,
                              model=model, fallbacks=fallback, max_repairs=max_repairs,
                              stage_timeout=timeout, render_timeout=render_timeout,
                              fresh=fresh, runs_dir=runs_dir, render_workers=render_workers,
                              voice=voice, burn_subtitles=burn_subtitles,
                              layout_repair=layout_repair)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        typer.echo(f"error: {problems}", err=True)
        raise typer.Exit(2) from None
    if request.voice and request.render:
        from mythloop.mythos.tts import TTSError, get_engine

        try:  # before any server starts: a missing engine costs one line
            get_engine(request.voice)
        except TTSError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    typer.echo(f"backend: {backend_label(request)}")
    with flow_runtime(verbose=verbose):
        from mythloop_flows.film import film as film_flow

        state = film_flow(request, return_state=True)
        try:
            result = state.result()
        except Exception as exc:  # the flow failed: one clear line, the run dir kept
            typer.echo(f"film failed: {_one_line(exc)}", err=True)
            typer.echo(ui_hint(), err=True)
            raise typer.Exit(1) from None
    typer.echo(f"run dir: {result['run_dir']}")
    if result["video_path"]:
        typer.echo(f"video:   {result['video_path']}")
        if result.get("video_url"):
            typer.echo(f"watch:   {result['video_url']}")
    else:
        typer.echo("video:   (not rendered; pass --render)")
    typer.echo(f"backend: {backend_label(request)}")
    typer.echo(ui_hint())


def backend_label(request) -> str:
    """Which backend played the model, said plainly (offline and replay are not models)."""
    if request.backend == "offline":
        return "offline (no model: deterministic offline stand-ins wrote every stage)"
    if request.backend == "replay":
        return "replay (no model: recorded cassettes replayed, no live call)"
    return f"{request.backend} (a real model: {request.model or 'the backend default'})"


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def register(app: typer.Typer) -> None:
    app.command("film")(film)
