"""`mythloop server` (a local Prefect server with its UI) and `mythloop serve` (the deployments).

The server runs `prefect server start` as a child process in its own session, with its
SQLite database under the project-local Prefect home. While it runs, `<state>/server.json`
tells `mythloop serve`, `sweep` and `film` in other shells where the API is.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import typer

from mythloop_app.commands.runtime import prepare_state
from mythloop_app.params import host as host_address
from mythloop_app.params import seconds

# mythloop.procs (psutil), mythloop.fileio (pydantic) and mythloop_app.discovery (procs) are
# imported inside the functions that use them, so that `mythloop serve --cron BAD` is answered
# before they load (the CLI imports this module at start-up).

__all__ = ["register"]

_STOP_GRACE_S = 20.0


def _server_env(host: str, port: int) -> dict[str, str]:
    from mythloop.settings import get_settings

    api = f"http://{host}:{port}/api"
    env = dict(os.environ)
    env.pop("PREFECT_API_URL", None)
    env.update({
        "PREFECT_HOME": os.environ.get("PREFECT_HOME", str(get_settings().prefect_home)),
        "PREFECT_SERVER_API_HOST": host,
        "PREFECT_SERVER_API_PORT": str(port),
        # The UI asks /ui-settings where the API is; without this it assumes port 4200.
        "PREFECT_SERVER_UI_API_URL": api,
        "PREFECT_UI_API_URL": api,
        "PREFECT_UI_URL": f"http://{host}:{port}",
        "PREFECT_SERVER_UI_ENABLED": "true",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_UI_SHOW_PROMOTIONAL_CONTENT": "false",
    })
    return env


class _Stop(Exception):
    """SIGTERM / SIGINT / SIGHUP arrived."""


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[None]:
    """Turn SIGTERM, SIGINT and SIGHUP into one `_Stop`; later signals are ignored."""
    def handler(signum, frame):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        raise _Stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler)
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def server(
    port: int | None = typer.Option(None, min=1, max=65535,
                                    help="Port to listen on (default: a free one)."),
    host: str = typer.Option("127.0.0.1", parser=host_address, metavar="ADDRESS",
                             help="Address to listen on."),
    startup_timeout: float = typer.Option(180.0, parser=seconds("startup timeout"),
                                          metavar="SECONDS",
                                          help="Seconds to wait for the server to answer."),
) -> None:
    """Start a local Prefect server with its UI (SQLite under .mythloop/prefect); Ctrl-C stops it.

    While it runs, mythloop commands in other shells use it by themselves; the `prefect`
    CLI needs the `export PREFECT_API_URL=<url>` line it prints.
    """
    existing = os.environ.get("PREFECT_API_URL")
    from mythloop import procs  # noqa: PLC0415  (psutil: off the start-up path)
    from mythloop_app.discovery import api_ok, read_server_file  # noqa: PLC0415  (the same)

    if existing:
        typer.echo(f"PREFECT_API_URL is set ({existing}): mythloop uses that server; not "
                   "starting another. Unset PREFECT_API_URL to start a local one.")
        return
    running = read_server_file()
    if running and api_ok(running["api_url"]):
        typer.echo(f"a mythloop server already runs for this folder (pid {running['pid']}):")
        _print_addresses(running["api_url"])
        return
    port = port or procs.free_port(host)
    if procs.port_in_use(host, port):
        typer.echo(f"error: port {port} on {host} is in use; choose another --port or leave "
                   "it out to get a free one", err=True)
        raise typer.Exit(2)
    raise typer.Exit(_run_server(host, port, startup_timeout))


def _run_server(host: str, port: int, startup_timeout: float) -> int:
    from mythloop import procs  # noqa: PLC0415  (psutil: off the start-up path)
    from mythloop.fileio import write_json_atomic  # noqa: PLC0415  (pydantic: the same)
    from mythloop.settings import get_settings
    from mythloop_app.discovery import read_server_file, server_file  # noqa: PLC0415

    settings = get_settings()
    settings.prefect_home.mkdir(parents=True, exist_ok=True)
    log_path = settings.prefect_home / "server.log"
    api_url = f"http://{host}:{port}/api"
    record = server_file()
    typer.echo(f"starting Prefect server on {host}:{port} (database and log under "
               f"{settings.prefect_home}) ...")
    with _stop_on_signals():
        proc = None
        try:
            proc = procs.start_process(
                [sys.executable, "-m", "prefect", "server", "start",
                 "--host", host, "--port", str(port)],
                env=_server_env(host, port), log_path=log_path)
            if not procs.wait_http_ok(f"{api_url}/health", timeout=startup_timeout, proc=proc):
                why = ("exited" if proc.poll() is not None
                       else f"did not answer within {startup_timeout:.0f} s")
                typer.echo(f"error: the Prefect server {why}; its log ({log_path}) ends:\n"
                           f"{procs.log_tail(log_path, 25)}", err=True)
                return 1
            write_json_atomic(record, {
                "api_url": api_url, "ui_url": api_url[:-4], "host": host, "port": port,
                "pid": os.getpid(), "server_pid": proc.pid, "log": str(log_path),
                "prefect_home": str(settings.prefect_home),
                "started_utc": datetime.now(UTC).isoformat()})
            typer.echo("Prefect server ready.")
            _print_addresses(api_url)
            typer.echo("Stop it with Ctrl-C.")
            code = proc.wait()
            typer.echo(f"error: the Prefect server exited (code {code}); its log ({log_path}) "
                       f"ends:\n{procs.log_tail(log_path, 25)}", err=True)
            return 1
        except (_Stop, KeyboardInterrupt):
            typer.echo("stopping the Prefect server ...")
            return 0
        finally:
            if proc is not None:  # SIGTERM, a grace period, then SIGKILL to what is left
                procs.stop_group(proc, grace=_STOP_GRACE_S)
            with contextlib.suppress(FileNotFoundError):
                if (read_server_file() or {}).get("pid") == os.getpid():
                    record.unlink()
            if proc is not None:
                typer.echo("Prefect server stopped.")


def _print_addresses(api_url: str) -> None:
    typer.echo(f"  UI:  {api_url[:-4]}")
    typer.echo(f"  API: {api_url}")
    typer.echo("mythloop commands in other shells of this folder find it by themselves; for "
               "the prefect CLI or another folder:")
    typer.echo(f"  export PREFECT_API_URL={api_url}")


def serve(
    cron: str | None = typer.Option(None, help="Cron of the nightly sweep "
                                    "(default: MYTHLOOP_SCHEDULE_CRON, '0 2 * * *')."),
    timezone: str | None = typer.Option(None, help="IANA timezone of the cron "
                                        "(default: MYTHLOOP_TIMEZONE, UTC)."),
    wait: float = typer.Option(0.0, parser=seconds("wait", zero=True), metavar="SECONDS",
                               help="Seconds to wait for the server to answer "
                               "(when server and serve start together)."),
    preview_port: int | None = typer.Option(
        None, min=0, max=65535, help="Port of the read-only HTTP preview of film runs and "
        "sweep results (default: the UI's port + 1, or a free one; 0 turns it off)."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show Prefect's task logs."),
) -> None:
    """Serve the `nightly-sweep` and `film` deployments from this process; Ctrl-C stops.

    Needs a Prefect server: `mythloop server` in another shell, or PREFECT_API_URL.
    Creates the `llm` concurrency limit (MYTHLOOP_LLM_CONCURRENCY) and runs the flows that the
    schedule or the UI's Run form start. Film runs and sweep results are also served
    read-only over HTTP on loopback, so a film's link in the UI opens in the browser.
    """
    from mythloop.checks import cron_problem

    problem = cron_problem(cron, timezone)  # the values given: before the settings load
    configured = os.environ.get("MYTHLOOP_BACKEND", "").strip().lower()
    if not problem and configured:  # the model backend configured here: can it work?
        from mythloop.llm.preflight import backend_problem

        why = backend_problem(configured)
        if why:
            problem = (f"MYTHLOOP_BACKEND={configured} cannot work here: {why} (or unset "
                       "MYTHLOOP_BACKEND)")
    if not problem:
        # Here, not at the top: pydantic_settings stays off the start-up path (bad input above
        # is answered in well under a second).
        from mythloop.settings import get_settings  # noqa: PLC0415

        settings = get_settings()
        prepare_state()
        problem = cron_problem(cron or settings.schedule_cron, timezone or settings.timezone)
    if problem:  # checked here, before looking for (or waiting on) a server
        typer.echo(f"error: {problem}", err=True)
        raise typer.Exit(2)
    api_url = _find_server(wait)
    if not api_url:
        given = os.environ.get("PREFECT_API_URL")
        typer.echo(f"error: the Prefect API at {given} does not answer; start that server (or "
                   "unset PREFECT_API_URL), then run `mythloop serve` again" if given else
                   "error: no Prefect server to serve to: start `mythloop server` in another "
                   "shell (or set PREFECT_API_URL), then run `mythloop serve` again", err=True)
        raise typer.Exit(2)
    cron = cron or settings.schedule_cron
    timezone = timezone or settings.timezone
    os.environ["PREFECT_API_URL"] = api_url  # the served flow runs' processes inherit it
    from mythloop_app import deployments as entry
    from mythloop_app.commands.runtime import flow_runtime

    with flow_runtime(verbose=verbose, stopped="stopped serving"):
        try:
            deployments = entry.build_deployments(cron=cron, timezone=timezone)
        except ValueError as exc:
            typer.echo(f"error: {entry.first_error_line(exc)}", err=True)
            raise typer.Exit(2) from None
        preview = _start_preview(api_url, preview_port)
        try:
            entry.serve_all(deployments, llm_concurrency=settings.llm_concurrency,
                            api_url=api_url, alert=entry.build_alert_deployment(),
                            notify_block=settings.regression_notify_block)
        finally:
            if preview is not None:
                preview.stop()
        # serve_all returns when Prefect's runner took a SIGTERM (it handles that signal
        # itself, cancelling what it runs): the same line as Ctrl-C's. When the stop came
        # through flow_runtime's handler (STOPPING), flow_runtime says it: once, not twice.
        from mythloop.procs import STOPPING

        if not STOPPING.is_set():
            typer.echo("stopped serving")


def _start_preview(api_url: str, port: int | None):
    """The read-only HTTP preview of runs and results, next to the UI (None when off)."""
    if port == 0:
        return None
    from urllib.parse import urlsplit

    from mythloop import procs  # noqa: PLC0415  (psutil: off the start-up path)
    from mythloop.preview import PreviewServer

    ui_port = urlsplit(api_url).port or 4200
    host = "127.0.0.1"
    if port is None:
        port = ui_port + 1 if ui_port < 65535 and not procs.port_in_use(host, ui_port + 1) else 0
    elif procs.port_in_use(host, port):
        typer.echo(f"error: preview port {port} is in use; choose another --preview-port",
                   err=True)
        raise typer.Exit(2)
    from mythloop.settings import get_settings

    log = get_settings().state_root / "preview-access.log"  # method, path, status per request
    preview = PreviewServer(host=host, port=port, access_log=log).start(record=True)
    typer.echo(f"film runs and sweep results, read-only: {preview.url}/runs/ and "
               f"{preview.url}/results/ (films link their video there)")
    return preview


def _find_server(wait: float) -> str | None:
    """PREFECT_API_URL or this folder's `mythloop server`, once it answers (up to `wait` s)."""
    from mythloop_app.discovery import api_ok, local_server_url  # noqa: PLC0415  (psutil)

    deadline = time.monotonic() + wait
    while True:
        given = os.environ.get("PREFECT_API_URL")
        url = (given if api_ok(given) else None) if given else local_server_url()
        if url or time.monotonic() >= deadline:
            return url
        time.sleep(1.0)


def register(app: typer.Typer) -> None:
    app.command("server")(server)
    app.command("serve")(serve)
