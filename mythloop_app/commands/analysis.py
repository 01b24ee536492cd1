"""`mythloop analyze RESULTS_DIR`: recompute metrics, report and figures from a results dir."""

from __future__ import annotations

from pathlib import Path

import typer

from mythloop_app.params import Refused, in_dir, shown

__all__ = ["register"]


_RESULTS_FIX = "pass a results dir written by `mythloop sweep` (its --results-dir)"


def sweep_dir(value: str) -> Path:
    """A results dir a sweep wrote: an existing folder holding sweep.json (checked before
    the analysis, numpy and matplotlib, is imported)."""
    path = in_dir("results dir", _RESULTS_FIX)(value)
    if not (path / "sweep.json").is_file():
        raise Refused(f"results dir {shown(value)} holds no sweep.json: it is not a sweep's "
                      "results", _RESULTS_FIX)
    return path


def analyze_command(
    results_dir: Path = typer.Argument(..., metavar="RESULTS_DIR", parser=lambda value: sweep_dir(
        value), help="A results dir written by `mythloop sweep`."),
    abstain_threshold: float | None = typer.Option(
        None,
        "--abstain-threshold",
        help="Null-prompt abstention threshold (default: the sweep's, else the setting).",
    ),
) -> None:
    """Recompute metrics.json, report.md and the four figures from the files alone."""
    if abstain_threshold is not None and not 0.0 <= abstain_threshold <= 1.0:
        # Checked before the analysis (numpy, matplotlib) is imported: a quick, clear refusal.
        typer.echo(f"error: --abstain-threshold {abstain_threshold:g} is out of range: it is a "
                   "top-score (cosine similarity) cut-off between 0 and 1, e.g. 0.45", err=True)
        raise typer.Exit(2)
    import json

    from rich.console import Console
    from rich.table import Table

    from mythloop.analysis import AnalysisError, analyze
    from mythloop.analysis.report import console_rows

    console = Console()
    errors = Console(stderr=True)
    from mythloop.sweep.study import read_study

    if read_study(results_dir) is not None:  # a noise study: every level, then the study
        _analyze_study(results_dir, console)
        return
    try:
        result = analyze(results_dir, abstain_threshold=abstain_threshold)
    except AnalysisError as exc:
        errors.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from exc
    if result.simulated:
        console.print(
            "[bold yellow]SIMULATED JUDGE[/bold yellow]: verdicts are synthetic, not a model's."
        )
    metrics = json.loads(result.metrics_path.read_text(encoding="utf-8"))
    rows = console_rows(metrics)
    if rows:
        table = Table(title="headline: first -> last round (rounds from 1), mean [95% interval, "
                            "prompts x replicates]")
        for column in rows[0]:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*row.values())
        console.print(table)
    issues = metrics.get("data_issues") or []
    if issues:
        console.print(f"[bold yellow]data issues[/bold yellow]: {len(issues)} (the rows "
                      "concerned were left out; also in the report's Data issues)",
                      soft_wrap=True)
        for issue in issues:
            where = f"{issue['file']}:{issue['line']}" if issue.get("line") else issue["file"]
            console.print(f"  {where}: {issue['problem']}", highlight=False, soft_wrap=True,
                          markup=False)
    console.print(f"report: {result.report_path}", highlight=False, soft_wrap=True)
    console.print(f"metrics: {result.metrics_path}", highlight=False, soft_wrap=True)


def _analyze_study(root: Path, console) -> None:
    from rich.console import Console
    from rich.table import Table

    from mythloop.analysis import AnalysisError
    from mythloop.analysis.study import analyze_study

    try:
        result = analyze_study(root)
    except AnalysisError as exc:
        Console(stderr=True).print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from exc
    if result.simulated:
        console.print(
            "[bold yellow]SIMULATED JUDGE[/bold yellow]: verdicts are synthetic, not a model's."
        )
    if result.table_rows:
        table = Table(title="noise study: last round, mean [95% CI, prompts x replicates]")
        for column in result.table_rows[0]:
            table.add_column(column, overflow="fold")
        for row in result.table_rows:
            table.add_row(*row.values())
        console.print(table)
    console.print(f"report: {result.report_path}", highlight=False, soft_wrap=True)
    console.print(f"noise curve: {result.figure}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the `analyze` command."""
    app.command("analyze")(analyze_command)
