"""`mythloop compare A B` / `compare B --baseline last|DATE` and `mythloop history [-n N]`.

Both read files only (results dirs, <state>/history.jsonl): no Prefect server, no model.
Inputs are checked before the analysis (numpy, matplotlib) is imported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import typer

__all__ = ["register"]

_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _fail(message: str) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _check_dir(path: Path, name: str) -> Path:
    root = path.expanduser()
    if not root.is_dir():
        _fail(f"{name} {path}: no such folder (give a results dir written by `mythloop sweep`)")
    if not (root / "sweep.json").is_file():
        _fail(f"{name} {path}: no sweep.json there: not a sweep results dir")
    try:
        meta = json.loads((root / "sweep.json").read_text(encoding="utf-8"))
    except ValueError:
        _fail(f"{name} {path}: sweep.json is not valid JSON")
    if not isinstance(meta, dict):
        _fail(f"{name} {path}: sweep.json is not a JSON object")
    if meta.get("study") == "noise":  # mythloop.sweep.study.STUDY_KIND
        _fail(f"{name} {path} is a noise study: compare one of its noise-<level>/ folders")
    return root.resolve()


def compare_command(
    a: Path = typer.Argument(..., help="Results dir A (the before side), or the sweep to "
                             "check when --baseline is given."),
    b: Path | None = typer.Argument(None, help="Results dir B (the after side)."),
    baseline: str | None = typer.Option(
        None, "--baseline", help="Compare A against the history instead of a second dir: "
        "'last' (the latest comparable night) or a UTC date YYYY-MM-DD (that day's night)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    out: Path | None = typer.Option(None, "--out", help="Where to write compare.md (default: "
                                    "B's results dir, or A's with --baseline)."),
) -> None:
    """Compare two sweeps at their last round: per condition and headline metric, A, B and
    B - A with its 95% interval over replicates, and a verdict (better / worse / no clear
    change). Configuration differences come first; different prompt sets are refused."""
    if (b is None) == (baseline is None):
        _fail("give two results dirs (compare A B), or one and --baseline last|YYYY-MM-DD")
    if baseline is not None and baseline != "last" and not _DATE.match(baseline):
        _fail(f"--baseline {baseline!r}: use 'last' or a UTC date like 2026-01-31")
    first = _check_dir(a, "A")
    second = _check_dir(b, "B") if b is not None else None
    from mythloop.analysis.compare import (
        CompareError,
        compare,
        config_lines,
        render_markdown,
        side_from_dir,
        side_from_night,
        table_rows,
    )
    from mythloop.fileio import write_text_atomic

    try:
        if second is not None:
            side_a, side_b = side_from_dir(first), side_from_dir(second)
            target = second
        else:
            from mythloop.analysis.history import history_path, last_comparable, read_nights

            side_b = side_from_dir(first)
            target = first
            nights = read_nights()
            night = last_comparable(nights, side_b.series, exclude_dir=str(first),
                                    on_date=None if baseline == "last" else baseline)
            if night is None:
                when = "" if baseline == "last" else f" on {baseline}"
                _fail(f"no comparable night{when} in {history_path()} (same prompts, pool, "
                      "judge, noise, model, rounds and conditions); `mythloop history` lists "
                      "the nights")
            side_a = side_from_night(night)
        comparison = compare(side_a, side_b)
    except CompareError as exc:
        _fail(str(exc))
    md_path = (out or target / "compare.md").expanduser()
    write_text_atomic(md_path, render_markdown(comparison))
    if as_json:
        typer.echo(json.dumps({**comparison.as_dict(), "compare_md": str(md_path)}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"A: {side_a.label}", highlight=False, soft_wrap=True)
    console.print(f"B: {side_b.label}", highlight=False, soft_wrap=True)
    console.print("configuration differences:" if comparison.config_differences else
                  "configuration:", highlight=False)
    for line in config_lines(comparison):
        console.print(f"  {line}", highlight=False, soft_wrap=True, markup=False)
    rows = table_rows(comparison)
    table = Table(title=f"last round: B - A, mean [95% CI over replicates] "
                        f"({comparison.as_dict()['pairing']})")
    for column in rows[0] if rows else []:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row.values())
    console.print(table)
    worse = [f"{r['cond']} {r['label']}" for r in comparison.regressions]
    console.print(f"worse: {', '.join(worse) or 'nothing'}", highlight=False, soft_wrap=True)
    console.print(f"compare.md: {md_path}", highlight=False, soft_wrap=True)


def history_command(
    last: int = typer.Option(7, "-n", "--last", min=1, help="How many nights to show."),
    as_json: bool = typer.Option(False, "--json", help="Print the nights' rows as JSON."),
) -> None:
    """The last N finished sweeps (nights) from the state dir's history: per condition, each
    headline metric at the last round, mean [95% CI over replicates]."""
    from mythloop.analysis.history import history_path, read_nights

    path = history_path()
    nights = read_nights(path)[-last:]
    if as_json:
        typer.echo(json.dumps([{"night": n.night, "results_dir": n.results_dir,
                                "series": n.series, "rows": n.rows} for n in nights], indent=2))
        return
    if not nights:
        typer.echo(f"no nights yet in {path}: each finished sweep adds one")
        return
    from rich.console import Console
    from rich.table import Table

    from mythloop.analysis.compute import HEADLINE
    from mythloop.analysis.report import fmt

    table = Table(title=f"last {len(nights)} night(s), last round, mean [95% CI] ({path})")
    table.add_column("night (UTC)")
    table.add_column("series")
    table.add_column("cond")
    for _, label in HEADLINE:
        table.add_column(label, overflow="fold")
    for night in nights:
        by = {(r["cond"], r["metric"]): r for r in night.rows}
        for cond in sorted({r["cond"] for r in night.rows}):
            table.add_row(night.night[:16].replace("T", " "), night.series[:6], cond,
                          *[fmt(by.get((cond, key)), digits=2) for key, _ in HEADLINE])
    console = Console()
    console.print(table)
    for night in nights:
        console.print(f"{night.night[:16]}: {night.results_dir}", highlight=False,
                      soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `compare` and `history`."""
    app.command("compare")(compare_command)
    app.command("history")(history_command)
