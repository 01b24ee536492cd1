"""Router: embedder with a disk cache, and the verdict-blended vectorised ranker."""

from mythloop.router.embedder import Embedder, default_model, get_embedder, model_id_for
from mythloop.router.ranker import BREAKDOWN_KEYS, RankedSkill, Router, full_text, name_text

__all__ = [
    "BREAKDOWN_KEYS", "Embedder", "RankedSkill", "Router", "default_model", "full_text",
    "get_embedder", "model_id_for", "name_text",
]
