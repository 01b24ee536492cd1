"""Which verdicts count as evidence: a skill's praise for a prompt counts only where the prompt
is plausible for the skill on its own description (C4 and C5's defence against a judge a
skill's description can persuade; docs/blend.md, "Defences").

    Plausibility(skills, embedder, lexical_weight, max_rank)
        .ranks(texts)                 (m, n) rank of every skill for each prompt, 1 = best, by
                                      what its name and description earn alone: the semantic
                                      term (the base model's cosine) + lexical_weight * BM25
        .allows(skill_idx, texts)     bool per (skill, prompt): its rank <= max_rank

An injection buys verdicts, not the words or the meaning of the description it sits in: a
skill praised for a prompt its description is not even in the running for has climbed there
on verdicts, which is the loop a persuaded judge feeds (praise -> shown for more prompts ->
more praise). The ranks are computed with the model and descriptions the gate was built with
(the base model for C5, never a model tuned on verdicts), memoised per prompt text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from mythloop.router.lexical import BM25

__all__ = ["Plausibility", "description_text"]


def description_text(name: str, description: str) -> str:
    """The lexical document of a skill (as the router's BM25 indexes it)."""
    return f"{name.replace('-', ' ')} {description}"


class Plausibility:
    """Each skill's rank for a prompt on its own name and description (module docstring)."""

    def __init__(self, names: Sequence[str], descriptions: Sequence[str], full_vecs: np.ndarray,
                 name_vecs: np.ndarray, embedder, *, lexical_weight: float,
                 max_rank: int) -> None:
        self.n = len(names)
        self.index = {name: i for i, name in enumerate(names)}
        self.max_rank = int(max_rank)
        self.lexical_weight = float(lexical_weight)
        self.embedder = embedder
        self._emb = np.ascontiguousarray(np.concatenate([full_vecs, name_vecs]), np.float32)
        self._bm25 = BM25([description_text(n, d) for n, d in zip(names, descriptions,
                                                                  strict=True)])
        self._ranks: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.max_rank > 0 and self.n > 0

    def scores(self, vecs: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """(m, n) description-only score: max(cos full, cos name) + w * normalised BM25."""
        sims = np.asarray(vecs, np.float32) @ self._emb.T  # (m, 2n)
        semantic = np.maximum(sims[:, :self.n], sims[:, self.n:]).astype(np.float64)
        if self.lexical_weight:
            semantic += self.lexical_weight * np.stack([self._bm25.normalised(t) for t in texts])
        return semantic

    def ranks(self, texts: Sequence[str]) -> np.ndarray:
        """(m, n) int: every skill's rank for each text (1 = the best; ties share the better
        rank), memoised per text."""
        with self._lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self._ranks))
            if todo:
                vecs = np.asarray(self.embedder.embed(todo), np.float32)
                score = self.scores(vecs, todo)
                # rank = 1 + how many skills score strictly higher
                order = np.sort(score, axis=1)[:, ::-1]
                for t, row, sorted_row in zip(todo, score, order, strict=True):
                    self._ranks[t] = 1 + np.searchsorted(-sorted_row, -row, side="left")
            if not texts:
                return np.zeros((0, self.n), np.int64)
            return np.stack([self._ranks[t] for t in texts])

    def allows(self, skill_idx: Sequence[int], texts: Sequence[str]) -> np.ndarray:
        """Per (skill index, prompt text) pair: whether the skill ranks within max_rank for
        the prompt on its description alone (all True when the gate is off)."""
        m = len(texts)
        if not self.enabled or not m:
            return np.ones(m, bool)
        ranks = self.ranks(list(texts))
        return ranks[np.arange(m), np.asarray(skill_idx, np.intp)] <= self.max_rank
