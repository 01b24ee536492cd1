"""`mythloop route` and `mythloop tags`: rank skills for a query; parse skill-used tags."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

import typer

__all__ = ["register"]


def _fail(message: str) -> NoReturn:
    """One clear error line, exit code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


MAX_QUERY_CHARS = 2000
"""The longest query `route` ranks for: a film's prompt has the same cap (FilmRequest)."""


def route(
    query: str = typer.Argument(..., help="The task text to rank skills for."),
    pool: Path | None = typer.Option(None, "--pool", help="Skill pool folder (default: fixtures/pool)."),
    store: Path | None = typer.Option(None, "--store", help="Verdict store SQLite file (default: settings)."),
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
    if len(query) > MAX_QUERY_CHARS:  # as a film's prompt
        _fail(f"the query is {len(query):,} characters long, over the {MAX_QUERY_CHARS:,} a "
              "query may have; pass the task text itself, not a document")
    if store is not None:
        if store.is_dir():
            _fail(f"--store {store} is a folder: pass the SQLite file to use, e.g. {store}/verdicts.db")
        if not store.expanduser().resolve().parent.is_dir():
            _fail(f"--store {store}: folder {store.expanduser().resolve().parent} does not exist; "
                  "create it first or pass a file in an existing folder")
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
    _print_table(query, ranked, router.blend)


def _print_table(query: str, ranked, blend: bool) -> None:
    """A rich table of the ranking."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{query}  (blend {'on' if blend else 'off'})")
    for col in ("#", "skill", "tier", "final", "sem", "count", "help", "harm", "rel+", "rel-",
                "mult", "status", "h/x/streak"):
        table.add_column(col, justify="left" if col in ("skill", "tier", "status") else "right")
    for r in ranked:
        b = r.breakdown
        table.add_row(
            str(r.rank), r.name, r.tier or "-", f"{r.score:.3f}", f"{b['semantic']:.3f}",
            f"{b['count_bonus']:+.3f}", f"{b['help_match']:.3f}", f"{b['harm_match']:.3f}",
            f"{b['related_helpful']:.3f}", f"{b['related_harmful']:.3f}", f"{b['status_mult']:.1f}",
            r.status, f"{r.helpful}/{r.harmful}/{r.streak}",
        )
    console = Console()
    if not console.is_terminal:  # piped output: do not squeeze the table to 80 columns
        console = Console(width=170)
    console.print(table)


def tags(source: str = typer.Argument(..., help="File of model text, or - for stdin.")) -> None:
    """Print the skill-used tags found in model text as JSON [{name, verdict, reason}]."""
    from mythloop.verdicts import scan_tags

    if source == "-":
        text = sys.stdin.read()
    else:
        try:
            data = Path(source).read_bytes()
        except OSError as exc:
            _fail(f"cannot read {source}: {exc.strerror or exc}; pass a readable file or - for stdin")
        if b"\x00" in data[:65536]:  # model text never holds NUL bytes; binaries do
            _fail(f"{source} is a binary file, not model text; pass the text a model wrote "
                  "(a file or - for stdin)")
        text = data.decode("utf-8", errors="replace")
    found, malformed = scan_tags(text)
    if malformed:
        typer.echo(f"tags: {malformed} malformed skill-used fragment(s) skipped", err=True)
    typer.echo(json.dumps(found, indent=2, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    """Add `route` and `tags` to the CLI."""
    app.command("route")(route)
    app.command("tags")(tags)
