"""How CLI commands run flows: quiet console, heartbeats, the server, Ctrl-C, and the UI."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["flow_runtime", "ui_hint", "resume_command", "stop_signals", "STOP_SIGNALS",
           "prepare_state"]

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # Ctrl-C, and kill / systemd / docker stop

_TEMPORARY_APIS: set[str] = set()  # API URLs of the temporary servers this process ran


def prepare_state() -> None:
    """Point Prefect and the caches at the state folder (`mythloop.state`), once per process.

    The CLI calls it before a command runs, or, for the commands that check their input
    first (cli._CHECK_FIRST), after those checks: `flow_runtime` and `mythloop server` call it.
    """
    if _PREPARED:
        return
    # Here, not at the top: mythloop.settings loads pydantic_settings, kept off the start-up
    # path so that bad input is answered in well under a second.
    from mythloop.state import prepare_environment  # noqa: PLC0415

    prepare_environment()
    _PREPARED.append(True)


_PREPARED: list[bool] = []


@contextlib.contextmanager
def flow_runtime(*, verbose: bool = False, resume: str | Callable[[], str] | None = None,
                 stopped: str | None = None,
                 explained: tuple[type[BaseException], ...] = (),
                 before_server: Callable[[], object] | None = None) -> Iterator[None]:
    """Run flows from the CLI.

    - Prefect's per-task console lines are hidden unless --verbose (the flows print one
      line per round or stage; every log still reaches the Prefect API and UI).
    - Without PREFECT_API_URL, a running `mythloop server` of this state folder is used
      (its `server.json`), so runs stay browsable in its UI.
    - Otherwise a temporary Prefect server runs for this command (`tempserver.py`), on the
      same database as `mythloop server`; flow heartbeats (crash detection for long-lived
      servers) are turned off there, as each flow would otherwise wait ~1 s at exit for
      its heartbeat thread. It is drained, then stopped when the block ends.
    - Ctrl-C or SIGTERM (the same path): the flow engine reports the runs under way as
      Crashed; then this prints one line (`interrupted; rerun the same command to resume:
      <resume>`), ends the command's child processes (sandboxed renders and their sessions
      included; a render ended so reports `interrupted`), lets the server record the crash
      and stops it, and exits with 128 + the signal (130 for Ctrl-C, 143 for SIGTERM).
      A second signal stops everything at once. For a command that runs until Ctrl-C
      (`serve`), `stopped` is the line printed instead, and the exit code is 0.
    - `explained`: exceptions the command answers itself in one line (a sweep that stopped
      failing): Prefect's console records of them (the engine's traceback, "Finished in
      state Failed", the failure hook's line) are held back unless --verbose; the API and the
      UI still get them.
    """
    from mythloop_app.discovery import local_server_url

    prepare_state()
    if not os.environ.get("PREFECT_API_URL"):
        local = local_server_url()
        if local:  # set before Prefect reads its settings; child processes inherit it
            os.environ["PREFECT_API_URL"] = local

    if not verbose:
        for handler in ("CONSOLE", "CONSOLE_FLOW_RUNS", "CONSOLE_TASK_RUNS"):
            os.environ.setdefault(f"PREFECT_LOGGING_HANDLERS_{handler}_LEVEL", "WARNING")

    import typer

    from mythloop.procs import STOPPING

    state: dict[str, Any] = {"server": None, "interrupted": False, "code": 130}

    own_pid = os.getpid()

    def hard_stop(signum, frame):  # a second Ctrl-C: no more waiting
        if os.getpid() != own_pid:  # a child between fork and exec (see on_interrupt)
            return
        from mythloop.procs import hard_exit, kill_descendants

        if state["server"] is not None:
            state["server"].stop(grace=0.0)
        kill_descendants(grace=0.5)
        hard_exit(state["code"])

    def on_interrupt(signum, frame):
        # A child started with a preexec_fn runs Python between fork and exec, with these
        # handlers: a signal there must not raise in it ("Exception ignored in _after_fork").
        if state["interrupted"] or os.getpid() != own_pid:
            return
        state["interrupted"] = True
        state["code"] = 128 + signum
        STOPPING.set()  # children that end from here on were stopped, not broken
        for sig in STOP_SIGNALS:
            signal.signal(sig, hard_stop)
        _stop_deadline(state, lambda: hard_stop(signum, None))
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
                       f"{_resume_text(resume)}", err=True)

    previous = {sig: signal.signal(sig, on_interrupt) for sig in STOP_SIGNALS}
    quieted = unexplained = None
    try:
        if _server_may_be_needed():  # started before Prefect is imported: the two overlap
            state["server"] = _temporary_server()
            state["server"].launch()
        if not verbose:
            import prefect.main  # noqa: F401  (sets up Prefect's logging: its console handlers)
        quieted = None if verbose else _hide_termination_crash_lines()
        if not verbose:
            _add_console_filter(_NoDrainProgress())  # (not removed: the drain runs at exit)
            _add_console_filter(_QuietAfterStop())
            from mythloop_tasks.common import ToldByTheFlow  # (after Prefect, as above)

            _add_console_filter(ToldByTheFlow())  # a failed render: the flow's line says it
        unexplained = None if verbose or not explained else _add_console_filter(
            _ExplainedFailures(explained))
        with contextlib.ExitStack() as stack:
            try:
                from prefect.settings import PREFECT_API_URL

                if before_server is not None:  # (under the signal handlers already)
                    before_server()
                if not PREFECT_API_URL.value():  # (a test harness sets it in settings only)
                    _start_temporary_server(stack, state)
                elif state["server"] is not None:  # Prefect's settings name a server after all
                    state["server"].stop(grace=0.0)
                    state["server"] = None
                watch = _ServerWatch(state, verbose=verbose,
                                     resume=None if stopped else (lambda: _resume_text(resume)))
                stack.callback(watch.stop)  # runs before the server is drained and stopped
                watch.start(PREFECT_API_URL.value() or os.environ.get("PREFECT_API_URL"))
                if watch.api_url and not verbose:
                    stack.callback(_hold_back_api_loss(watch))
                    # Prefect's log shipper writes "--- Error logging to API ---" and the
                    # error straight to stderr when the API fails, if this is set; the
                    # watch's one line says it instead (--verbose keeps them).
                    stack.callback(setattr, logging, "raiseExceptions", logging.raiseExceptions)
                    logging.raiseExceptions = False
                try:
                    yield
                except (KeyboardInterrupt, _termination_signal(), typer.Exit):
                    raise
                except Exception:
                    watch.gone_now()  # the API went away under the flow: one line, exit 3
                    raise
            except (KeyboardInterrupt, _termination_signal()) as exc:
                # The flow engine has reported the runs under way as Crashed by now. Which
                # handler ran first (Prefect's SIGTERM bridge, or this module's, to which the
                # bridge hands the signal back) is a matter of timing: the exit code is the
                # signal's either way.
                if not state["interrupted"]:
                    signum = getattr(exc, "signal", None)
                    state["code"] = 128 + int(signum) if signum else state["code"]
                    if not verbose:
                        _quiet_console()
                state["interrupted"] = True
                STOPPING.set()
                _stop_deadline(state, lambda: hard_stop(state["code"] - 128, None))
                raise typer.Exit(state["code"]) from None
            finally:
                if state["interrupted"]:  # what the flows started goes before the server
                    say_interrupted()
                    from mythloop.procs import kill_descendants

                    server = state["server"]
                    kill_descendants(spare=[server.pgid] if server and server.pgid else [])
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if quieted is not None:
            quieted()
        if unexplained is not None:
            unexplained()
        if not state["interrupted"] and state["server"] is not None:
            state["server"].stop(grace=2.0)  # a no-op when it is stopped already
        if state["interrupted"]:
            say_interrupted()  # if Ctrl-C came while the server was being drained
            if state["server"] is not None:
                state["server"].stop(grace=3.0)  # a no-op when it is stopped already
            # Everything is stopped and recorded; skip the interpreter's teardown, which
            # takes seconds with torch loaded on a busy machine.
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            from mythloop.procs import hard_exit

            hard_exit(0 if stopped else state["code"])  # (the mounts it made undone first)


STOP_DEADLINE_S = 60.0  # Ctrl-C / SIGTERM: the command has ended by then, one way or another


def _stop_deadline(state: dict, stop_now: Callable[[], None]) -> None:
    """A command asked to stop ends within STOP_DEADLINE_S (MYTHLOOP_STOP_DEADLINE_S): when
    its orderly stop (the flow engine recording the crash, the task threads returning, the
    server drained) takes longer, something is stuck; the threads' stacks go to a file under
    the state folder's logs/, one line says so, and `stop_now` ends everything at once (as a
    second Ctrl-C would). Started once per command (`state`)."""
    import threading
    import time

    if state.get("deadline"):
        return
    state["deadline"] = True
    try:
        deadline = float(os.environ.get("MYTHLOOP_STOP_DEADLINE_S", "") or STOP_DEADLINE_S)
    except ValueError:
        deadline = STOP_DEADLINE_S

    def watch() -> None:
        time.sleep(deadline)
        import faulthandler

        where = "stderr, above"
        try:
            from mythloop.settings import get_settings

            logs = get_settings().state_root / "logs"
            logs.mkdir(parents=True, exist_ok=True)
            path = logs / f"stop-stacks-{os.getpid()}-{time.strftime('%Y%m%d-%H%M%S')}.txt"
            with open(path, "w", encoding="utf-8") as out:
                faulthandler.dump_traceback(file=out, all_threads=True)
            where = str(path)
        except Exception:  # noqa: BLE001 (no state folder to write to: the stacks go to stderr)
            with contextlib.suppress(Exception):
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        with contextlib.suppress(Exception):
            sys.stderr.write(f"mythloop: stopping took over {deadline:.0f} s; stopped the "
                             f"rest at once (what was stuck: the thread stacks in {where})\n")
            sys.stderr.flush()
        stop_now()

    threading.Thread(target=watch, name="mythloop-stop-deadline", daemon=True).start()


SERVER_GONE_EXIT = 3  # the Prefect API went away mid-run (1: the run failed, 2: bad input)
_WATCH_EVERY_S = 0.5  # how often the temporary server's process is looked at
_PROBE_EVERY_S = 1.0  # how often another server's /ready is asked
_PROBE_TIMEOUT_S = 4.0
_REFUSED_MISSES = 2  # nothing listens on its port twice running: the server is gone
_DOWN_MISSES = 3  # its database unavailable three times running (/ready: 503)
_SILENT_S = 30.0  # no answer at all for this long: it is not coming back in time


def _probe(api_url: str, timeout: float = _PROBE_TIMEOUT_S) -> str:
    """How the Prefect API at `api_url` is: "ok", "refused" (nothing listens on its port),
    "database" (the server answers but its database does not: /ready says 503) or "silent"
    (no answer in time, or an answer that says nothing: 5xx, a broken connection)."""
    import urllib.error
    import urllib.request

    for path in ("/ready", "/health"):  # /ready asks the database too (Prefect 3)
        try:
            with urllib.request.urlopen(f"{api_url}{path}", timeout=timeout) as response:
                return "ok" if response.status == 200 else "silent"
        except urllib.error.HTTPError as exc:
            if exc.code == 503 and path == "/ready":
                return "database"
            if exc.code in (404, 405) and path == "/ready":  # a server without /ready
                continue
            return "silent"
        except urllib.error.URLError as exc:
            refused = isinstance(exc.reason, ConnectionRefusedError)
            return "refused" if refused else "silent"
        except ConnectionRefusedError:
            return "refused"
        except (OSError, ValueError):  # a timeout, a broken connection
            return "silent"
    return "silent"


class _ServerWatch:
    """Watches the Prefect API a command runs against; when it goes away mid-run (the
    temporary server killed, `mythloop server` stopped, its database down), prints one line
    saying what died and how to resume, ends this command's child processes (sandboxed
    renders included) and exits with SERVER_GONE_EXIT, instead of tracebacks and a hang
    while Prefect's client retries.

    Another server (PREFECT_API_URL, or `mythloop server` found through server.json) is asked
    its /ready every second, and only when it answered when the command started (an API this
    cannot judge, e.g. behind a login, is not watched). While it does not answer, Prefect's
    own console warnings about the lost API are held back (`_ApiLossFilter`): the one line
    says it."""

    def __init__(self, state: dict, *, verbose: bool,
                 resume: Callable[[], str] | None) -> None:
        import threading

        self.state, self.verbose, self.resume = state, verbose, resume
        self.done = threading.Event()
        self.poke = threading.Event()  # a console record suggests the API is gone: look now
        self.thread: threading.Thread | None = None
        self.api_url: str | None = None
        self.what = "the Prefect server"
        self._last: tuple[float, str] = (0.0, "ok")
        self._lock = threading.Lock()

    def start(self, api_url: str | None) -> None:
        import threading

        if not api_url:
            return
        server = self.state.get("server")
        if server is None or server.proc is None:
            if _probe(api_url) != "ok":
                return  # not an API this can judge: no watch rather than a false alarm
            self.api_url = api_url
            self.what = _describe_server(api_url)
        self.thread = threading.Thread(target=self._run, args=(api_url,), daemon=True,
                                       name="mythloop-server-watch")
        self.thread.start()

    def stop(self) -> None:
        self.done.set()

    def status(self, max_age: float = 1.0) -> str:
        """The API's state as last probed, probing again when older than `max_age` s
        ("ok" for a temporary server, which is watched through its process)."""
        import time

        if self.api_url is None:
            server = self.state.get("server")
            if server is not None and server.proc is not None and server.proc.poll() is not None:
                return "refused"
            return "ok"
        with self._lock:
            at, seen = self._last
            if time.monotonic() - at > max_age:
                seen = _probe(self.api_url, timeout=1.0)
                self._last = (time.monotonic(), seen)
            return seen

    def _run(self, api_url: str) -> None:
        server = self.state.get("server")
        if server is not None and server.proc is not None:  # our own temporary server
            while not self.done.wait(_WATCH_EVERY_S):
                code = server.proc.poll()
                if code is not None:
                    how = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
                    self._gone(f"the temporary Prefect server (pid {server.proc.pid}) {how} "
                               f"mid-run; its log: {server.log_path}")
                    return
            return
        import time

        runs: dict[str, int] = {}
        since: float | None = None  # when it last stopped answering
        while not self.done.is_set():
            self.poke.wait(_PROBE_EVERY_S)
            self.poke.clear()
            if self.done.is_set():
                return
            seen = _probe(api_url)
            with self._lock:
                self._last = (time.monotonic(), seen)
            runs = {seen: runs.get(seen, 0) + 1}
            since = None if seen == "ok" else (since or time.monotonic())
            if seen == "refused" and runs[seen] >= _REFUSED_MISSES:
                self._gone(f"{self.what} stopped mid-run (nothing answers on its port); "
                           "start it again")
            elif seen == "database" and runs[seen] >= _DOWN_MISSES:
                self._gone(f"the database of {self.what} went down mid-run (its /ready "
                           f"answers 503: database not available{_database_name()}); start "
                           "the database again")
            elif since is not None and time.monotonic() - since >= _SILENT_S:
                self._gone(f"{self.what} stopped answering mid-run (no answer for "
                           f"{_SILENT_S:.0f} s); start it again")

    def gone_now(self) -> bool:
        """Called when the flow raised: if the API is down, say so (one line, exit 3) instead
        of the traceback; False when the API is fine (the error is the flow's own)."""
        import time

        seen = self.status(max_age=0.0)
        for _ in range(4):  # a server in the middle of failing: let it say how (503, refused)
            if seen != "silent":
                break
            time.sleep(0.5)
            seen = self.status(max_age=0.0)
        if seen == "ok":
            return False
        if self.api_url is None:
            return False  # the temporary server's watch says it itself
        kind = {"refused": f"{self.what} stopped mid-run (nothing answers on its port)",
                "database": f"the database of {self.what} went down mid-run (its /ready "
                            f"answers 503: database not available{_database_name()})"}
        self._gone(kind.get(seen, f"{self.what} stopped answering mid-run")
                   + ("; start the database again" if seen == "database" else
                      "; start it again"))
        return True

    def _gone(self, what: str) -> None:
        if self.done.is_set() or self.state.get("interrupted"):
            return
        import typer

        from mythloop.procs import STOPPING, kill_descendants

        self.state["gone"] = True
        STOPPING.set()
        if not self.verbose:
            _quiet_console()  # Prefect's client errors about the lost API add nothing
        hint = (f", then rerun the same command to resume: {self.resume()}" if self.resume
                else ", then start this command again")
        with contextlib.suppress(Exception):
            typer.echo(f"error: {what}{hint}", err=True)
        kill_descendants(grace=1.0)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        from mythloop.procs import hard_exit

        hard_exit(SERVER_GONE_EXIT)


def _describe_server(api_url: str) -> str:
    """How the one line names another server: this folder's `mythloop server`, or the URL."""
    from mythloop_app.discovery import read_server_file

    with contextlib.suppress(Exception):
        info = read_server_file()
        if info and info.get("api_url") == api_url:
            return f"`mythloop server` (pid {info['pid']}, {api_url})"
    return f"the Prefect server at {api_url}"


DATABASE_ENV = "MYTHLOOP_PREFECT_DATABASE"
"""Names the Prefect server's database for the server-death line ("PostgreSQL on HOST:PORT");
the scale-out stack sets it for the commands it runs (the API hides its connection URL)."""


def _database_name() -> str:
    """The database named for the one line when this process can tell: DATABASE_ENV, or the
    server's connection URL when its environment carries one."""
    from urllib.parse import urlsplit

    if os.environ.get(DATABASE_ENV):
        return f": {os.environ[DATABASE_ENV]}"
    for name in ("PREFECT_SERVER_DATABASE_CONNECTION_URL", "PREFECT_API_DATABASE_CONNECTION_URL"):
        url = os.environ.get(name)
        if url:
            with contextlib.suppress(ValueError):
                parts = urlsplit(url)
                kind = "PostgreSQL" if parts.scheme.startswith("postgres") else parts.scheme
                where = f" on {parts.hostname}:{parts.port}" if parts.hostname else ""
                return f": {kind}{where}"
    return ""


class _ApiLossFilter:
    """Console filter while another server is watched: a warning or error from Prefect while
    its API does not answer is held back (the watch's one line says it) and wakes the watch.

    The watch probes once a second, so its last answer may be an "ok" from before the API
    failed. A record that says the API failed (a 5xx, a broken connection: `_API_FAILURE`) is
    therefore held back whatever the last probe said, and from then on every Prefect warning
    is held until a fresh probe finds the API well; a record carrying any other exception is
    judged by a fresh probe, not the last one. So the engine's traceback of a run that the
    lost API ended never reaches the terminal ahead of the one line."""

    def __init__(self, watch: _ServerWatch) -> None:
        self.watch = watch
        self.failing = False  # a record said the API failed; not yet seen well again

    def filter(self, record) -> bool:
        if record.levelno < 30 or not record.name.startswith("prefect"):
            return True
        if self.watch.api_url is None or self.watch.done.is_set():
            return True
        if _API_FAILURE.search(_record_text(record)):
            self.failing = True
            self.watch.poke.set()
            return False
        fresh = self.failing or record.exc_info is not None
        if self.watch.status(max_age=0.0 if fresh else 1.0) == "ok":
            self.failing = False
            return True
        self.watch.poke.set()
        return False


_API_FAILURE = re.compile(
    r"Server error|Internal Server Error|Service Unavailable|Bad Gateway|Gateway Timeout|"
    r"ConnectError|ReadError|RemoteProtocolError|ReadTimeout|ConnectTimeout|"
    r"Connection refused|connection was closed|PrefectHTTPStatusError|HTTPStatusError")


def _record_text(record) -> str:
    """A record's message and, when it carries one, its exception's type and text."""
    text = str(record.getMessage())
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        text += f" {type(exc).__name__}: {exc}"
        cause = exc.__cause__ or exc.__context__
        if cause is not None:
            text += f" {type(cause).__name__}: {cause}"
    return text


def _hold_back_api_loss(watch: _ServerWatch):
    """Add `_ApiLossFilter` to every console handler; returns the function that removes it."""
    return _add_console_filter(_ApiLossFilter(watch))


def _resume_text(resume: str | Callable[[], str] | None) -> str:
    """The resume command: given, computed when asked (a film's run dir), or this argv."""
    with contextlib.suppress(Exception):
        text = resume() if callable(resume) else resume
        if text:
            return text
    return resume_command()


def _termination_signal() -> type[BaseException]:
    """Prefect's TerminationSignal: its SIGTERM bridge raises it inside a flow run, reports
    the run Crashed, then hands SIGTERM back to this module's handler."""
    from prefect.exceptions import TerminationSignal

    return TerminationSignal


class _NoTerminationCrash:
    """Console filter: drops Prefect's records of a stop by signal ("Crash detected!
    Execution was aborted by a termination signal", a task or flow engine's traceback of the
    TerminationSignal or KeyboardInterrupt), logged before this module's handler runs and
    quiets the console (Prefect's SIGTERM bridge runs first when the signal lands inside a
    flow run); the one `interrupted; ...` line says it. The API still gets them."""

    def filter(self, record) -> bool:
        message = str(record.getMessage())
        if "by a termination signal" in message or "TerminationSignal" in message:
            return False
        exc = record.exc_info[1] if record.exc_info else None
        for _ in range(10):  # the signal's exception, or one raised while handling it
            if exc is None:
                break
            if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "TerminationSignal":
                return False
            exc = exc.__cause__ or exc.__context__
        return True


class _QuietAfterStop:
    """Console filter: once a stop is under way (`STOPPING`), nothing more reaches the
    terminal; the command's one line says it. It covers the records that come before the
    handler quiets the console: a scene thread that sees the stop while Prefect's SIGTERM
    bridge still unwinds the flow logs its "stopped" failure at once."""

    def filter(self, record) -> bool:
        from mythloop.procs import STOPPING

        return not STOPPING.is_set()


class _NoDrainProgress:
    """Console filter: drops Prefect's "Still processing items: N items remaining..." (its
    log and event shippers, still sending while the process exits on a busy machine):
    progress, not a problem, and a line that broke the commands' one-line answers. It stays
    on to the end of the process, as the shippers drain at exit."""

    def filter(self, record) -> bool:
        return not str(record.getMessage()).startswith("Still processing items:")


class _ExplainedFailures:
    """Console filter: drops Prefect's records of an exception the command explains itself
    (its type in the record's exc_info or named in its message), and, once the first kind
    was seen (the one that ends the command), Prefect's later errors of the same failure
    (the parent flow's, the failure hook's)."""

    def __init__(self, kinds: tuple[type[BaseException], ...]) -> None:
        self.kinds, self.seen = kinds, False
        self.names = {kind: tuple(_class_names(kind)) for kind in kinds}

    def _kind(self, record) -> type[BaseException] | None:
        exc = record.exc_info[1] if record.exc_info else None
        message = str(record.getMessage())
        for kind in self.kinds:  # named by the engine: "exception AuthError: ...", "AuthError(...)"
            if isinstance(exc, kind) or any(f"{name}:" in message or f"{name}(" in message
                                            for name in self.names[kind]):
                return kind
        return None

    def filter(self, record) -> bool:
        if record.levelno < 30 or not record.name.startswith("prefect"):
            return True
        kind = self._kind(record)
        if kind is not None:
            self.seen = self.seen or kind is self.kinds[0]
            return False
        return not (self.seen and record.levelno >= 40)


def _class_names(kind: type) -> set[str]:
    """The names of `kind` and of every subclass of it."""
    names = {kind.__name__}
    sub: type
    for sub in kind.__subclasses__():
        names |= _class_names(sub)
    return names


def _hide_termination_crash_lines():
    """Add the filter to every console handler; returns the function that removes it."""
    return _add_console_filter(_NoTerminationCrash())


def _add_console_filter(flt):
    """Add `flt` to every console handler; returns the function that removes it."""
    import logging

    handlers = [h for logger in [logging.getLogger(), *(
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger))]
        for h in logger.handlers
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler)]
    for handler in handlers:
        handler.addFilter(flt)

    def remove() -> None:
        for handler in handlers:
            handler.removeFilter(flt)
    return remove


@contextlib.contextmanager
def stop_signals(resume: str) -> Iterator[None]:
    """For a command without flows (`render`): SIGTERM and Ctrl-C raise KeyboardInterrupt
    (so what runs ends its child sessions on the way out), then one line
    `interrupted; rerun the same command to resume: <resume>` and exit 128 + the signal."""
    import typer

    from mythloop.procs import STOPPING

    got: dict[str, int] = {}

    def handler(signum, frame):
        if got:
            return
        got["code"] = 128 + signum
        STOPPING.set()
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    except KeyboardInterrupt:
        typer.echo(f"interrupted; rerun the same command to resume: {resume}", err=True)
        raise typer.Exit(got.get("code", 130)) from None
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _server_may_be_needed() -> bool:
    """Whether this command may need a temporary server: no PREFECT_API_URL in the
    environment and, when Prefect's settings are loaded already (a test harness sets the URL
    there only), none in them. Before Prefect is imported a profile might still name one: the
    server then starts on the chance, and stops once the settings say so."""
    if os.environ.get("PREFECT_API_URL"):
        return False
    if "prefect.settings" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        return not PREFECT_API_URL.value()
    return True


def _temporary_server():
    from mythloop.settings import get_settings
    from mythloop_app.commands.tempserver import TemporaryServer

    home = os.environ.get("PREFECT_HOME")
    return TemporaryServer(prefect_home=Path(home) if home else get_settings().prefect_home)


def _start_temporary_server(stack: contextlib.ExitStack, state: dict) -> None:
    """Start the temporary server (or wait for the one launched early) and point this process
    (and its children) at it."""
    import typer

    server = state["server"] or _temporary_server()
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


def resume_command(*, add: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> str:
    """The command line this process was started with, for the resume hint.

    `add` names options to append when absent (e.g. the results dir chosen for this run);
    `drop` names flags (options without a value) to leave out, those that would undo the
    resume (a film's `--fresh` calls every stage and renders every scene again).
    """
    import shlex

    args = [a for a in sys.argv[1:] if a not in drop]
    for option, value in (add or {}).items():
        if not any(a == option or a.startswith(option + "=") for a in args):
            args += [option, value]
    line = shlex.join([*invoked_as(), *args])
    try:
        line.encode("utf-8")
        return line
    except UnicodeEncodeError:  # a file name's bytes that are not UTF-8: printed as \xNN
        return os.fsencode(line).decode("utf-8", "backslashreplace")


def invoked_as() -> list[str]:
    """How the user started this command, so that the resume line runs as printed from
    where they are: the script path as typed (`.venv/bin/mythloop`; a bare `mythloop` when
    that is what PATH finds), or `python -m mythloop_app` as typed."""
    import shutil

    orig = list(getattr(sys, "orig_argv", []) or [])
    if "-m" in orig[:-1] and orig[orig.index("-m") + 1].startswith("mythloop_app"):
        return orig[:orig.index("-m") + 2]  # python -m mythloop_app[.cli] ...
    script = sys.argv[0] if sys.argv and sys.argv[0] else "mythloop"
    name = os.path.basename(script)
    if script != name:
        found = shutil.which(name)
        with contextlib.suppress(OSError):
            if found and os.path.samefile(found, script):
                return [name]
    elif not shutil.which(name) and os.path.exists(name):
        return ["./" + name]
    return [script]


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
