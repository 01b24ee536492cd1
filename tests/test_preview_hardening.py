"""The preview server against other sites' pages and malformed requests, in a real process.

A page on another site must not read run dirs through the loopback port: no CORS header that
lets it, and no answer to a request whose Host is the page's own (DNS-rebound) domain. A
malformed path gets 400 and leaves no traceback in the server's output.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

from mythloop.preview import loopback_host

SERVER = """
import sys, time
from pathlib import Path
from mythloop.preview import PreviewServer
server = PreviewServer({"runs": Path(sys.argv[1])}).start()
print(server.url, flush=True)
time.sleep(600)
"""


@pytest.fixture()
def preview(tmp_path):
    """A preview server in a process of its own; yields (host, port, stderr path)."""
    runs = tmp_path / "runs"
    (runs / "film").mkdir(parents=True)
    (runs / "film" / "manifest.json").write_text('{"secret": "run data"}', encoding="utf-8")
    errors = tmp_path / "stderr.txt"
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    with open(errors, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", SERVER, str(runs)], env=env,
                                stdout=subprocess.PIPE, stderr=err, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), errors.read_text()
        yield "127.0.0.1", int(url.rsplit(":", 1)[1]), errors
    finally:
        proc.kill()
        proc.wait(timeout=10)
        proc.stdout.close()


def raw_request(host: str, port: int, request: bytes) -> tuple[int, bytes, bytes]:
    """Send REQUEST as-is; (status, header block, body). Status 0: no answer."""
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
    return status, head, body


def get(host: str, port: int, path: bytes, headers: bytes = b"Host: 127.0.0.1\r\n"):
    return raw_request(host, port, b"GET " + path + b" HTTP/1.1\r\n" + headers
                       + b"Connection: close\r\n\r\n")


def test_no_cors_header_for_another_sites_page(preview):
    host, port, _ = preview
    status, head, body = get(host, port, b"/runs/film/manifest.json",
                             b"Host: 127.0.0.1\r\nOrigin: https://evil.example\r\n")
    assert status == 200 and b"run data" in body  # the file is there ...
    assert b"access-control-allow-origin" not in head.lower()  # ... but not for that page


@pytest.mark.parametrize("host_header", [b"evil.example", b"evil.example:8001",
                                         b"127.0.0.1.evil.example", b"10.0.0.5"])
def test_a_host_that_is_not_loopback_is_refused(preview, host_header):
    host, port, _ = preview
    status, _, body = get(host, port, b"/runs/film/manifest.json",
                          b"Host: " + host_header + b"\r\n")
    assert status == 403 and b"run data" not in body


@pytest.mark.parametrize("host_header", [b"127.0.0.1", b"localhost:1234", b"[::1]:80",
                                         b"LOCALHOST"])
def test_loopback_names_are_served(preview, host_header):
    host, port, _ = preview
    status, _, body = get(host, port, b"/runs/film/manifest.json",
                          b"Host: " + host_header + b"\r\n")
    assert status == 200 and b"run data" in body


@pytest.mark.parametrize("path", [b"/runs/%00", b"/runs/film/%00manifest.json",
                                  b"/runs/" + b"a" * 300, b"/runs/" + b"a/" * 2100,
                                  b"/runs/%ff%fe", b"/runs/\xff", b"/runs/film%0a.json"],
                         ids=["nul", "nul-in-name", "long-name", "long-path", "not-utf8",
                              "raw-byte", "newline"])
def test_malformed_paths_get_400_and_no_traceback(preview, path):
    host, port, errors = preview
    status, _, _ = get(host, port, path)
    assert status == 400
    # the server still answers, and said nothing on its stderr
    status, _, body = get(host, port, b"/runs/film/manifest.json")
    assert status == 200 and b"run data" in body
    time.sleep(0.2)  # let a (wrong) traceback reach the file before looking
    assert "Traceback" not in errors.read_text(encoding="utf-8", errors="replace")


def test_loopback_host_rule():
    assert loopback_host(None) and loopback_host("127.0.0.1:8000") and loopback_host("[::1]")
    assert loopback_host("localhost.") and loopback_host("app.localhost:3000")
    assert loopback_host("127.1.2.3")
    assert not loopback_host("127.0.0.1.nip.io") and not loopback_host("attacker.com")
    assert not loopback_host("") and not loopback_host("0.0.0.0")
