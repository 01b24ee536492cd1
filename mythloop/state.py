"""Point Prefect and the caches at the project-local state folder.

Called before Prefect is imported (by the CLI and by tests), so a user's own
`~/.prefect` profile is never read or written unless they set PREFECT_HOME or
PREFECT_API_URL themselves.
"""

from __future__ import annotations

import os

from mythloop.settings import Settings, get_settings

__all__ = ["prepare_environment"]


def prepare_environment(settings: Settings | None = None) -> Settings:
    settings = settings or get_settings()
    root = settings.state_root
    root.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.prefect_home))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_UI_ENABLED", "true")
    # A temporary server needs 6-14 s on 2 busy cores; Prefect's default wait is shorter.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    # The bundled embedding model loads from site-packages; never reach a hub.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    return settings
