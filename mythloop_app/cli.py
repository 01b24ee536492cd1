"""The `mythloop` command line (typer).

Each area of the project registers its own commands from
`mythloop_app/commands/<area>.py` (a `register(app)` function), so this file stays
small. Heavy imports (torch, Prefect, manim, pydantic_settings) happen inside the command
bodies, which keeps `mythloop --help` and the answers to bad input fast (under a second; see
bench/bad_input.py). What each option may hold is checked while the command line is parsed
(`mythloop_app/params.py`), before a command body runs.
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import sys
from pathlib import Path

import typer

from mythloop_app.commands.runtime import prepare_state
from mythloop_app.groups import HelpGroup
from mythloop_app.params import Refused


class _Group(HelpGroup):
    """The `mythloop` command group.

    - Usage errors (a value out of range, an unknown option, a value the validation layer
      `mythloop_app.params` refused, a stray word) are answered by `usage_error_line` in one
      line on stderr, exit 2, instead of click's multi-line block; in-process runners
      (typer's CliRunner) get the same answer as the installed command.
    - The state folder is prepared after a command's options are parsed and checked, so a
      refused command line writes nothing (`_prepare_after_parsing`); a command that fails
      leaves no state folder it created and left empty (`_tidy_state`).
    - `mythloop --help` lists each command's first sentence whole (`HelpGroup`).
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        state = Path(os.environ.get("MYTHLOOP_STATE_DIR") or ".mythloop").expanduser()
        existed = state.exists()
        try:
            code = super().main(args, prog_name or "mythloop", complete_var,
                                standalone_mode=False, **extra)
        except typer.TyperException as exc:  # typer's click: every usage error
            if type(exc).__name__ == "NoArgsIsHelpError":  # `mythloop` alone: the help
                exc.show()  # type: ignore[attr-defined]
                code = getattr(exc, "exit_code", 2)
            else:
                typer.echo(f"error: {usage_error_line(exc)}", err=True)
                code = 2
        except typer.Abort:
            typer.echo("aborted", err=True)
            code = 1
        code = code if isinstance(code, int) else 0
        if code and not existed:
            _tidy_state(state)
        sys.exit(code)

    def get_command(self, ctx, cmd_name: str):
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None and cmd_name not in _CHECK_FIRST:
            _prepare_after_parsing(cmd)
        return cmd


app = typer.Typer(
    cls=_Group,
    context_settings={"max_content_width": 120},  # the terminal's width, up to 120
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
    rich_markup_mode=None,
)

# Order here is the order in `mythloop --help`.
_COMMAND_MODULES = (
    "sweep",
    "analysis",
    "compare",
    "router",
    "models",
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


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            number = version("mythloop")
        except PackageNotFoundError:
            number = "unknown (not installed)"
        typer.echo(f"mythloop {number}")
        raise typer.Exit(0)


@app.callback()
def _main_callback(
    show_version: bool = typer.Option(False, "--version", is_eager=True, callback=_version,
                                      help="Print mythloop's version and exit."),
) -> None:
    """(The state folder is prepared by `_prepare_after_parsing`.)"""


def _prepare_after_parsing(cmd) -> None:
    """Run `prepare_state` when `cmd` is invoked, that is after its command line was parsed
    and every value passed the validation layer (once per command object)."""
    if getattr(cmd, "_mythloop_prepares", False):
        return
    invoke = cmd.invoke

    def invoke_prepared(ctx):
        prepare_state()
        return invoke(ctx)

    cmd.invoke = invoke_prepared
    cmd._mythloop_prepares = True


def main() -> None:
    """Run the CLI (usage errors: one line, exit 2; see `_Group`)."""
    app(prog_name="mythloop")


def usage_error_line(exc: Exception) -> str:
    """A usage error in one line of plain words: "--rounds must be at least 1 (got 0); see
    `mythloop sweep --help`". A value typer's own check refused (a range, a number) is said
    by the words of mythloop.checks (`phrase`), which the models' own checks use too."""
    ctx = getattr(exc, "ctx", None)
    hint = f"; see `{ctx.command_path if ctx is not None else 'mythloop'} --help`"
    param = getattr(exc, "param", None)
    errors = getattr(exc.__cause__, "errors", None)
    if isinstance(exc, typer.BadParameter) and param is not None and callable(errors):
        opts = [o for o in getattr(param, "opts", []) if o.startswith("-")]
        label = "/".join(opts) if opts else str(getattr(param, "metavar", None) or getattr(
            param, "name", "") or "value").strip("[]").upper()
        refused = _refused(errors())
        if refused is not None:  # the validation layer's own words (mythloop_app.params)
            return f"{refused.what} ({label}): {refused.fix}"
        if errors():
            from mythloop.checks import phrase  # noqa: PLC0415 (only on a usage error)

            error = dict(errors()[0])
            got = error.get("input")
            if isinstance(got, str):  # what was typed: 0, abc (not '0')
                error["input"] = _number(got)
            return f"{label} {phrase(error)}{hint}"
    message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
    stray = _STRAY.match(message)
    if stray:  # a word no option asked for: it would otherwise change the experiment
        from mythloop_app.params import shown  # noqa: PLC0415

        words = stray.group(1)
        command = ctx.command_path if ctx is not None else "mythloop"
        return (f"unexpected word(s) {shown(words)!r} ({command}): put each value after its "
                f"option (only options whose help says so take several); see `{command} "
                "--help`")
    return " ".join(message.split()).rstrip(".") + hint


_STRAY = re.compile(r"^Got unexpected extra argument(?:s|\(s\))? \((.*)\)$", re.DOTALL)


def _refused(errors: list) -> Refused | None:
    """The `Refused` a parser of mythloop_app.params raised, when pydantic carries one."""
    for error in errors:
        found = (error.get("ctx") or {}).get("error")
        if isinstance(found, Refused):
            return found
    return None


def _number(text: str) -> object:
    """What the user typed, as a number when it is one (nan included), else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _tidy_state(state: Path) -> None:
    """Remove the state folder this failed command created, when it holds no file (the
    error paths of route, render, tags, ... prepare it before they refuse their input)."""
    if state.is_dir() and not any(p.is_file() or p.is_symlink() for p in state.rglob("*")):
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
