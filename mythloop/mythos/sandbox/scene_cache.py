"""Finished scene videos, cached by what they depend on, with the layout record of their render.

A scene video is kept under `<state>/scene-cache/<key>.mp4`, `key` being
`scenes.scene_cache_key` (the scene's code, the header, the quality and the Manim version),
so a rerun renders only the scenes that failed or changed. The layout probe's record of the
render is kept beside it (`<key>.layout.json`) and judged again by today's rules on a hit.
"""

from __future__ import annotations

import json
from pathlib import Path

from mythloop.fileio import copy_file_atomic, write_json_atomic
from mythloop.mythos.sandbox.layout import Finding, PlannedZoom, check_layout
from mythloop.mythos.sandbox.layout_probe import PROBE_VERSION
from mythloop.settings import get_settings

__all__ = ["SceneCache"]


class SceneCache:
    """Finished scene videos by cache key: `<root>/<key>.mp4` (written atomically)."""

    def __init__(self, root: Path | str | None = None) -> None:
        if root is None:
            root = get_settings().state_root / "scene-cache"
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / f"{key}.mp4"

    def get(self, key: str) -> Path | None:
        path = self.path(key)
        return path if path.is_file() and path.stat().st_size > 0 else None

    def get_layout(self, key: str, zooms: list[PlannedZoom] | None = None
                   ) -> list[Finding] | None:
        """The layout check of the probe record kept with a cached video, judged by today's
        rules and the scene's planned `zooms` (None: no record was kept)."""
        try:
            record = json.loads((self.root / f"{key}.layout.json").read_text(encoding="utf-8"))
            if record.get("probe_version", 1) < PROBE_VERSION:
                return None  # an older probe saw less (no samples during animations, their
                # times counted twice)
            return check_layout(record, zooms)
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            return None

    def put(self, key: str, video: Path | str, *, layout_record: Path | None = None) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        if layout_record is not None and layout_record.is_file():
            # before the video: a hit never lacks the record its render had
            write_json_atomic(self.root / f"{key}.layout.json",
                              json.loads(layout_record.read_text(encoding="utf-8")))
        return copy_file_atomic(video, self.path(key))
