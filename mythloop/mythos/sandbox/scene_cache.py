"""Finished scene videos, cached by what they depend on, with the layout record of their render.

A scene video is kept under `<state>/scene-cache/<key>.mp4`, `key` being
`scenes.scene_cache_key` (the scene's code, the header, the quality and the Manim version),
so a rerun renders only the scenes that failed or changed. The layout probe's record of the
render is kept beside it (`<key>.layout.json`), read with the size cap and schema of
`layout_record` and kept as its known fields only, and on a hit the layout verdict is
reached again by today's rules (`layout_frames.judge_record`: the record judged and held
against the cached video's frames). A record that fails the read is not kept: a hit without
one renders again, and the render reports the problem.

A render that failed for its code's own error is kept in its film's run dir instead
(`<run dir>/render/scene-03/failed/<key>.json`, `record_failure`): a resumed film reads it
back rather than render the same failing code again, so the repair that followed gets the
same error text and is reused too. A new film renders it again (the recording of another run
says nothing about this one's sandbox).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mythloop.fileio import copy_file_atomic, write_json_atomic
from mythloop.mythos.sandbox.layout import Finding, PlannedZoom
from mythloop.mythos.sandbox.layout_frames import judge_record
from mythloop.mythos.sandbox.layout_probe import PROBE_VERSION
from mythloop.mythos.sandbox.layout_record import read_record
from mythloop.settings import get_settings

__all__ = ["SceneCache", "record_failure", "recorded_failure"]

FAILURE_BYTES = 1 << 20  # a failed render's record: its message and log tail, well under this
_KEY = re.compile(r"[0-9a-zA-Z_-]{1,128}")


def _failure_path(out_dir: Path | str, key: str) -> Path | None:
    return Path(out_dir) / "failed" / f"{key}.json" if _KEY.fullmatch(key) else None


def record_failure(out_dir: Path | str, key: str, render: dict[str, Any]) -> None:
    """Keep a render that failed for its code's own error in the run's render folder."""
    path = _failure_path(out_dir, key)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, render)


def recorded_failure(out_dir: Path | str, key: str) -> dict[str, Any] | None:
    """The failed render `record_failure` kept for KEY (None: none, or not readable as one);
    the caller validates it."""
    path = _failure_path(out_dir, key)
    try:
        if path is None or path.stat().st_size > FAILURE_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


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

    def layout_record(self, key: str) -> dict | None:
        """The layout record kept with KEY's video (None: none kept, or not readable)."""
        record, problem = read_record(self.root / f"{key}.layout.json")
        return record if problem is None else None

    def get_layout(self, key: str, zooms: list[PlannedZoom] | None = None
                   ) -> list[Finding] | None:
        """The layout verdict of a cached video, judged by today's rules and the scene's
        planned `zooms` (None: no usable record was kept, or an older probe's)."""
        record, problem = read_record(self.root / f"{key}.layout.json")
        if record is None or problem is not None or record["probe_version"] < PROBE_VERSION:
            return None  # an older probe saw less (no samples during animations, no drawings)
        return judge_record(record, None, self.get(key), zooms)

    def put(self, key: str, video: Path | str, *, layout_record: Path | None = None) -> Path:
        self.root.mkdir(parents=True, exist_ok=True)
        if layout_record is not None:
            record, _ = read_record(layout_record)  # bounded; None: nothing worth keeping
            if record is not None:
                # before the video: a hit never lacks the record its render had
                write_json_atomic(self.root / f"{key}.layout.json", record)
        return copy_file_atomic(video, self.path(key))
