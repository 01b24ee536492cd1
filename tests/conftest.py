"""Shared test setup.

One Prefect test harness (a temporary SQLite-backed API server, ~10 s to start)
serves the whole session; it starts only when a test asks for `prefect_harness`.
Everything mythloop writes goes under a per-session temporary state folder.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

_SESSION_STATE = Path(tempfile.mkdtemp(prefix="mythloop-test-state-"))

# Before anything imports Prefect: keep its home, caches and stores inside the
# test session's own folder, never the user's.
os.environ["MYTHLOOP_STATE_DIR"] = str(_SESSION_STATE)
os.environ["PREFECT_HOME"] = str(_SESSION_STATE / "prefect")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
for _name in ("PREFECT_API_URL", "PREFECT_API_KEY"):
    os.environ.pop(_name, None)
# The fake CLIs in tests/fakes start with `#!/usr/bin/env python3` and some import mythloop:
# they must run on this interpreter (the venv), also when `make test` did not activate it.
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent),
                                      os.environ.get("PATH", "")])

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def state_dir() -> Path:
    return _SESSION_STATE


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for the session, with flow heartbeats off
    (otherwise every flow waits ~1.1 s at exit for its heartbeat thread)."""
    from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
            yield


@pytest.fixture(scope="module")
def embedder():
    """The bundled model's embedder (offline)."""
    from mythloop.router import get_embedder

    return get_embedder()


@pytest.fixture(scope="module")
def catalog():
    """The small test pool (tests/data/pool_small) as a catalog."""
    from mythloop.skills import load_catalog

    return load_catalog(Path(__file__).parent / "data" / "pool_small")
