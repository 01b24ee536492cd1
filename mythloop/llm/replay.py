"""Replay recorded model answers from cassettes (`fixtures/cassettes/<topic-slug>/<key>.json`)."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from mythloop.data import data_path
from mythloop.fileio import write_json_atomic
from mythloop.llm.base import DEFAULT_TIMEOUT, Backend, Completion
from mythloop.llm.errors import BackendError, EmptyOutput, MissingCassette
from mythloop.llm.registry import register_backend

__all__ = ["ReplayBackend", "topic_slug", "cassette_path", "write_cassette"]

log = logging.getLogger(__name__)


def topic_slug(topic: str) -> str:
    """`the heat equation` -> `the-heat-equation` (the contract's slug rule)."""
    return re.sub(r"[^a-z0-9]+", "-", topic.lower()).strip("-")


def cassette_path(cassette_dir: Path, topic: str, key: str) -> Path:
    """Where the recording of `key` for `topic` lives."""
    return Path(cassette_dir) / topic_slug(topic) / f"{key}.json"


def write_cassette(cassette_dir: Path, topic: str, key: str, prompt: str | None, model: str, response: str) -> Path:
    """Record one answer atomically (temp file + rename); returns its path."""
    path = cassette_path(cassette_dir, topic, key)
    record = {
        "topic": topic,
        "key": key,
        "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest() if prompt is not None else None,
        "model": model,
        "recorded_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "response": response,
    }
    return write_json_atomic(path, record)


@register_backend("replay")
class ReplayBackend(Backend):
    """Answers from recordings keyed by topic and step, so editing a charter does not orphan them."""

    name = "replay"

    def __init__(self, topic: str, cassette_dir: str | Path | None = None, model: str | None = None) -> None:
        if not topic_slug(topic):
            raise ValueError(f"replay: topic {topic!r} has no letters or digits to form a cassette folder")
        if cassette_dir is None:
            cassette_dir = data_path("fixtures", "cassettes")
        self.topic = topic
        self.cassette_dir = Path(cassette_dir)
        super().__init__(model or "replay")

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """The recorded response for `key`; warns when the recorded prompt hash differs."""
        if not key:
            raise BackendError("replay: complete() needs key= (the step name, e.g. 'intent')")
        started = time.monotonic()
        path = cassette_path(self.cassette_dir, self.topic, key)
        if not path.is_file():
            raise MissingCassette(
                f"replay: no cassette for key {key!r} of topic {self.topic!r}: {path} is missing; "
                "record it, or use the offline backend"
            )
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            response = record["response"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise BackendError(f"replay: cassette {path} is not a valid recording ({exc})") from exc
        if not isinstance(response, str) or not response.strip():
            raise EmptyOutput(f"replay: cassette {path} holds an empty response")
        recorded = record.get("prompt_sha256")
        sent = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        if recorded and recorded != sent:
            log.warning(
                "replay: prompt for key %r of topic %r differs from the recording (%s); "
                "answering from the recording anyway",
                key, self.topic, path,
            )
        return Completion(
            text=response,
            model=f"replay:{record.get('model') or 'unknown'}",
            elapsed_s=time.monotonic() - started,
            raw=response,
            backend=self.name,
            simulated=False,
        )
