"""The `mythloop` command line (typer).

Each area of the project registers its own commands from
`mythloop_app/commands/<area>.py` (a `register(app)` function), so this file stays
small. Heavy imports (torch, Prefect, manim) happen inside the command bodies,
which keeps `mythloop --help` fast.
"""

from __future__ import annotations

import importlib

import typer

from mythloop.state import prepare_environment

app = typer.Typer(
    name="mythloop",
    help=(
        "Run LLM-agent experiments and films as observable, retriable Prefect workflows.\n\n"
        "Sweeps measure whether a skill router learns from model verdicts (C0 blend off vs "
        "C3 blend on); films turn a prompt into a rendered Manim animation through six "
        "reasoning stages, codegen, verify, render and repair."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Order here is the order in `mythloop --help`.
_COMMAND_MODULES = (
    "sweep",
    "analysis",
    "compare",
    "router",
    "film",
    "verify",
    "server",
    "doctor",
)

for _name in _COMMAND_MODULES:
    importlib.import_module(f"mythloop_app.commands.{_name}").register(app)


@app.callback()
def _main_callback() -> None:
    prepare_environment()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
