"""The command groups' help: each command's first sentence whole, wrapped to the terminal."""

from __future__ import annotations

from typer.core import TyperGroup

__all__ = ["HelpGroup"]


class HelpGroup(TyperGroup):
    """A group whose command list says each command's first sentence whole, wrapped by the
    help formatter to the terminal's width, instead of cutting it with "..." where the
    column ends (click's default)."""

    def format_commands(self, ctx, formatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(limit=10_000)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
