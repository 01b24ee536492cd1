"""`mythloop compare A B` / `compare B --baseline last|DATE` and `mythloop history [-n N]`.

Both read files only (results dirs, <state>/history.jsonl): no Prefect server, no model.
Inputs are checked before the analysis (numpy, matplotlib) is imported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import typer

from mythloop_app.commands.analysis import sweep_dir
from mythloop_app.params import baseline as baseline_value
from mythloop_app.params import out_file, shown

__all__ = ["register"]



def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(2)


def _check_dir(path: Path, name: str) -> Path:
    root = path.expanduser()
    if not root.is_dir():
        _fail(f"{name} {shown(path)}: no such folder (give a results dir written by "
              "`mythloop sweep`)")
    if not (root / "sweep.json").is_file():
        _fail(f"{name} {shown(path)}: no sweep.json there: not a sweep results dir")
    from mythloop.sweep.records import SweepRecordError, read_sweep_record

    try:
        meta = read_sweep_record(root)
    except SweepRecordError as exc:
        _fail(f"{name} {shown(path)}: {exc}")
    if meta.is_study:
        _fail(f"{name} {shown(path)} is a noise study: compare one of its noise-<level>/ folders")
    return root.resolve()


def compare_command(
    a: Path = typer.Argument(..., metavar="A", parser=lambda value: sweep_dir(value),
                             help="Results dir A (the before side), or the sweep to "
                             "check when --baseline is given."),
    b: Path | None = typer.Argument(None, metavar="[B]", parser=lambda value: sweep_dir(value),
                                    help="Results dir B (the after side)."),
    baseline: str | None = typer.Option(
        None, "--baseline", metavar="last|YYYY-MM-DD", parser=baseline_value, help="Compare A against the history instead of a second dir: "
        "'last' (the latest comparable night) or a UTC date YYYY-MM-DD (that day's night)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    out: Path | None = typer.Option(None, "--out", metavar="FILE", parser=out_file(
        "output file", "pass another --out (a file in a folder you can write)"), help="Where to write compare.md (default: "
                                    "B's results dir, or A's with --baseline)."),
) -> None:
    """Compare two sweeps at their last round: per condition and headline metric, A, B and
    B - A with its 95% interval (the prompt as the unit, paired by prompt), and a verdict (better / worse / no clear
    change). Configuration differences come first; different prompt sets are refused."""
    if (b is None) == (baseline is None):
        _fail("give two results dirs (compare A B), or one and --baseline last|YYYY-MM-DD")
    first = _check_dir(a, "A")
    second = _check_dir(b, "B") if b is not None else None
    from mythloop.analysis.compare import (
        CompareError,
        compare,
        config_lines,
        render_markdown,
        side_from_dir,
        side_from_night,
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
            if night is None and not [n for n in nights if n.results_dir != str(first)]:
                _fail(f"nothing to compare {shown(a)} with yet (--baseline {baseline}): "
                      f"{shown(history_path())} holds no other sweep; each finished sweep "
                      "adds a night, so rerun the sweep later (or pass two results dirs: "
                      "compare A B)")
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
    from rich import box

    from mythloop.analysis.report import fmt

    table = Table(title=f"last round: B - A, mean [95% CI, prompts x replicates], "
                        f"{comparison.as_dict()['pairing']}",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column in ("cond", "metric", "A", "B", "B - A [95% CI]", "verdict"):
        table.add_column(column, no_wrap=column != "verdict",
                         justify="right" if column in ("A", "B") else "left")
    def mean(s):
        return "—" if s is None else f"{s['mean']:.2f}"

    for row in comparison.rows:
        table.add_row(row["cond"], _SHORT.get(row["metric"], row["metric"]), mean(row["a"]),
                      mean(row["b"]), fmt(row["difference"], digits=3, sign=True)
                      .replace(" n too small", ""), row["verdict"])
    console.print(table)
    console.print(_LEGEND + "; notes and intervals of A and B: compare.md or --json",
                  highlight=False, soft_wrap=True)
    worse = [f"{r['cond']} {r['label']}" for r in comparison.regressions]
    console.print(f"worse: {', '.join(worse) or 'nothing'}", highlight=False, soft_wrap=True)
    console.print(f"compare.md: {md_path}", highlight=False, soft_wrap=True)


_SHORT = {"in_distribution.hit@1": "h@1", "in_distribution.hit@3": "h@3",
          "in_distribution.hit@5": "h@5", "in_distribution.mrr": "mrr",
          "trap.trap_win_rate": "trap", "trap.gap_all": "gap",
          "catalog.in_distribution.poisoned_rate": "pois", "heldout.hit@3": "ho@3",
          "null.abstention_rate": "null"}
_LEGEND = ("h@k: hit@k in-distribution; mrr; trap: trap-win rate; gap: score gap gold - "
           "poisoned; pois: poisoned skill in top-5 catalog; ho@3: held-out hit@3; null: "
           "null-prompt abstention")


def history_command(
    last: int = typer.Option(7, "-n", "--last", min=1, help="How many nights to show."),
    metric: str | None = typer.Option(
        None, "--metric", help="One headline metric with its 95% interval per night (e.g. "
        "trap.gap_all); default: every headline metric's mean."),
    as_json: bool = typer.Option(False, "--json", help="Print the nights' rows as JSON."),
) -> None:
    """The last N finished sweeps (nights) from the state dir's history: per condition, the
    headline metrics at the last round (the trend plot is history.png in each results dir)."""
    if metric is not None and metric not in _SHORT:
        _fail(f"--metric {metric!r}: one of {', '.join(_SHORT)}")
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

    from mythloop.analysis.report import fmt

    keys = [metric] if metric else list(_SHORT)
    what = f"{metric}, mean [95% CI]" if metric else "mean"
    from rich import box

    table = Table(title=f"last {len(nights)} night(s): last round, {what} over prompts x replicates",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for column in ("UTC", "cond"):
        table.add_column(column, no_wrap=True)
    for key in keys:
        table.add_column(key if metric else _SHORT[key], no_wrap=True, justify="right")
    for night in nights:
        by = {(r["cond"], r["metric"]): r for r in night.rows}
        for cond in sorted({r["cond"] for r in night.rows}):
            cells = [by.get((cond, key)) for key in keys]
            table.add_row(night.night[5:16].replace("T", " "), cond,
                          *[fmt(c, digits=2) if metric else
                            ("—" if c is None else f"{c['mean']:.2f}") for c in cells])
    console = Console()
    console.print(table)
    if not metric:
        console.print(_LEGEND, highlight=False, soft_wrap=True)
    for night in nights:
        console.print(f"{night.night[:16]}: {night.results_dir} (series {night.series[:6]})",
                      highlight=False, soft_wrap=True)
    console.print(f"history: {path}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add `compare` and `history`."""
    app.command("compare")(compare_command)
    app.command("history")(history_command)
