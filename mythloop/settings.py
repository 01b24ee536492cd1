"""Settings for mythloop, read from the environment (prefix ``MYTHLOOP_``).

The environment names of the two systems mythloop re-builds are accepted as
aliases where they mean the same thing (``MEGA_TRON_STORE``, ``M2M_MODEL``, ...),
so an existing shell setup keeps working.

Everything mythloop writes by default lives in one project-local state folder
(``.mythloop/`` in the working directory): the Prefect home, the embedding
cache, the verdict store and film runs. Nothing touches the user's own Prefect
profile or stores unless a setting points there.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mythloop.settings_model import Settings

__all__ = ["Settings", "get_settings"]

# The model (and pydantic_settings, ~0.3 s to import) loads on the first get_settings() call:
# modules that only hold get_settings (the sweep's config, the film request, whose defaults
# the CLI shows) keep it off the CLI's start-up, so bad input is answered before it loads.
_MODEL = "mythloop.settings_model"


def get_settings(**overrides: Any) -> Settings:
    """Read settings from the environment now (cheap; never cached, so tests can
    change the environment between calls)."""
    return importlib.import_module(_MODEL).Settings(**overrides)


def __getattr__(name: str) -> Any:
    if name == "Settings":
        return importlib.import_module(_MODEL).Settings
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
