"""`mythloop route` and `mythloop tags`: rank skills for a query; parse skill-used tags."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import typer

from mythloop_app.params import in_dir, in_file, shown, sqlite_store, text

__all__ = ["register"]


def _fail(message: str) -> NoReturn:
    """One clear error line, exit code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


MAX_QUERY_CHARS = 2000
"""The longest query `route` ranks for: a film's prompt has the same cap (FilmRequest)."""
_QUERY_FIX = "pass the task text itself (UTF-8 text, not a document)"


def route(
    query: str = typer.Argument(..., metavar="QUERY", parser=text("the query", MAX_QUERY_CHARS, _QUERY_FIX),
                                help="The task text to rank skills for."),
    pool: Path | None = typer.Option(None, "--pool", metavar="DIR", parser=in_dir(
        "skill pool", "pass a folder of <name>/SKILL.md (or leave --pool out)"),
        help="Skill pool folder (default: fixtures/pool)."),
    store: Path | None = typer.Option(None, "--store", metavar="FILE",
                                      parser=sqlite_store(must_exist=False),
                                      help="Verdict store SQLite file (default: settings)."),
    top_k: int = typer.Option(10, "--top-k", min=1, help="How many skills to show."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON with the score breakdowns."),
    no_blend: bool = typer.Option(False, "--no-blend", help="Pure semantic similarity (condition C0)."),
    model: str | None = typer.Option(
        None, "--model", help="Rank with this saved tuned model (an id from `mythloop models`, "
                              "or `base` for the bundled one). Default: the promoted model, "
                              "else the base."),
) -> None:
    """Rank the pool's skills for QUERY, with the verdict-blended score breakdown."""
    if not query.strip():
        _fail("the query is empty: pass the task text to rank skills for, e.g. "
              "mythloop route \"my regex hangs on long input\"")
    from mythloop.data import data_path
    from mythloop.router import Router, get_embedder
    from mythloop.router.models import ModelStore
    from mythloop.settings import get_settings
    from mythloop.skills import load_catalog
    from mythloop.verdicts import VerdictStore

    settings = get_settings()
    models = ModelStore(settings.models_dir)
    model_path = None  # the settings' model (the bundled one by default)
    if model is not None and model.strip().lower() != "base":
        info = models.get(model)
        if info is None:
            _fail(f"--model {model}: no such model in {models.root}; `mythloop models` lists "
                  "them (or pass --model base)")
        model_path = str(info.path)
    elif model is None and models.current() is not None:
        model_path = str(models.current().path)  # type: ignore[union-attr]
    try:
        catalog = load_catalog(pool or data_path("fixtures", "pool"))
    except FileNotFoundError as exc:
        _fail(str(exc))
    for issue in catalog.issues:
        typer.echo(f"catalog: {issue.path}: {issue.reason}", err=True)
    for warning in catalog.warnings:
        typer.echo(f"catalog warning: {warning.path}: {warning.reason}", err=True)
    if not catalog.skills:
        _fail(f"no valid skills in {pool or 'fixtures/pool'}; fix the issues above or pass --pool")
    try:
        verdicts = VerdictStore(store or settings.resolved_store_path, settings.resolved_verdict_embeddings)
        embedder = get_embedder(model_path)
        router = Router(catalog, verdicts, embedder, settings, blend=False if no_blend else None)
        ranked = router.rank(query, top_k)
    except (OSError, RuntimeError) as exc:
        _fail(str(exc))
    if as_json:
        payload = {"query": query, "blend": router.blend, "model_id": embedder.model_id,
                   "store": str(verdicts.path), "skills": len(catalog.skills),
                   "catalog_issues": len(catalog.issues), "ranked": [r.to_dict() for r in ranked]}
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    _print_table(query, ranked, router.blend, embedder.model_id)


def _print_table(query: str, ranked, blend: bool, model_id: str) -> None:
    """A table of the ranking that fits the terminal (80 columns when output is piped):
    the score and its main parts always; the finer breakdown (`--json` has it all) only
    where the width allows. The title names the query, the blend and the model used."""
    import shutil

    from rich import box
    from rich.console import Console
    from rich.table import Table

    width = shutil.get_terminal_size((80, 24)).columns
    console = Console(width=width, soft_wrap=False)
    columns = [("#", "right"), ("skill", "left"), ("final", "right"), ("sem", "right"),
               ("help", "right"), ("harm", "right"), ("status", "left")]
    wide = [("count", "right"), ("rel+", "right"), ("rel-", "right"), ("mult", "right"),
            ("tier", "left"), ("h/x/streak", "right")]
    longest = max((len(r.name) for r in ranked), default=5)
    needed = sum(len(name) + 2 for name, _ in columns) + max(0, longest - 5) + 8
    extra = [col for col in wide if (needed := needed + len(col[0]) + 2) <= width]
    table = Table(title=f"{shown(query)[:200]}", caption=f"blend {'on' if blend else 'off'}; "
                  f"model: {model_id}", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True, title_justify="left", caption_justify="left")
    for name, side in [*columns, *extra]:
        table.add_column(name, justify="right" if side == "right" else "left",
                         overflow="fold", no_wrap=name != "skill")
    for r in ranked:
        b = r.breakdown
        cells = {"#": str(r.rank), "skill": r.name, "final": f"{r.score:.3f}",
                 "sem": f"{b['semantic']:.3f}", "help": f"{b['help_match']:.3f}",
                 "harm": f"{b['harm_match']:.3f}", "status": r.status,
                 "count": f"{b['count_bonus']:+.3f}", "rel+": f"{b['related_helpful']:.3f}",
                 "rel-": f"{b['related_harmful']:.3f}", "mult": f"{b['status_mult']:.1f}",
                 "tier": r.tier or "-", "h/x/streak": f"{r.helpful}/{r.harmful}/{r.streak}"}
        table.add_row(*(cells[name] for name, _ in [*columns, *extra]))
    console.print(table)


_TEXT_FIX = "pass the text a model wrote (a file, or - for stdin)"


def tags(source: Path = typer.Argument(..., metavar="FILE|-", parser=in_file(
        "model text file", _TEXT_FIX, stdin=True),
        help="File of model text, or - for stdin.")) -> None:
    """Print the skill-used tags found in model text as JSON [{name, verdict, reason}].

    A tag whose verdict is not HELPFUL, HARMFUL or NEUTRAL is refused (exit 2), as the
    verdict store would refuse it."""
    from mythloop.verdicts import VERDICTS, scan_tags

    if str(source) == "-":
        text_read = sys.stdin.read()
    else:
        try:
            data = source.read_bytes()
        except OSError as exc:
            _fail(f"cannot read {shown(source)}: {exc.strerror or exc}; pass a readable file "
                  "or - for stdin")
        if b"\x00" in data[:65536]:  # model text never holds NUL bytes; binaries do
            _fail(f"{shown(source)} is a binary file, not model text; {_TEXT_FIX}")
        text_read = data.decode("utf-8", errors="replace")
    found, malformed = scan_tags(text_read)
    bad = [tag for tag in found if tag["verdict"] not in VERDICTS]
    if bad:
        first = bad[0]
        said = repr(first["verdict"].lower()) if first["verdict"] else "none"
        _fail(f"tag {first['name']!r} has verdict {said}, not one of "
              f"{', '.join(VERDICTS)} ({len(bad)} such tag(s) in {shown(source)}): fix the "
              "text's verdicts")
    if malformed:
        typer.echo(f"tags: {malformed} malformed skill-used fragment(s) skipped", err=True)
    typer.echo(json.dumps(found, indent=2, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    """Add `route` and `tags` to the CLI."""
    app.command("route")(route)
    app.command("tags")(tags)
