"""`mythloop film`: run the Mythos film flow from the command line."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import typer

from mythloop.mythos.plan.request import FilmRequest
from mythloop.vocab import FILM_BACKENDS, QUALITIES
from mythloop_app.commands.runtime import flow_runtime, ui_hint

_FIELDS = FilmRequest.model_fields  # the options' defaults are the request model's


def film(
    prompt: str = typer.Argument(..., help="What the film should explain, e.g. "
                                            "'the heat equation'."),
    render: bool = typer.Option(False, "--render/--no-render",
                                help="Render the scene to an mp4 (and repair it when it fails)."),
    quality: str = typer.Option(_FIELDS["quality"].default, "-q", "--quality",
                                help="Manim quality: " + " | ".join(QUALITIES)
                                + " (l 480p15 ... k 4K)."),
    backend: str | None = typer.Option(
        None, help="Model backend: " + " | ".join(FILM_BACKENDS) + " (default: MYTHLOOP_BACKEND; "
        "none configured is an error). replay replays a recorded topic and offline rehearses "
        "a fixed film that does not follow the prompt: both need no account."),
    model: str | None = typer.Option(None, help="Model name (default: M2M_MODEL or the "
                                                "backend's own)."),
    fallback: list[str] = typer.Option(
        [], "--fallback", help="Fallback model for model-specific failures (repeatable; "
                               "default: M2M_MODEL_FALLBACKS)."),
    max_repairs: int = typer.Option(_FIELDS["max_repairs"].default, min=0, max=10, help="Repairs allowed after a failed "
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
        _FIELDS["burn_subtitles"].default, "--burn-subtitles", help="Burn subtitles into the picture (default: a soft "
        "subtitle track; film.srt/film.vtt are written either way)."),
    layout_repair: bool = typer.Option(
        _FIELDS["layout_repair"].default, "--layout-repair", help="Spend one scoped repair on a scene whose text the "
        "layout check finds off-frame, overlapping or too small."),
    fresh: bool = typer.Option(_FIELDS["fresh"].default, "--fresh", help="Call the model again even for stages "
                                                      "with cached results, and render every "
                                                      "scene again (no scene cache)."),
    runs_dir: Path | None = typer.Option(None, help="Runs root (default: M2M_RUNS_DIR or "
                                                    ".mythloop/runs)."),
    resume: Path | None = typer.Option(
        None, "--resume", help="Continue an interrupted film in its run dir RUN_DIR (the "
        "Ctrl-C / SIGTERM line names it): finished stages and rendered scenes are reused."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs."),
) -> None:
    """Turn PROMPT into a Manim film: six reasoning stages, codegen, verify, render, repair.

    Prints the run dir (artifacts, raw model traces, manifest.json, mythos_scene.py) and
    the video path.
    """
    backend = backend or os.environ.get("MYTHLOOP_BACKEND", "").strip().lower() or None
    _check_given(prompt, backend or "", runs_dir, resume)
    from pydantic import ValidationError

    try:
        request = FilmRequest(prompt=prompt, render=render, quality=quality,
                              backend=backend or "offline",
                              model=model, fallbacks=fallback, max_repairs=max_repairs,
                              stage_timeout=timeout, render_timeout=render_timeout,
                              fresh=fresh, runs_dir=runs_dir, render_workers=render_workers,
                              voice=voice, burn_subtitles=burn_subtitles,
                              layout_repair=layout_repair, resume_dir=resume)
    except ValidationError as exc:
        from mythloop.checks import plain_errors

        typer.echo(f"error: {plain_errors(exc, _LABELS)}", err=True)
        raise typer.Exit(2) from None
    if backend is None and request.resume_dir is not None:  # the film's own backend
        problem = _resume_problem(request)
        if problem:
            typer.echo(f"error: {problem}", err=True)
            raise typer.Exit(2)
        backend = _recorded_backend(request.resume_dir)
        if backend:
            request = request.model_copy(update={"backend": backend})
    if backend is None:  # the prompt and the options are fine: now the missing model
        _no_model_configured()
    _check_before_prefect(request)
    from mythloop.llm.preflight import backend_problem

    problem = backend_problem(request.backend)  # a CLI that answers, an endpoint that does
    if problem:
        typer.echo(f"error: backend {request.backend!r} cannot work here: {problem}", err=True)
        raise typer.Exit(2)
    if request.voice and request.render:
        from mythloop.mythos.media.tts import TTSError, get_engine

        try:  # before any server starts: a missing engine costs one line
            get_engine(request.voice)
        except TTSError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
    typer.echo(f"backend: {backend_label(request)}")
    with flow_runtime(verbose=verbose, resume=_resume_line(request),
                      before_server=_prewarm(request)):
        from mythloop_flows.film import film as film_flow

        state = film_flow(request, return_state=True)
        try:
            result = state.result()
        except Exception as exc:  # the flow failed: one clear line, the run dir kept
            from mythloop.textsafe import clean_line  # (the error quotes scene text)

            typer.echo(clean_line(f"film failed: {_one_line(exc)}", 8000), err=True)
            typer.echo(ui_hint(), err=True)
            raise typer.Exit(1) from None
    typer.echo(f"run dir: {result.run_dir}")  # a FilmResult (mythloop.mythos.records)
    if result.video_path:
        typer.echo(f"video:   {result.video_path}")
        if result.video_url:
            typer.echo(f"watch:   {result.video_url}")
    else:
        typer.echo("video:   (not rendered; pass --render)")
    typer.echo(f"backend: {backend_label(request)}")
    typer.echo(ui_hint())


_LABELS = {"prompt": "the prompt", "quality": "-q/--quality", "backend": "--backend",
           "fallbacks": "--fallback", "stage_timeout": "--timeout"}


def _no_model_configured() -> NoReturn:
    """Neither --backend nor MYTHLOOP_BACKEND: one line saying no model is configured, and
    the choices (a real backend; replay and its recorded topics; offline, which does not
    follow the prompt). A film about a topic nobody asked for is not a silent default."""
    from mythloop.checks import recorded_topics
    from mythloop.data import data_path

    cassettes = os.environ.get("MYTHLOOP_CASSETTE_DIR") or data_path("fixtures", "cassettes")
    topics = ", ".join(repr(t) for t in recorded_topics(Path(cassettes))) or "none"
    real = " | ".join(b for b in FILM_BACKENDS if b not in ("offline", "replay"))
    typer.echo("error: no model is configured for films: pass --backend " + real + " (or set "
               f"MYTHLOOP_BACKEND); --backend replay replays a recorded topic ({topics}); "
               "--backend offline runs the offline rehearsal, whose film does not follow the "
               "prompt", err=True)
    raise typer.Exit(2)


def _check_given(prompt: str, backend: str, runs_dir: Path | None, resume: Path | None) -> None:
    """The runs dir and the replay recording as given, checked before the film's modules
    (its pydantic models, the settings) load: bad input is answered in well under a second.
    `_check_before_prefect` checks them again on the validated request (and the defaults)."""
    from mythloop.checks import dir_problem, replay_problem

    problem = None
    if runs_dir is not None:
        problem = dir_problem(runs_dir, "runs dir") or dir_problem(runs_dir / "mythos",
                                                                   "runs dir")
        if problem:
            problem += "; pass another --runs-dir (or M2M_RUNS_DIR)"
    topic = prompt.replace("\ufeff", "").strip()  # as FilmRequest cleans it
    if not problem and backend == "replay" and resume is None and 0 < len(topic) <= 2000:
        problem = replay_problem(topic)
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)


def _check_before_prefect(request) -> None:
    """The runs dir and the replay recording, checked before any server starts (exit 2)."""
    from mythloop.checks import dir_problem, replay_problem
    from mythloop.settings import get_settings

    runs_root = request.runs_dir or get_settings().resolved_runs_dir
    problem = dir_problem(runs_root, "runs dir") or dir_problem(runs_root / "mythos", "runs dir")
    if problem:
        problem += "; pass another --runs-dir (or M2M_RUNS_DIR)"
    elif request.resume_dir is not None:
        problem = _resume_problem(request)
    elif request.backend == "replay":
        problem = replay_problem(request.prompt)
    if problem:
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)


def _resume_problem(request) -> str | None:
    """Why --resume RUN_DIR cannot continue this film (None: it can)."""
    import json

    manifest = request.resume_dir / "manifest.json"
    try:
        recorded = json.loads(manifest.read_text(encoding="utf-8")).get("prompt")
    except (OSError, ValueError, AttributeError):
        return f"--resume {request.resume_dir} holds no film (no readable manifest.json)"
    if recorded != request.prompt:
        return (f"--resume {request.resume_dir} is the film of {recorded!r}, not of "
                f"{request.prompt!r}")
    return None


def _recorded_backend(run_dir: Path) -> str | None:
    """The backend a film's manifest names (what `--resume RUN_DIR` continues with when no
    --backend is given)."""
    import json

    try:
        backend = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8")).get(
            "backend")
    except (OSError, ValueError, AttributeError):
        return None
    return backend if isinstance(backend, str) and backend in FILM_BACKENDS else None


def _resume_line(request):
    """The command that continues this film in its run dir, worked out when it is needed
    (the flow picks the run dir): this command line plus --resume RUN_DIR."""
    from mythloop.settings import get_settings
    from mythloop_app.commands.runtime import resume_command

    parent = (request.runs_dir or get_settings().resolved_runs_dir) / "mythos"
    before = set(parent.iterdir()) if parent.is_dir() else set()

    def line() -> str:
        run_dir = request.resume_dir
        if run_dir is None:
            new = [p for p in (parent.iterdir() if parent.is_dir() else [])
                   if p not in before and p.is_dir()]
            run_dir = max(new, key=lambda p: p.stat().st_mtime) if new else None
        return resume_command(add={"--resume": str(run_dir)} if run_dir else None,
                              drop=("--fresh",))

    return line


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


def _prewarm(request: FilmRequest) -> Callable[[], object] | None:
    """The render workers start first: they import manim while the Prefect server starts and
    the stages run (a resumed film may have every scene rendered already: none start early)."""
    if not request.render or request.resume_dir is not None:
        return None

    def start() -> int:
        from mythloop.mythos.sandbox.render import prewarm

        return prewarm(request.render_workers or os.cpu_count() or 1)

    return start
