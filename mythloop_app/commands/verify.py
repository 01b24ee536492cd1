"""`mythloop verify` and `mythloop render`: static check and sandboxed render of a scene."""

from __future__ import annotations

from pathlib import Path

import typer

from mythloop.textsafe import clean_line
from mythloop_app.params import SCENE_FILE_CAP, in_file, out_dir, seconds, shown, text

__all__ = ["register"]


_SCENE_FIX = "pass a Python scene file (a generated scene is a few KB)"


def _read(file: Path) -> str:
    """The file's text, or one error line and exit code 2."""
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        typer.echo(f"error: cannot read {shown(file)}: {reason}", err=True)
        raise typer.Exit(2) from None


def verify(
    file: Path = typer.Argument(..., metavar="FILE", parser=in_file(
        "scene file", _SCENE_FIX, cap=SCENE_FILE_CAP), help="Scene file (Python) to check."),
    prompt: str | None = typer.Option(None, "--prompt", parser=text(
        "the prompt", 2000, "pass the film's prompt as UTF-8 text"), help="The film prompt, for the "
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
    typer.echo(clean_line(f"{file}:{result.line}: {result.reason}"), err=True)
    raise typer.Exit(1)


def render(
    file: Path = typer.Argument(..., metavar="FILE", parser=in_file(
        "scene file", _SCENE_FIX, cap=SCENE_FILE_CAP), help="Scene file (Python) to render."),
    scene: str | None = typer.Option(None, "--scene", help="Scene class to render (default: "
                                     "every Scene class of the file, as manim -a)."),
    quality: str = typer.Option("l", "-q", "--quality", help="Manim quality: l (480p15), m, h, p or k (4K)."),
    timeout: float | None = typer.Option(None, "--timeout", metavar="SECONDS",
                                         parser=seconds("render timeout"),
                                         help="Seconds before the "
                                         "render is killed (default: M2M_RENDER_TIMEOUT)."),
    out: Path | None = typer.Option(None, "--out", metavar="DIR", parser=out_dir(
        "render dir", "pass another --out (a folder you can write)"),
        help="Render dir, any folder you can write "
                                    "(default: a fresh folder under the state dir)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress lines on stderr."),
    layout: bool = typer.Option(False, "--layout", help="Also run the film's layout check "
                                "(text off-frame, cut by a zoom, overlapping, crossed by a "
                                "drawing, too small, in the subtitle band, a caption left at the "
                                "end, a hard cut between two scenes of the file) and list its "
                                "findings."),
    strict: bool = typer.Option(False, "--strict", help="With --layout: exit 1 when there is "
                                "a finding."),
) -> None:
    """Render a file's scenes in the sandbox; print each output's path (an mp4, or
    `image: PATH` for a still scene), or one line saying what went wrong.

    While it runs, progress lines go to stderr (one per animation); stdout holds the result.
    With --layout, one line per layout finding follows (`layout: SCENE t=<seconds>s KIND <details>`)
    and a count; they exit 0 unless --strict.
    """
    from mythloop.mythos.sandbox.render import scene_names, syntax_problem, top_level_names
    from mythloop.vocab import QUALITIES

    code = _read(file)
    if strict and not layout:
        typer.echo("error: --strict judges the layout findings; pass --layout with it", err=True)
        raise typer.Exit(2)
    if quality not in QUALITIES:
        typer.echo(f"error: -q must be one of {', '.join(QUALITIES)}, not {quality!r}", err=True)
        raise typer.Exit(2)
    problem = syntax_problem(code)
    if problem:
        typer.echo(clean_line(f"error: {file} does not parse: {problem}; fix the scene code"),
                   err=True)
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

    names = [scene] if scene else scene_names(code)
    if layout and len(names) > 1:  # the probe records one scene per render
        results = []
        for name in names:  # one render each, into its own folder
            results.append((name, _render(file, name, quality, timeout,
                                          out / name if out else None, quiet, progress,
                                          layout=True)))
            if not results[-1][1].ok:
                break
    else:
        results = [(names[0] if len(names) == 1 else "",
                    _render(file, scene, quality, timeout, out, quiet, progress, layout))]
    failed = next((r for _, r in results if not r.ok), None)
    for _, result in results:
        for output in result.outputs if result.ok else ():
            typer.echo(clean_line(output.path if output.kind == "video"
                                  else f"image: {output.path}"))
    if failed is None:
        if layout:
            _print_findings(results, strict)
        return
    result = failed
    log = f" [log: {result.log_path}]" if result.log_path else ""
    typer.echo(clean_line(f"render failed ({result.kind}): {result.message}{log}"), err=True)
    raise typer.Exit(1)


def _render(file: Path, scene: str | None, quality: str, timeout: float | None,
            out: Path | None, quiet: bool, progress, layout: bool):
    from mythloop.mythos.sandbox.render import render_scene
    from mythloop_app.commands.runtime import resume_command, stop_signals

    try:  # SIGTERM is Ctrl-C: the sandboxed render and its sessions end with this command
        with stop_signals(resume_command()):
            return render_scene(file, scene=scene, quality=quality, timeout=timeout,
                                out_dir=out, progress=None if quiet else progress,
                                layout=layout)
    except OSError as exc:
        typer.echo(f"error: cannot use the render dir: {exc}", err=True)
        raise typer.Exit(2) from None


def _print_findings(results, strict: bool) -> None:
    """One line per layout finding (a hard cut between two scenes of the file, in file
    order, under the scene that ends), then the count; exit 1 with --strict when any."""
    from mythloop.mythos.sandbox.layout import scene_cuts
    from mythloop.mythos.sandbox.layout_record import read_record

    cuts: dict[str, list] = {}
    if len(results) > 1:
        records = [(name, read_record(Path(result.out_dir) / "media" / "layout.json")[0]
                    if result.out_dir else None) for name, result in results]
        for name, finding in scene_cuts(records):
            cuts.setdefault(name, []).append(finding)
    total = 0
    for name, result in results:
        findings = result.layout_findings
        if findings is None:
            typer.echo(f"layout: {name or 'scene'}: no layout record (the probe did not run)")
            continue
        findings = [*findings, *cuts.get(name, [])]
        for finding in findings:
            typer.echo(clean_line(f"layout: {name or 'scene'} {finding.line()}"))
        total += len(findings)
    typer.echo(f"layout: {total} finding(s)" + (
        "; mythloop.scenekit (CaptionLane, fit, zoom_to_fit, end_scene) keeps a scene clear"
        if total else ""))
    if total and strict:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add `verify` and `render` to the mythloop app."""
    app.command("verify")(verify)
    app.command("render")(render)
