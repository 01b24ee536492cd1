"""Tuned embedding models as artifacts: content-addressed folders with their lineage.

    <state>/models/ft-<12 hex>/         a sentence-transformers folder (loads offline), plus
        lineage.json                    id, base model, training pairs' fingerprint, settings,
                                        the sweep and round (or promotion run) that made it
        pairs.jsonl                     the training pairs themselves
    <state>/models/current.json         the promoted model (none: the base model)

The id is a hash of the saved weights, so one model has one id wherever it was trained. A
model is written into `.partial-<pid>-<hex>/` and renamed into place only when complete: a
crash or Ctrl-C mid-save leaves no folder under a model id, and the next store opened in the
folder removes partial folders whose process is gone.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mythloop.fileio import write_json_atomic, write_text_atomic

__all__ = ["ModelInfo", "ModelStore", "MODEL_ID_PATTERN", "LINEAGE_FILE"]

LINEAGE_FILE = "lineage.json"
MODEL_ID_PATTERN = re.compile(r"^ft-[0-9a-f]{12}$")
_PARTIAL = ".partial-"
_CURRENT = "current.json"


@dataclass(frozen=True)
class ModelInfo:
    """A saved model: its id, folder and lineage."""

    id: str
    path: Path
    lineage: dict[str, Any]

    def summary(self) -> dict[str, Any]:
        """The lineage's headline keys, JSON-ready (sweep.json, artifacts, `mythloop models`)."""
        keys = ("base_model", "pairs", "pairs_fingerprint", "skills", "settings", "steps",
                "train_seconds", "sweep_id", "condition", "replicate", "round", "source",
                "created_utc")
        return {"model_id": self.id, "path": str(self.path),
                **{k: self.lineage[k] for k in keys if k in self.lineage}}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _weights_digest(folder: Path) -> str:
    """sha256 over the folder's files but the lineage (names and bytes, sorted)."""
    digest = hashlib.sha256()
    for item in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = item.relative_to(folder).as_posix()
        if rel in (LINEAGE_FILE, "pairs.jsonl") or rel.startswith("."):
            continue
        digest.update(rel.encode() + b"\0")
        with open(item, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


class ModelStore:
    """The tuned models under one folder."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()

    # --- reads ------------------------------------------------------------------
    def saved(self) -> list[ModelInfo]:
        """Every complete model, oldest first."""
        if not self.root.is_dir():
            return []
        found = []
        for folder in self.root.iterdir():
            if MODEL_ID_PATTERN.match(folder.name) and (folder / LINEAGE_FILE).is_file():
                try:
                    lineage = json.loads((folder / LINEAGE_FILE).read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                found.append(ModelInfo(folder.name, folder, lineage))
        return sorted(found, key=lambda m: (str(m.lineage.get("created_utc", "")), m.id))

    def get(self, model_id: str) -> ModelInfo | None:
        """The model with this id (or the one model whose id starts with it)."""
        model_id = model_id.strip()
        if not model_id:
            return None
        matches = [m for m in self.saved() if m.id == model_id]
        if not matches and len(model_id) >= 5:
            matches = [m for m in self.saved() if m.id.startswith(model_id)]
        return matches[0] if len(matches) == 1 else None

    def find(self, **lineage: Any) -> ModelInfo | None:
        """The newest model whose lineage has all these values."""
        hits = [m for m in self.saved()
                if all(m.lineage.get(k) == v for k, v in lineage.items())]
        return hits[-1] if hits else None

    def partials(self) -> list[Path]:
        return sorted(self.root.glob(f"{_PARTIAL}*")) if self.root.is_dir() else []

    # --- writes -----------------------------------------------------------------
    def clean_partials(self) -> list[Path]:
        """Remove partial folders whose writing process is gone; returns them."""
        removed = []
        for folder in self.partials():
            try:
                pid = int(folder.name[len(_PARTIAL):].split("-")[0])
            except ValueError:
                pid = -1
            if pid == os.getpid() or (pid > 0 and _pid_alive(pid)):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        return removed

    def save(self, model, lineage: dict[str, Any], pairs: list[dict] | None = None
             ) -> ModelInfo:
        """Save a SentenceTransformer with its lineage; complete or not at all."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.clean_partials()
        tmp = self.root / f"{_PARTIAL}{os.getpid()}-{secrets.token_hex(4)}"
        try:
            model.save(str(tmp))
            model_id = "ft-" + _weights_digest(tmp)[:12]
            record = {**lineage, "model_id": model_id,
                      "created_utc": datetime.now(UTC).isoformat(timespec="seconds")}
            write_text_atomic(tmp / "pairs.jsonl", "".join(
                json.dumps(p, ensure_ascii=False) + "\n" for p in (pairs or [])))
            write_json_atomic(tmp / LINEAGE_FILE, record)
            target = self.root / model_id
            if target.exists():  # the same weights saved before: keep the first
                return self.get(model_id) or ModelInfo(model_id, target, record)
            os.rename(tmp, target)
            return ModelInfo(model_id, target, record)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def remove(self, model_id: str) -> ModelInfo:
        """Delete a model (renamed out of the way first, so it vanishes at once); the
        promoted one is refused (KeyError / ValueError with one line)."""
        info = self.get(model_id)
        if info is None:
            raise KeyError(f"no model {model_id!r} in {self.root}")
        current = self.current_id()
        if current == info.id:
            raise ValueError(f"{info.id} is the promoted model; promote another first")
        gone = self.root / f"{_PARTIAL}{os.getpid()}-{secrets.token_hex(4)}"
        os.rename(info.path, gone)
        shutil.rmtree(gone, ignore_errors=True)
        return info

    # --- promotion ----------------------------------------------------------------
    def current_id(self) -> str | None:
        """The promoted model's id (None: the base model is current)."""
        try:
            data = json.loads((self.root / _CURRENT).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        model_id = data.get("model_id") if isinstance(data, dict) else None
        return model_id if isinstance(model_id, str) and self.get(model_id) else None

    def current(self) -> ModelInfo | None:
        current = self.current_id()
        return self.get(current) if current else None

    def promote(self, model_id: str, decision: dict[str, Any]) -> None:
        """Make a saved model the current one (atomically)."""
        info = self.get(model_id)
        if info is None:
            raise KeyError(f"no model {model_id!r} in {self.root}")
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.root / _CURRENT, {
            "model_id": info.id, "promoted_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "decision": decision})
