"""The openai backend against a tiny chat-completions server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from mythloop.llm import (
    AuthError,
    BackendTimeout,
    EmptyOutput,
    ModelUnavailable,
    NetworkError,
    RateLimited,
    ServerError,
    get_backend,
    is_retriable,
)


class _Handler(BaseHTTPRequestHandler):
    """Answers by model name: ok-*, auth, busy, broken, missing, garbled."""

    seen: list[dict] = []

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, code: int, body: dict | str) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):  # noqa: N802 (http.server naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Handler.seen.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        model = body["model"]
        err = lambda msg: {"error": {"message": msg, "type": "invalid_request_error"}}  # noqa: E731
        if model == "auth":
            return self._send(401, err("Incorrect API key provided"))
        if model == "busy":
            return self._send(429, err("Rate limit reached for requests"))
        if model == "broken":
            return self._send(500, err("The server had an error"))
        if model == "missing":
            return self._send(404, err("The model `missing` does not exist"))
        if model == "slow":
            time.sleep(3)
            return self._send(200, {"model": model, "choices": [{"message": {"content": "late"}}]})
        if model == "garbled":
            return self._send(200, "<html>proxy</html>")
        if model == "blank":
            return self._send(200, {"model": model, "choices": [{"message": {"role": "assistant", "content": ""}}]})
        user = body["messages"][-1]["content"]
        reply = {"id": "x", "model": f"{model}-2025", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": f"echo: {user}"}}]}
        return self._send(200, reply)


@pytest.fixture(scope="module")
def server_url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def _backend(url, model):
    return get_backend("openai", base_url=url, api_key="sk-test", model=model)


def test_ok_sends_system_and_user_with_key(server_url):
    reply = _backend(server_url, "ok-model").complete("hi there", system="be kind", timeout=10)
    assert reply.text == "echo: hi there"
    assert reply.model == "ok-model-2025" and reply.backend == "openai" and not reply.simulated
    last = _Handler.seen[-1]
    assert last["path"] == "/v1/chat/completions" and last["auth"] == "Bearer sk-test"
    assert last["body"]["messages"] == [{"role": "system", "content": "be kind"},
                                        {"role": "user", "content": "hi there"}]


@pytest.mark.parametrize(
    ("model", "error", "retriable"),
    [("auth", AuthError, False), ("busy", RateLimited, True), ("broken", ServerError, True),
     ("missing", ModelUnavailable, False), ("garbled", EmptyOutput, False), ("blank", EmptyOutput, False)],
)
def test_http_failures_map_to_error_classes(server_url, model, error, retriable):
    with pytest.raises(error) as err:
        _backend(server_url, model).complete("hi", timeout=10)
    assert is_retriable(err.value) is retriable
    assert "\n" not in str(err.value)
    if error is AuthError:
        assert "MYTHLOOP_OPENAI_API_KEY" in str(err.value)


def test_connection_refused_is_network_error():
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(NetworkError):
        _backend(f"http://127.0.0.1:{port}/v1", "ok").complete("hi", timeout=5)


def test_settings_supply_url_and_key(server_url, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_OPENAI_BASE_URL", server_url + "/")
    monkeypatch.setenv("MYTHLOOP_OPENAI_API_KEY", "sk-from-env")
    reply = get_backend("openai", model="ok-env").complete("x", timeout=10)
    assert reply.text == "echo: x" and _Handler.seen[-1]["auth"] == "Bearer sk-from-env"


def test_slow_server_is_a_timeout(server_url):
    with pytest.raises(BackendTimeout) as err:
        _backend(server_url, "slow").complete("hi", timeout=0.5)
    assert is_retriable(err.value) and "0.5s" in str(err.value)
