"""Read-only HTTP access to film runs and sweep results, for the Prefect UI's links.

A film made from the Prefect UI is a file on the server's disk; a browser on another tab
(or machine, through an SSH tunnel) needs an http address. `mythloop serve` runs a
`PreviewServer` on loopback next to the UI: GET/HEAD only, paths confined to the runs and
results folders, byte ranges for video seeking, no directory listings apart from the two
index pages `/runs/` and `/results/` (each run newest first: prompt, state, duration, links).
It sends no CORS
header (another site's page cannot read its answers), answers only requests addressed to a
loopback name (a DNS-rebinding page's Host is refused with 403), and answers a malformed path
(a NUL byte, an overlong path or name, bytes that are not UTF-8) with 400. While it runs,
`<state>/preview.json` tells films where it is, so their link artifacts point at it.
"""

from __future__ import annotations

import json
import mimetypes
import os
import threading
import urllib.parse
from datetime import datetime
from html import escape
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mythloop import procs
from mythloop.fileio import write_json_atomic
from mythloop.settings import get_settings

__all__ = ["PreviewServer", "preview_file", "preview_base_url", "preview_url_for",
           "default_roots", "index_page"]

_CHUNK = 256 * 1024
_MAX_PATH = 4096  # bytes of a decoded request path; longer is malformed (400)
_MAX_NAME = 255  # bytes of one path component (NAME_MAX)
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


class _BadPath(ValueError):
    """A request path that no file can have (400, not a traceback)."""


def _host_name(header: str) -> str:
    """The name part of a Host header ("127.0.0.1:8001" -> "127.0.0.1", "[::1]:80" -> "[::1]")."""
    header = header.strip().lower().rstrip(".")
    if header.startswith("["):
        return header.split("]", 1)[0] + "]"
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def loopback_host(header: str | None) -> bool:
    """True when a request's Host names this machine's loopback (no Host: an HTTP/1.0 client
    on this machine); a rebinding page's own domain is not."""
    if header is None:
        return True
    name = _host_name(header)
    return name in _LOOPBACK_NAMES or name.endswith(".localhost") or (
        name.startswith("127.") and name.replace(".", "").isdigit() and name.count(".") == 3)
_TYPES = {".mp4": "video/mp4", ".webm": "video/webm", ".png": "image/png",
          ".vtt": "text/vtt; charset=utf-8", ".srt": "application/x-subrip; charset=utf-8",
          ".md": "text/markdown; charset=utf-8", ".json": "application/json",
          ".jsonl": "application/x-ndjson", ".py": "text/plain; charset=utf-8",
          ".txt": "text/plain; charset=utf-8", ".wav": "audio/wav"}


def default_roots() -> dict[str, Path]:
    """URL prefix -> folder: film runs and sweep results of this state folder."""
    settings = get_settings()
    return {"runs": settings.resolved_runs_dir, "results": settings.resolved_results_dir}


def preview_file() -> Path:
    return get_settings().state_root / "preview.json"


def preview_base_url() -> str | None:
    """The running preview server's address for this state folder, or None."""
    try:
        info = json.loads(preview_file().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not procs.pid_alive(int(info.get("pid", 0) or 0)):
        return None
    return info.get("url")


def preview_url_for(path: Path) -> str | None:
    """The http address of a file under the runs/results folders, when a preview server
    of this state folder runs; None otherwise (or for a file outside those folders)."""
    base = preview_base_url()
    if not base:
        return None
    info = json.loads(preview_file().read_text(encoding="utf-8"))
    target = Path(path).resolve()
    for prefix, root in info.get("roots", {}).items():
        try:
            rel = target.relative_to(Path(root))
        except ValueError:
            continue
        return f"{base}/{prefix}/" + urllib.parse.quote(rel.as_posix())
    return None


class _Handler(BaseHTTPRequestHandler):
    server_version = "mythloop-preview"
    roots: dict[str, Path] = {}
    access_log: Path | None = None
    log_lock = threading.Lock()

    def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
        """Nothing on the terminal: a line per request would drown serve's output (requests
        go to the access log instead, see log_request)."""

    def log_request(self, code="-", size="-"):
        if self.access_log is None:
            return
        line = f"{self.command} {urllib.parse.urlsplit(self.path).path} {int(code)}\n"
        with self.log_lock, open(self.access_log, "a", encoding="utf-8") as handle:
            handle.write(line)

    def _resolve(self) -> Path | None:
        """The file a request names; None when there is none; _BadPath when malformed."""
        raw = urllib.parse.urlsplit(self.path).path
        if not raw.isascii():  # raw bytes above 127 in the request line (not percent-encoded)
            raise _BadPath("not ASCII")
        try:
            decoded = urllib.parse.unquote(raw, errors="strict")
        except UnicodeDecodeError:
            raise _BadPath("not UTF-8") from None
        if len(decoded.encode()) > _MAX_PATH or any(ord(c) < 32 or c == "\x7f" for c in decoded):
            raise _BadPath("overlong path or a control character")
        parts = [p for p in decoded.split("/") if p]
        if any(len(p.encode()) > _MAX_NAME for p in parts):
            raise _BadPath("overlong name")
        if len(parts) < 2 or parts[0] not in self.roots or any(p in (".", "..") for p in parts):
            return None
        root = self.roots[parts[0]].resolve()
        try:
            target = root.joinpath(*parts[1:]).resolve()
            if not target.is_relative_to(root) or not target.is_file():
                return None  # symlinks out of the folder and directories are not served
        except (OSError, ValueError):
            return None
        return target

    def parse_request(self) -> bool:
        """http.server's parsing, then: a Host that is not a loopback name gets 403 (a page
        on another site that rebinds its domain to 127.0.0.1 reads nothing)."""
        if not super().parse_request():
            return False
        if not loopback_host(self.headers.get("Host")):
            self.send_error(HTTPStatus.FORBIDDEN, "Host is not a loopback name")
            return False
        return True

    def do_HEAD(self):  # noqa: N802
        self._serve(body=False)

    def do_GET(self):  # noqa: N802
        self._serve(body=True)

    def _refuse(self) -> None:
        self.send_error(HTTPStatus.METHOD_NOT_ALLOWED, "read-only")

    do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

    def _serve(self, *, body: bool) -> None:
        if self._index(body=body):
            return
        try:
            target = self._resolve()
        except _BadPath as exc:
            self.send_error(HTTPStatus.BAD_REQUEST, f"malformed path ({exc})")
            return
        if target is None:
            self.send_error(HTTPStatus.NOT_FOUND, "not found")
            return
        size = target.stat().st_size
        start, end = 0, size - 1
        status = HTTPStatus.OK
        wanted = self.headers.get("Range", "")
        if wanted.startswith("bytes=") and "," not in wanted:
            first, _, last = wanted[6:].partition("-")
            try:
                if first:
                    start, end = int(first), int(last) if last else size - 1
                else:
                    start, end = max(0, size - int(last)), size - 1
            except ValueError:
                start, end = 0, size - 1
            else:
                if start >= size or start > end:
                    self.send_response(HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.end_headers()
                    return
                end = min(end, size - 1)
                status = HTTPStatus.PARTIAL_CONTENT
        kind = _TYPES.get(target.suffix.lower()) or mimetypes.guess_type(target.name)[0] \
            or "application/octet-stream"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Cache-Control", "no-cache")
        # No Access-Control-Allow-Origin: the UI links and embeds the media (<video src>,
        # a new tab), which needs none, while a wildcard would let any site read run dirs.
        if status == HTTPStatus.PARTIAL_CONTENT:
            self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.end_headers()
        if not body:
            return
        with open(target, "rb") as handle:
            handle.seek(start)
            left = end - start + 1
            while left > 0:
                chunk = handle.read(min(_CHUNK, left))
                if not chunk:
                    break
                try:
                    self.wfile.write(chunk)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the player stopped reading (a seek): fine
                left -= len(chunk)


    def _index(self, *, body: bool) -> bool:
        """`/runs/` and `/results/`: an index page of the folder's runs, newest first (the
        only listings served); False for any other path."""
        raw = urllib.parse.urlsplit(self.path).path.strip("/")
        if raw not in self.roots:
            return False
        page = index_page(raw, self.roots[raw]).encode("utf-8")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(page)))
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        if body:
            self.wfile.write(page)
        return True


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _seconds_between(start: str | None, end: str | None) -> float | None:
    try:
        return (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))
                ).total_seconds()
    except (TypeError, ValueError):
        return None


def _run_rows(prefix: str, root: Path) -> list[dict]:
    """One row per run under ROOT: film run dirs (manifest.json) or sweep results
    (sweep.json), with what the index shows."""
    rows: list[dict[str, Any]] = []
    if prefix == "runs":
        for manifest_path in root.glob("*/*/manifest.json"):
            data, run = _read_json(manifest_path), manifest_path.parent
            state = ("failed" if data.get("failed") else
                     "completed" if data.get("completed_utc") else "running")
            film = data.get("film") or {}
            rows.append({"dir": run, "what": data.get("prompt") or run.name, "state": state,
                         "seconds": _seconds_between(data.get("created_utc"),
                                                     data.get("completed_utc")),
                         "extra": f"film {film['duration']:.1f} s" if film.get("duration")
                         else "",
                         "links": ["film.mp4", "film.srt", "film.vtt", "poster.png",
                                   "manifest.json"]})
    else:
        for meta_path in root.glob("*/sweep.json"):
            data, run = _read_json(meta_path), meta_path.parent
            state = ("completed" if (run / "report.md").is_file() else
                     "failed" if data.get("failed") else "running")
            what = (f"sweep: {data.get('judge', '?')} judge, conditions "
                    f"{', '.join(map(str, data.get('conditions') or [])) or '?'}, "
                    f"{data.get('rounds', '?')} rounds x {data.get('replicates', '?')} "
                    "replicates")
            rows.append({"dir": run, "what": what, "state": state,
                         "seconds": _seconds_between(data.get("started_utc"),
                                                     data.get("finished_utc")),
                         "extra": "", "links": ["report.md", "metrics.json", "sweep.json"]})
    rows.sort(key=lambda r: r["dir"].name, reverse=True)  # names start with a UTC stamp
    return rows


def index_page(prefix: str, root: Path) -> str:
    """A plain HTML index of the runs under ROOT (served at /<prefix>/), newest first: each
    run's prompt, state, duration and links to the files it has."""
    rows = []
    for row in _run_rows(prefix, Path(root)):
        rel = row["dir"].relative_to(root).as_posix()
        links = " ".join(
            f'<a href="/{prefix}/{urllib.parse.quote(rel)}/{name}">{escape(name)}</a>'
            for name in row["links"] if (row["dir"] / name).is_file())
        seconds = "" if row["seconds"] is None else f"{row['seconds']:.0f} s"
        rows.append(f"<tr><td>{escape(row['dir'].name)}</td><td>{escape(str(row['what']))}"
                    f"</td><td>{escape(row['state'])}</td><td>{seconds}</td>"
                    f"<td>{escape(row['extra'])}</td><td>{links}</td></tr>")
    title = {"runs": "Film runs", "results": "Sweep results"}.get(prefix, prefix)
    body = "\n".join(rows) or '<tr><td colspan="6">nothing here yet</td></tr>'
    return ("<!doctype html><html><head><meta charset=\"utf-8\">"
            f"<title>mythloop: {title}</title></head><body><h1>{title}</h1>"
            f"<p>Newest first, from <code>{escape(str(root))}</code>.</p>"
            "<table border=\"1\" cellpadding=\"4\"><tr><th>run</th><th>prompt</th>"
            "<th>state</th><th>duration</th><th></th><th>files</th></tr>\n"
            f"{body}\n</table></body></html>\n")
class _QuietServer(ThreadingHTTPServer):
    """No traceback on serve's terminal or log for a request that broke a handler (a client
    that hung up mid-answer): the request ends, the server goes on."""

    def handle_error(self, request, client_address) -> None:
        pass


class PreviewServer:
    """A ThreadingHTTPServer on a background thread; `with PreviewServer(...) as s: s.url`."""

    def __init__(self, roots: dict[str, Path] | None = None, *, host: str = "127.0.0.1",
                 port: int = 0, access_log: Path | None = None) -> None:
        self.roots = {k: Path(v).resolve() for k, v in (roots or default_roots()).items()}
        for root in self.roots.values():
            root.mkdir(parents=True, exist_ok=True)
        handler = type("PreviewHandler", (_Handler,), {"roots": self.roots,
                                                       "access_log": access_log})
        self.httpd = _QuietServer((host, port), handler)
        self.httpd.daemon_threads = True
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="preview",
                                        daemon=True)
        self._record: Path | None = None

    def start(self, *, record: bool = False) -> PreviewServer:
        self._thread.start()
        if record:  # tell films of this state folder where to link
            self._record = preview_file()
            write_json_atomic(self._record, {"url": self.url, "pid": os.getpid(),
                                             "roots": {k: str(v) for k, v in self.roots.items()}})
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self._record is not None:
            try:
                if json.loads(self._record.read_text(encoding="utf-8")).get("pid") == os.getpid():
                    self._record.unlink()
            except (OSError, ValueError):
                pass

    def __enter__(self) -> PreviewServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
