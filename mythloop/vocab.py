"""The closed vocabularies users choose from, each defined once.

The CLI (its choices and help), the pydantic config / request models (and so the Prefect UI's
"Run" forms, where a Literal renders as a choice list) and the code that acts on them all read
these. Every judge and film backend is a registered model backend (tests/test_backend_registry.py).
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["Judge", "JUDGES", "SIMULATED_JUDGES", "FilmBackend", "FILM_BACKENDS", "Quality",
           "QUALITIES"]

Judge = Literal["simulated", "oracle", "gemini", "claude", "codex", "openai"]
"""Who plays the model in a sweep's learning turns."""
JUDGES: tuple[str, ...] = get_args(Judge)
SIMULATED_JUDGES = frozenset({"simulated", "oracle"})
"""The judges that are simulations (their outputs are labelled as such)."""

FilmBackend = Literal["offline", "replay", "claude", "gemini", "codex", "openai"]
"""The film's model backends."""
FILM_BACKENDS: tuple[str, ...] = get_args(FilmBackend)

Quality = Literal["l", "m", "h", "p", "k"]
"""Manim render quality: l=480p15, m=720p30, h=1080p60, p=1440p60, k=4K."""
QUALITIES: tuple[str, ...] = get_args(Quality)
