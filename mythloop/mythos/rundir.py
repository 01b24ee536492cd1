"""Film run directories (`<runs_root>/mythos/<UTC stamp>-<slug>/`) and their atomic manifest."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from mythloop.fileio import describe_invalid, write_json_atomic
from mythloop.mythos.records import FilmManifest, StageRecord

__all__ = ["slugify", "create_run_dir", "write_json_atomic", "Manifest", "utc_now"]

_SLUG_MAX = 48


def utc_now() -> str:
    """Current UTC time as ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def slugify(prompt: str) -> str:
    """Lowercase a-z0-9 words joined by hyphens, at most 48 chars; 'film' when nothing is left."""
    slug = re.sub(r"[^a-z0-9]+", "-", prompt.replace("\ufeff", "").lower()).strip("-")
    return slug[:_SLUG_MAX].rstrip("-") or "film"


def create_run_dir(runs_root: Path | str, prompt: str) -> Path:
    """Create `<runs_root>/mythos/<YYYYmmdd-HHMMSS>-<slug>/`, suffixed -2, -3... if taken."""
    parent = Path(runs_root).expanduser() / "mythos"
    parent.mkdir(parents=True, exist_ok=True)
    base = f"{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{slugify(prompt)}"
    for attempt in range(1, 1000):
        candidate = parent / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            # mkdir without exist_ok is the atomic claim: two films started in the
            # same second can't both win the same name.
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"could not find a free run directory name under {parent} for {base!r}")


class Manifest:
    """A run's manifest.json: every update is written to disk atomically at once.

    `record` is the typed manifest (mythloop.mythos.records.FilmManifest); `data` is its
    JSON form, as written to disk (exactly the keys that were set).
    """

    FILE_NAME = "manifest.json"

    def __init__(self, run_dir: Path | str, **initial: Any) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / self.FILE_NAME
        self.record = FilmManifest.model_validate(
            {"run_id": self.run_dir.name, "created_utc": utc_now(), "stages": [], **initial})
        self.lock = threading.RLock()
        self.save()

    @classmethod
    def load(cls, run_dir: Path | str) -> Manifest:
        """Reopen an existing run's manifest (for resumed films); a manifest that is not
        valid JSON or not a film manifest raises a one-line ValueError naming it."""
        path = Path(run_dir) / cls.FILE_NAME
        if not path.is_file():
            raise FileNotFoundError(f"no {cls.FILE_NAME} in {run_dir}; is it a film run directory?")
        manifest = cls.__new__(cls)
        manifest.run_dir = Path(run_dir)
        manifest.path = path
        try:
            manifest.record = FilmManifest.model_validate_json(path.read_bytes())
        except ValidationError as exc:
            raise ValueError(f"{path}: not a valid film manifest: {describe_invalid(exc)}"
                             ) from None
        manifest.lock = threading.RLock()
        return manifest

    @property
    def data(self) -> dict[str, Any]:
        """The manifest as JSON data (a copy: change it through update/add_stage/append)."""
        with self.lock:
            return self.record.model_dump(mode="json", exclude_unset=True)

    def save(self) -> None:
        """Write the whole manifest atomically (scenes update it from several threads)."""
        with self.lock:
            write_json_atomic(self.path, self.data)

    def update(self, **fields: Any) -> None:
        """Set top-level fields (each validated by FilmManifest), then save."""
        with self.lock:
            for key, value in fields.items():
                setattr(self.record, key, value)
            self.save()

    def add_stage(self, record: Any) -> None:
        """Append (or replace, by `stage` name) one stage record (a StageRecord or its
        dict), then save."""
        with self.lock:
            new = StageRecord.model_validate(record)
            stages = list(self.record.stages)
            for index, existing in enumerate(stages):
                if new.stage is not None and existing.stage == new.stage:
                    stages[index] = StageRecord.model_validate(
                        {**existing.model_dump(exclude_unset=True),
                         **new.model_dump(exclude_unset=True)})
                    break
            else:
                stages.append(new)
            self.record.stages = stages
            self.save()

    def append(self, key: str, item: Any) -> None:
        """Append to a top-level list (renders, repairs, fallbacks), then save."""
        with self.lock:
            current = getattr(self.record, key, None) or []
            setattr(self.record, key, [*current, item])
            self.save()

    def __getitem__(self, key: str) -> Any:
        return self.data[key]
