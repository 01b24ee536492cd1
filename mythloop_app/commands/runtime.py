"""How CLI commands run flows: quiet console, heartbeats, the server, Ctrl-C, and the UI."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

__all__ = ["flow_runtime", "ui_hint", "resume_command"]

_TEMPORARY_APIS: set[str] = set()  # API URLs of the temporary servers this process ran


@contextlib.contextmanager
def flow_runtime(*, verbose: bool = False, resume: str | None = None,
                 stopped: str | None = None) -> Iterator[None]:
    """Run flows from the CLI.

    - Prefect's per-task console lines are hidden unless --verbose (the flows print one
      line per round or stage; every log still reaches the Prefect API and UI).
    - Without PREFECT_API_URL, a running `mythloop server` of this state folder is used
      (its `server.json`), so runs stay browsable in its UI.
    - Otherwise a temporary Prefect server runs for this command (`tempserver.py`), on the
      same database as `mythloop server`; flow heartbeats (crash detection for long-lived
      servers) are turned off there, as each flow would otherwise wait ~1 s at exit for
      its heartbeat thread. It is drained, then stopped when the block ends.
    - Ctrl-C: the flow engine reports the runs under way as Crashed; then this prints one
      line (`interrupted; rerun the same command to resume: <resume>`), ends the command's
      child processes, lets the server record the crash and stops it, and exits with 130.
      A second Ctrl-C stops everything at once. For a command that runs until Ctrl-C
      (`serve`), `stopped` is the line printed instead, and the exit code is 0.
    """
    from mythloop_app.discovery import local_server_url

    if not os.environ.get("PREFECT_API_URL"):
        local = local_server_url()
        if local:  # set before Prefect reads its settings; child processes inherit it
            os.environ["PREFECT_API_URL"] = local

    if not verbose:
        for handler in ("CONSOLE", "CONSOLE_FLOW_RUNS", "CONSOLE_TASK_RUNS"):
            os.environ.setdefault(f"PREFECT_LOGGING_HANDLERS_{handler}_LEVEL", "WARNING")

    import typer

    state = {"server": None, "interrupted": False}

    def hard_stop(signum, frame):  # a second Ctrl-C: no more waiting
        from mythloop.procs import kill_descendants

        if state["server"] is not None:
            state["server"].stop(grace=0.0)
        kill_descendants(grace=0.5)
        os._exit(130)

    def on_interrupt(signum, frame):
        if state["interrupted"]:
            return
        state["interrupted"] = True
        signal.signal(signal.SIGINT, hard_stop)
        if not verbose:  # the one line below says it; Prefect's "Crash detected!" need not
            _quiet_console()
        raise KeyboardInterrupt

    def say_interrupted() -> None:
        if state.get("said"):
            return
        state["said"] = True
        if stopped:
            typer.echo(stopped)
        else:
            typer.echo("interrupted; rerun the same command to resume: "
                       f"{resume or resume_command()}", err=True)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        with contextlib.ExitStack() as stack:
            try:
                from prefect.settings import PREFECT_API_URL

                if not PREFECT_API_URL.value():  # (a test harness sets it in settings only)
                    _start_temporary_server(stack, state)
                yield
            except KeyboardInterrupt:
                # The flow engine has reported the runs under way as Crashed by now.
                state["interrupted"] = True
                raise typer.Exit(130) from None
            finally:
                if state["interrupted"]:  # what the flows started goes before the server
                    say_interrupted()
                    from mythloop.procs import kill_descendants

                    server = state["server"]
                    kill_descendants(spare=[server.pgid] if server and server.pgid else [])
    finally:
        signal.signal(signal.SIGINT, previous)
        if state["interrupted"]:
            say_interrupted()  # if Ctrl-C came while the server was being drained
            if state["server"] is not None:
                state["server"].stop(grace=3.0)  # a no-op when it is stopped already
            # Everything is stopped and recorded; skip the interpreter's teardown, which
            # takes seconds with torch loaded on a busy machine.
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(0 if stopped else 130)


def _start_temporary_server(stack: contextlib.ExitStack, state: dict) -> None:
    """Start the temporary server and point this process (and its children) at it."""
    import typer

    from mythloop.settings import get_settings
    from mythloop_app.commands.tempserver import TemporaryServer

    home = os.environ.get("PREFECT_HOME")
    server = TemporaryServer(prefect_home=Path(home) if home else get_settings().prefect_home)
    state["server"] = server  # known to the Ctrl-C path from here on
    timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120"))
    stack.callback(lambda: _stop_temporary_server(server, state["interrupted"]))
    try:
        server.start(timeout)
    except RuntimeError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    os.environ["PREFECT_API_URL"] = server.api_url
    stack.callback(os.environ.pop, "PREFECT_API_URL", None)
    _TEMPORARY_APIS.add(server.api_url)

    import prefect.context
    from prefect.settings import (
        PREFECT_API_URL,
        PREFECT_FLOWS_HEARTBEAT_FREQUENCY,
        temporary_settings,
    )

    stack.enter_context(temporary_settings(updates={
        PREFECT_API_URL: server.api_url, PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}))
    # Threads started from contexts copied earlier see the same settings.
    stack.enter_context(prefect.context._temporary_global_settings_context(
        prefect.context.get_settings_context()))


def _stop_temporary_server(server, interrupted: bool) -> None:
    """Flush this process's events and logs, let the server store them, then stop it.

    Runs last, after the flows (and, on Ctrl-C, this command's child processes) ended.
    """
    if server.proc is None:
        return
    if server.proc.poll() is None:
        _flush_to_api(timeout=3.0 if interrupted else 15.0)
        server.drain(timeout=3.0 if interrupted else 20.0)
    server.stop(grace=2.0 if interrupted else 10.0)


def _flush_to_api(timeout: float) -> None:
    """Send what Prefect still queues in this process (events, logs) to the API."""
    with contextlib.suppress(Exception):
        from prefect.events.worker import EventsWorker
        from prefect.logging.handlers import APILogWorker

        APILogWorker.drain_all(timeout=timeout)
        EventsWorker.drain_all(timeout=timeout)


def _quiet_console() -> None:
    """Raise every console handler's level, so nothing more reaches the terminal."""
    import logging

    loggers = [logging.getLogger(), *(logger for logger in logging.Logger.manager.loggerDict
                                      .values() if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and not isinstance(
                    handler, logging.FileHandler):
                handler.setLevel(logging.CRITICAL + 1)


def resume_command(*, add: dict[str, str] | None = None) -> str:
    """The command line this process was started with, for the resume hint.

    `add` names options to append when absent (e.g. the results dir chosen for this run).
    """
    import shlex

    args = list(sys.argv[1:])
    for option, value in (add or {}).items():
        if not any(a == option or a.startswith(option + "=") for a in args):
            args += [option, value]
    return shlex.join(["mythloop", *args])


def ui_hint() -> str:
    """Where to look at the runs in the Prefect UI."""
    from prefect.settings import PREFECT_API_URL, PREFECT_UI_URL

    api = PREFECT_API_URL.value()
    if api and api not in _TEMPORARY_APIS:
        ui = PREFECT_UI_URL.value() or api.rsplit("/api", 1)[0]
        return f"Prefect UI: {ui}/runs"
    from mythloop.settings import get_settings

    home = os.environ.get("PREFECT_HOME") or str(get_settings().prefect_home)
    return (f"Prefect UI: no server was running, so a temporary one ran this command; its runs "
            f"are kept in {home} and show in the UI of `mythloop server` started in this "
            "folder (later commands here use that server by themselves)")
