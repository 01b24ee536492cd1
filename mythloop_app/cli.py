"""The `mythloop` command line (typer).

Each area of the project registers its own commands from
`mythloop_app/commands/<area>.py` (a `register(app)` function), so this file stays
small. Heavy imports (torch, Prefect, manim, pydantic_settings) happen inside the command
bodies, which keeps `mythloop --help` and the answers to bad input fast (under a second; see
bench/startup.py).
"""

from __future__ import annotations

import importlib

import typer

from mythloop_app.commands.runtime import prepare_state

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


# Commands that check their input first and prepare the state folder after (through
# `prepare_state`, which `flow_runtime` calls too): bad input is answered before the settings
# (pydantic_settings, ~0.2-0.5 s) are loaded, and leaves no `.mythloop` folder behind.
_CHECK_FIRST = frozenset({"sweep", "film", "serve", "verify"})


@app.callback()
def _main_callback(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand not in _CHECK_FIRST:
        prepare_state()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
