"""`mythloop verify` and `mythloop render`: static check and sandboxed render of a scene."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["register"]


def _read(file: Path) -> str:
    """The file's text, or one error line and exit code 2."""
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        typer.echo(f"error: cannot read {file}: {reason}", err=True)
        raise typer.Exit(2) from None


def verify(
    file: Path = typer.Argument(..., help="Scene file (Python) to check."),
    prompt: str | None = typer.Option(None, "--prompt", help="The film prompt, for the "
                                      "art-direction lint (light paper + no black)."),
) -> None:
    """Statically check a generated scene; exit 1 with FILE:LINE: reason when rejected."""
    from mythloop.mythos.sandbox.render import scene_names
    from mythloop.mythos.sandbox.verify import verify_scene

    code = _read(file)
    result = verify_scene(code, prompt=prompt)
    if result.ok and not scene_names(code):  # render would say the same, much later
        typer.echo(f"{file}:1: defines no Scene subclass (a class deriving from Scene with a "
                   "construct method); there is nothing to render", err=True)
        raise typer.Exit(1)
    if result.ok:
        typer.echo(f"ok: {file} passed verify")
        return
    typer.echo(f"{file}:{result.line}: {result.reason}", err=True)
    raise typer.Exit(1)


def render(
    file: Path = typer.Argument(..., help="Scene file (Python) to render."),
    scene: str | None = typer.Option(None, "--scene", help="Scene class to render (default: "
                                     "every Scene class of the file, as manim -a)."),
    quality: str = typer.Option("l", "-q", "--quality", help="Manim quality: l (480p15), m, h, p or k (4K)."),
    timeout: float | None = typer.Option(None, "--timeout", min=1, help="Seconds before the "
                                         "render is killed (default: M2M_RENDER_TIMEOUT)."),
    out: Path | None = typer.Option(None, "--out", help="Render dir, any folder you can write "
                                    "(default: a fresh folder under the state dir)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress lines on stderr."),
) -> None:
    """Render a file's scenes in the sandbox; print each output's path (an mp4, or
    `image: PATH` for a still scene), or one line saying what went wrong.

    While it runs, progress lines go to stderr (one per animation); stdout holds the result.
    """
    from mythloop.mythos.sandbox.render import (
        render_scene,
        scene_names,
        syntax_problem,
        top_level_names,
    )
    from mythloop.vocab import QUALITIES

    code = _read(file)
    if quality not in QUALITIES:
        typer.echo(f"error: -q must be one of {', '.join(QUALITIES)}, not {quality!r}", err=True)
        raise typer.Exit(2)
    problem = syntax_problem(code)
    if problem:
        typer.echo(f"error: {file} does not parse: {problem}; fix the scene code", err=True)
        raise typer.Exit(2)
    if scene is not None and scene not in top_level_names(code):
        found = ", ".join(scene_names(code)) or "none found"
        typer.echo(f"error: {file} defines no {scene!r}; pass one of its scene classes to "
                   f"--scene ({found})", err=True)
        raise typer.Exit(2)
    if scene is None and not scene_names(code):  # before the out dir is made
        typer.echo(f"error: {file} defines no Scene subclass (a class deriving from Scene with "
                   "a construct method); there is nothing to render", err=True)
        raise typer.Exit(2)

    def progress(line: str) -> None:
        typer.echo(line, err=True)

    from mythloop_app.commands.runtime import resume_command, stop_signals

    try:  # SIGTERM is Ctrl-C: the sandboxed render and its sessions end with this command
        with stop_signals(resume_command()):
            result = render_scene(file, scene=scene, quality=quality, timeout=timeout,
                                  out_dir=out, progress=None if quiet else progress)
    except OSError as exc:
        typer.echo(f"error: cannot use the render dir: {exc}", err=True)
        raise typer.Exit(2) from None
    if result.ok:
        for output in result.outputs:
            typer.echo(output.path if output.kind == "video" else f"image: {output.path}")
        return
    log = f" [log: {result.log_path}]" if result.log_path else ""
    typer.echo(f"render failed ({result.kind}): {result.message}{log}", err=True)
    raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `verify` and `render` to the mythloop app."""
    app.command("verify")(verify)
    app.command("render")(render)
