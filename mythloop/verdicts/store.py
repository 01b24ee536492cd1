"""SQLite verdict store: verdict log, per-skill counters and status, contexts, reason vectors.

WAL mode and a busy timeout let threads and processes write at once. A verdict
row is unique on (session_id, skill_name, host): a retried write is a no-op, and
counters, contexts and status only change when the row was really inserted, in
the same transaction. Every write that inserts bumps `version`, which the
router checks before each ranking, so no write is ever missed.

Reason and context vectors live here as float32 blobs (tagged with the model id
that made them), not in a separate .npz: one transaction covers the verdict and
its vectors, which a file beside the database could not. `embeddings_path` is
accepted for the settings' sake and kept as an attribute only.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mythloop.verdicts.status import VERDICTS, Counters, apply_verdict

__all__ = ["VerdictStore", "VerdictIn", "VerdictOutcome", "StoreSnapshot", "VectorRow"]

CONTEXTS_KEPT = 20
"""Past prompts kept per skill and polarity (newest first): the router's context terms match a
new prompt against them, so enough are kept to cover a skill's range of uses (docs/blend.md)."""
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta (key, value) VALUES ('version', 0);
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL, skill_name TEXT NOT NULL, host TEXT NOT NULL,
    verdict TEXT NOT NULL, reason TEXT NOT NULL, query TEXT NOT NULL DEFAULT '',
    status_after TEXT NOT NULL, created_at REAL NOT NULL,
    UNIQUE (session_id, skill_name, host));
CREATE TABLE IF NOT EXISTS skills (
    name TEXT PRIMARY KEY, helpful INTEGER NOT NULL, harmful INTEGER NOT NULL,
    streak INTEGER NOT NULL, status TEXT NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS contexts (
    id INTEGER PRIMARY KEY, skill_name TEXT NOT NULL, polarity TEXT NOT NULL,
    query TEXT NOT NULL, model_id TEXT, vec BLOB, created_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS contexts_skill ON contexts (skill_name, polarity);
CREATE TABLE IF NOT EXISTS reasons (
    verdict_id INTEGER PRIMARY KEY, skill_name TEXT NOT NULL, polarity TEXT NOT NULL,
    reason TEXT NOT NULL, model_id TEXT, vec BLOB);
"""


@dataclass(frozen=True)
class VerdictIn:
    """One verdict to record (verdict upper case; vectors optional, normalised float32)."""

    session_id: str
    skill_name: str
    host: str
    verdict: str
    reason: str
    query: str = ""
    reason_vec: np.ndarray | None = None
    query_vec: np.ndarray | None = None
    model_id: str | None = None


@dataclass(frozen=True)
class VerdictOutcome:
    """What a write did: inserted or a duplicate no-op, with counters before and after."""

    skill_name: str
    verdict: str
    inserted: bool
    before: Counters
    after: Counters


@dataclass(frozen=True)
class VectorRow:
    """A stored context or reason: its skill, polarity, text and vector (if any)."""

    skill_name: str
    harmful: bool
    text: str
    model_id: str | None
    vec: np.ndarray | None


@dataclass(frozen=True)
class StoreSnapshot:
    """A consistent read of everything the ranker needs, at one version."""

    version: int
    counters: dict[str, Counters]
    contexts: list[VectorRow]
    reasons: list[VectorRow]


def _blob(vec: np.ndarray | None) -> bytes | None:
    return None if vec is None else np.ascontiguousarray(vec, dtype=np.float32).tobytes()


def _vec(blob: bytes | None) -> np.ndarray | None:
    return None if blob is None else np.frombuffer(blob, dtype=np.float32)


class VerdictStore:
    """Verdicts and per-skill state in one SQLite file, safe across threads and processes."""

    def __init__(self, db_path: Path | str, embeddings_path: Path | str | None = None) -> None:
        self.path = Path(db_path).expanduser().resolve()
        self.embeddings_path = Path(embeddings_path) if embeddings_path else None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        conn = self._conn()
        try:
            conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
        except sqlite3.Error:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _conn(self) -> sqlite3.Connection:
        """One connection per thread and process."""
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            conn.execute("PRAGMA busy_timeout = 60000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the lock up front (no upgrade deadlock)."""
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # --- writes -----------------------------------------------------------------
    def record_verdict(self, item: VerdictIn) -> VerdictOutcome:
        """Record one verdict (see record_verdicts)."""
        return self.record_verdicts([item])[0]

    def record_verdicts(self, items: Iterable[VerdictIn]) -> list[VerdictOutcome]:
        """Record verdicts in one transaction; duplicates of a stored row are no-ops."""
        items = list(items)
        for item in items:
            if item.verdict not in VERDICTS:
                raise ValueError(f"unknown verdict {item.verdict!r}; expected one of {VERDICTS}")
        outcomes: list[VerdictOutcome] = []
        now = time.time()
        with self._transaction() as conn:
            for item in items:
                outcomes.append(self._insert(conn, item, now))
            if any(o.inserted for o in outcomes):
                conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'version'")
        return outcomes

    def _insert(self, conn: sqlite3.Connection, item: VerdictIn, now: float) -> VerdictOutcome:
        """Insert one verdict and apply its effects, inside the caller's transaction."""
        before = self._counters(conn, item.skill_name)
        after = apply_verdict(before, item.verdict)
        cur = conn.execute(
            "INSERT OR IGNORE INTO verdicts (session_id, skill_name, host, verdict, reason, query,"
            " status_after, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (item.session_id, item.skill_name, item.host, item.verdict, item.reason, item.query,
             after.status, now),
        )
        if cur.rowcount == 0:
            return VerdictOutcome(item.skill_name, item.verdict, False, before, before)
        verdict_id = cur.lastrowid
        conn.execute(
            "INSERT INTO skills (name, helpful, harmful, streak, status, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET helpful = excluded.helpful,"
            " harmful = excluded.harmful, streak = excluded.streak, status = excluded.status,"
            " updated_at = excluded.updated_at",
            (item.skill_name, after.helpful, after.harmful, after.streak, after.status, now),
        )
        if item.verdict != "NEUTRAL":
            polarity = item.verdict
            conn.execute(
                "INSERT INTO reasons (verdict_id, skill_name, polarity, reason, model_id, vec)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (verdict_id, item.skill_name, polarity, item.reason, item.model_id, _blob(item.reason_vec)),
            )
            if item.query:
                self._add_context(conn, item, polarity, now)
        return VerdictOutcome(item.skill_name, item.verdict, True, before, after)

    def _add_context(self, conn: sqlite3.Connection, item: VerdictIn, polarity: str, now: float) -> None:
        """Keep the query as a context; only the most recent few per polarity survive."""
        conn.execute(
            "DELETE FROM contexts WHERE skill_name = ? AND polarity = ? AND query = ?",
            (item.skill_name, polarity, item.query),
        )
        conn.execute(
            "INSERT INTO contexts (skill_name, polarity, query, model_id, vec, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (item.skill_name, polarity, item.query, item.model_id, _blob(item.query_vec), now),
        )
        conn.execute(
            "DELETE FROM contexts WHERE skill_name = ? AND polarity = ? AND id NOT IN (SELECT id"
            " FROM contexts WHERE skill_name = ? AND polarity = ? ORDER BY id DESC LIMIT ?)",
            (item.skill_name, polarity, item.skill_name, polarity, CONTEXTS_KEPT),
        )

    @staticmethod
    def _counters(conn: sqlite3.Connection, name: str) -> Counters:
        row = conn.execute(
            "SELECT helpful, harmful, streak, status FROM skills WHERE name = ?", (name,)
        ).fetchone()
        return Counters(*row) if row else Counters()

    # --- reads ------------------------------------------------------------------
    def version(self) -> int:
        """A number that changes whenever a verdict is inserted (by any process)."""
        return int(self._conn().execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0])

    def counters(self, name: str) -> Counters:
        """A skill's counters and status (zeros and active when it has none)."""
        return self._counters(self._conn(), name)

    def verdicts(self, session_id: str | None = None) -> list[dict]:
        """Verdict rows in insertion order, optionally for one session."""
        sql = "SELECT session_id, skill_name, host, verdict, reason, query, status_after FROM verdicts"
        args: tuple = ()
        if session_id is not None:
            sql, args = sql + " WHERE session_id = ?", (session_id,)
        keys = ("session_id", "skill_name", "host", "verdict", "reason", "query", "status_after")
        return [dict(zip(keys, row, strict=True)) for row in self._conn().execute(sql + " ORDER BY id", args)]

    def snapshot(self) -> StoreSnapshot:
        """Counters, contexts and reasons read in one transaction (a consistent version)."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            version = int(conn.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()[0])
            counters = {
                name: Counters(*rest)
                for name, *rest in conn.execute("SELECT name, helpful, harmful, streak, status FROM skills")
            }
            contexts = [
                VectorRow(s, p == "HARMFUL", q, m, _vec(v))
                for s, p, q, m, v in conn.execute(
                    "SELECT skill_name, polarity, query, model_id, vec FROM contexts ORDER BY id")
            ]
            reasons = [
                VectorRow(s, p == "HARMFUL", r, m, _vec(v))
                for s, p, r, m, v in conn.execute(
                    "SELECT skill_name, polarity, reason, model_id, vec FROM reasons ORDER BY verdict_id")
            ]
        finally:
            conn.execute("COMMIT")
        return StoreSnapshot(version, counters, contexts, reasons)
