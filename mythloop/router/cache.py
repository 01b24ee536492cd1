"""On-disk embedding cache: one SQLite file per model, keyed by sha256 of the text.

SQLite (WAL, busy timeout, INSERT OR IGNORE) makes every write atomic and lets
several processes share the cache without a lock file.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["EmbeddingCache", "text_key"]

_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vec BLOB NOT NULL)"


def text_key(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _safe_file_name(model_id: str) -> str:
    """A file name for a model id that cannot escape the cache folder."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", model_id).strip("._") or "model"
    return f"{stem[:80]}-{hashlib.sha256(model_id.encode()).hexdigest()[:8]}.sqlite"


class EmbeddingCache:
    """Vectors of one model, on disk, shared between threads and processes."""

    def __init__(self, folder: Path, model_id: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / _safe_file_name(model_id)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(_SCHEMA)

    def _conn(self) -> sqlite3.Connection:
        """One connection per thread (sqlite3 connections are not thread-safe)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0)
            conn.execute("PRAGMA busy_timeout = 30000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn = conn
        return conn

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the keys that have one."""
        keys = list(dict.fromkeys(keys))
        found: dict[str, np.ndarray] = {}
        conn = self._conn()
        for start in range(0, len(keys), 500):  # stay under SQLite's variable limit
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = conn.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk)
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        """Store vectors; an existing key is left as it is."""
        if not items:
            return
        rows = [(k, int(v.shape[0]), np.ascontiguousarray(v, np.float32).tobytes()) for k, v in items.items()]
        with self._conn() as conn:  # one transaction
            conn.executemany("INSERT OR IGNORE INTO vectors (key, dim, vec) VALUES (?, ?, ?)", rows)

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM vectors").fetchone()[0])
