"""`mythloop models`: the tuned embedding models in the state folder (list, remove)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import typer

from mythloop_app.groups import HelpGroup
from mythloop_app.params import in_dir, in_file, sqlite_store

__all__ = ["register"]

models_app = typer.Typer(
    help="Tuned embedding models (C5's and promoted ones): list them, remove old ones.",
    cls=HelpGroup, no_args_is_help=False, add_completion=False, rich_markup_mode=None)


def _fail(message: str) -> NoReturn:
    """One clear error line, exit code 2."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _store():
    from mythloop.router.models import ModelStore
    from mythloop.settings import get_settings

    return ModelStore(get_settings().models_dir)


def _size_mb(path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def _made_by(lineage: dict) -> str:
    if lineage.get("source") == "sweep":
        made_for = lineage.get("round")  # the round index, from 0 as the round files
        shown = made_for + 1 if isinstance(made_for, int) else "?"  # numbered as the sweep says
        return (f"sweep {lineage.get('sweep_id')} {lineage.get('condition')}-rep"
                f"{lineage.get('replicate')} round {shown}")
    return str(lineage.get("source") or "-")


@models_app.callback(invoke_without_command=True)
def models(ctx: typer.Context,
           as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List the saved models, oldest first (the promoted one marked *)."""
    if ctx.invoked_subcommand is not None:
        return
    store = _store()
    found = store.saved()
    current = store.current_id()
    if as_json:
        typer.echo(json.dumps({"models_dir": str(store.root), "current": current,
                               "models": [m.summary() for m in found]}, indent=2))
        return
    if not found:
        typer.echo(f"no tuned models in {store.root} (a sweep with --conditions c5, or "
                   "`mythloop models promote`, makes them)")
        return
    for m in found:
        mark = "*" if m.id == current else " "
        typer.echo(f"{mark} {m.id}  {m.lineage.get('created_utc', '?')}  "
                   f"{m.lineage.get('pairs', '?')} pairs  {_size_mb(m.path):.0f} MB  "
                   f"{_made_by(m.lineage)}")
    typer.echo(f"{len(found)} model(s) in {store.root}"
               + (f"; promoted: {current}" if current else "; none promoted (base model)"))


@models_app.command("remove")
def remove(model_ids: list[str] = typer.Argument(..., metavar="IDS",
                                                 help="Model ids (or unique prefixes).")) -> None:
    """Delete saved models (never the promoted one)."""
    store = _store()
    for model_id in model_ids:  # every id checked before anything is removed
        info = store.get(model_id)
        if info is None:
            _fail(f"no model {model_id!r} in {store.root}; `mythloop models` lists them")
        if info.id == store.current_id():
            _fail(f"{info.id} is the promoted model; promote another before removing it")
    for model_id in model_ids:
        info = store.remove(model_id)
        typer.echo(f"removed {info.id}")


@models_app.command("promote")
def promote(
    store: Path = typer.Option(..., "--store", metavar="FILE",
                               parser=sqlite_store(must_exist=True),
                               help="Verdict store (SQLite) to train from."),
    held_out: Path = typer.Option(..., "--held-out", metavar="FILE", parser=in_file(
        "held-out prompts file", "pass labelled prompts (JSON rows or YAML) to --held-out"),
        help="Labelled prompts to evaluate on (JSON rows or YAML)."),
    pool: Path | None = typer.Option(None, "--pool", metavar="DIR", parser=in_dir(
        "skill pool", "pass a folder of <name>/SKILL.md (or leave --pool out)"),
        help="Skill pool (default: fixtures)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs."),
) -> None:
    """Train a candidate from every trusted verdict in STORE, and promote it only when its
    held-out hit@1 and hit@5 are not worse than the current model's (paired by prompt) and the
    fixture traps hold. Exit 0 either way; the decision is printed and kept as an artifact."""
    from mythloop.data import data_path
    from mythloop.promotion import load_eval_prompts
    from mythloop.skills import load_catalog

    pool = pool or data_path("fixtures", "pool")
    try:
        prompts = load_eval_prompts(held_out)
        catalog = load_catalog(pool)
    except (OSError, ValueError) as exc:
        _fail(" ".join(str(exc).split()))
    if not catalog.skills:
        _fail(f"no valid skills in {pool}; pass --pool")
    unknown = sorted({str(p.expected_skill) for p in prompts} - set(catalog.names()))
    if unknown:
        _fail(f"--held-out {held_out} expects skills not in the pool: {', '.join(unknown[:5])}")
    from mythloop_app.commands.runtime import flow_runtime

    with flow_runtime(verbose=verbose):
        from mythloop_flows.promote_model import promote_model

        try:
            decision = promote_model(str(store.resolve()), str(held_out.resolve()),
                                     str(Path(pool).resolve()))
        except ValueError as exc:
            _fail(" ".join(str(exc).split()))
    cand, cur = decision["candidate"], decision["current"]
    typer.echo(f"candidate {cand['model_id']}: hit@1 {cand['hit@1']:.3f}, hit@5 "
               f"{cand['hit@5']:.3f} (current {cur['model_id']}: {cur['hit@1']:.3f}, "
               f"{cur['hit@5']:.3f})")
    typer.echo(("promoted: " if decision["promote"] else "not promoted (kept): ")
               + "; ".join(decision["reasons"]))


def register(app: typer.Typer) -> None:
    """Add `models` to the CLI."""
    app.add_typer(models_app, name="models")
