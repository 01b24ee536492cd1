"""The store's verdict state as numpy arrays aligned with a router's skills."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from mythloop.verdicts.status import STATUSES
from mythloop.verdicts.store import StoreSnapshot, VectorRow

__all__ = ["Groups", "VerdictArrays", "build_arrays", "Dot", "matvec", "BatchProducts"]

Dot = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""`dot(matrix, q)`: the matrix's rows times the query vector q."""


def matvec(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    """One query: a matrix-vector product."""
    return matrix @ q


class BatchProducts:
    """The products for a batch of query vectors, each matrix multiplied once by all of them.

    One (queries x rows) product per matrix in place of one matrix-vector product per query:
    a 4,000-skill router spent ~20 ms a query in the vector products alone on a loaded 2-core
    machine, ~0.5 ms a query in the batched one. `dot(i)` is query i's `Dot`. The float32 sums
    run in another order (BLAS's matrix-matrix kernel), so a cosine can differ from the
    matrix-vector one in its last bits (measured: at most 3e-7).
    """

    def __init__(self, qvecs: np.ndarray) -> None:
        self.q = np.ascontiguousarray(qvecs, dtype=np.float32)
        self._done: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _of(self, matrix: np.ndarray) -> np.ndarray:
        hit = self._done.get(id(matrix))
        if hit is None or hit[0] is not matrix:  # the matrix is kept: its id stays its own
            hit = (matrix, np.ascontiguousarray(self.q @ matrix.T))
            self._done[id(matrix)] = hit
        return hit[1]

    def dot(self, i: int) -> Dot:
        return lambda matrix, _q: self._of(matrix)[i]

_MULT = np.array([1.0, 0.5, 0.0])  # active, suspect, archived (archived is forced to -1.0)


@dataclass(frozen=True)
class Groups:
    """Vectors grouped by skill (sorted), for a per-skill max of cosines."""

    vecs: np.ndarray  # (m, d) float32, rows of one skill contiguous
    starts: np.ndarray  # (g,) first row of each group
    skills: np.ndarray  # (g,) skill index of each group
    protos: np.ndarray  # (g, d) float32: each group's mean vector, renormalised (its prototype)
    sums: np.ndarray | None = None  # (g, d) float32: each group's sum of vectors

    @classmethod
    def build(cls, skill_idx: Sequence[int], vecs: Sequence[np.ndarray], dim: int) -> Groups:
        """Group vectors by skill index."""
        if not len(skill_idx):
            empty = np.zeros((0, dim), np.float32)
            return cls(empty, np.zeros(0, np.intp), np.zeros(0, np.intp), empty, empty)
        idx = np.asarray(skill_idx, dtype=np.intp)
        order = np.argsort(idx, kind="stable")
        idx = idx[order]
        mat = np.ascontiguousarray(np.stack(vecs)[order], dtype=np.float32)
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        sums = np.add.reduceat(mat, starts, axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        protos = np.ascontiguousarray(sums / np.maximum(norms, 1e-12), dtype=np.float32)
        return cls(mat, starts, idx[starts], protos, np.ascontiguousarray(sums, np.float32))

    def prototype_per_skill(self, q: np.ndarray, n: int, dot: Dot = matvec) -> np.ndarray:
        """Cosine of q with each skill's prototype (the mean of its vectors, renormalised);
        0 for skills without vectors."""
        out = np.zeros(n)
        if self.protos.shape[0]:
            out[self.skills] = dot(self.protos, q)
        return out

    def prior_prototypes(self, prior_vecs: np.ndarray, prior: float) -> np.ndarray:
        """(n, d) prototypes with a prior: each skill's sum of vectors plus `prior` copies of
        its row of `prior_vecs`, renormalised. A skill without vectors gets its prior vector
        (its description), one with many is led by them (prior 0: zero rows without)."""
        out = prior * np.asarray(prior_vecs, dtype=np.float32)
        if self.protos.shape[0]:
            assert self.sums is not None
            out[self.skills] += self.sums
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.ascontiguousarray(out / np.maximum(norms, 1e-12), dtype=np.float32)

    def max_per_skill(self, q: np.ndarray, n: int, dot: Dot = matvec) -> np.ndarray:
        """Highest cosine with q per skill; 0 for skills without vectors."""
        out = np.zeros(n)
        if self.vecs.shape[0]:
            out[self.skills] = np.maximum.reduceat(dot(self.vecs, q), self.starts)
        return out


@dataclass(frozen=True)
class VerdictArrays:
    """Counters, status and context/reason vectors, one entry per skill."""

    helpful: np.ndarray
    harmful: np.ndarray
    streak: np.ndarray
    status_code: np.ndarray
    help: Groups
    harm: Groups
    reason_vecs: np.ndarray  # (r, d)
    reason_skill: np.ndarray  # (r,)
    reason_harmful: np.ndarray  # (r,) bool
    help_texts: tuple[str, ...] = ()
    """Per skill, the kept prompts it was judged helpful for, joined (C4's lexical document)."""
    help_share: np.ndarray | None = None
    """Per skill, the share of its kept helpful prompts that the plausibility gate let count
    (1 where none was kept or no gate was given; mythloop/router/plausible.py)."""

    @classmethod
    def empty(cls, n: int, dim: int) -> VerdictArrays:
        """No verdicts at all."""
        none = Groups.build([], [], dim)
        return cls(np.zeros(n), np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int8),
                   none, none, np.zeros((0, dim), np.float32), np.zeros(0, np.intp),
                   np.zeros(0, bool))

    @property
    def archived(self) -> np.ndarray:
        return self.status_code == 2

    @property
    def status_mult(self) -> np.ndarray:
        return _MULT[self.status_code]

    @property
    def nbytes(self) -> int:
        arrays = (self.helpful, self.harmful, self.streak, self.status_code, self.reason_vecs,
                  self.reason_skill, self.reason_harmful, self.help.vecs, self.harm.vecs,
                  self.help.protos, self.harm.protos)
        return int(sum(a.nbytes for a in arrays)) + sum(len(t) for t in self.help_texts)

    def status_name(self, i: int) -> str:
        return STATUSES[int(self.status_code[i])]

    def related(self, q: np.ndarray, n: int, k: int,
                dot: Dot = matvec) -> tuple[np.ndarray, np.ndarray]:
        """Per skill, the highest cosine among the k reasons nearest q: (helpful, harmful)."""
        r = self.reason_vecs.shape[0]
        if not r or not k:
            return np.zeros(n), np.zeros(n)
        sims = dot(self.reason_vecs, q)
        top = np.argpartition(-sims, k - 1)[:k] if k < r else np.arange(r)
        result = []
        for harmful in (False, True):
            sel = top[self.reason_harmful[top] == harmful]
            out = np.full(n, -np.inf)
            np.maximum.at(out, self.reason_skill[sel], sims[sel].astype(np.float64))
            out[np.isneginf(out)] = 0.0
            result.append(out)
        return result[0], result[1]


def _usable(rows: list[VectorRow], index: dict[str, int], dim: int, model_id: str, embedder):
    """(skill index, harmful, vector, text) for rows of known skills; vectors from another
    model (or missing) are re-embedded from their text when an embedder is at hand."""
    keep = [r for r in rows if r.skill_name in index]
    good = [r.model_id == model_id and r.vec is not None and r.vec.shape[0] == dim for r in keep]
    redo = [r for r, ok in zip(keep, good, strict=True) if not ok]
    fresh = iter(())
    if redo and embedder is not None and embedder.model_id == model_id:
        fresh = iter(embedder.embed([r.text for r in redo]))
    elif redo:
        keep = [r for r, ok in zip(keep, good, strict=True) if ok]
        good = [True] * len(keep)
    return [(index[r.skill_name], r.harmful, r.vec if ok else next(fresh), r.text)
            for r, ok in zip(keep, good, strict=True)]


def _newest(rows: list[VectorRow], keep: int) -> list[VectorRow]:
    """The `keep` newest context rows per skill and polarity (rows come oldest first)."""
    seen: dict[tuple[str, bool], int] = {}
    out = []
    for row in reversed(rows):
        key = (row.skill_name, bool(row.harmful))
        if seen.get(key, 0) < keep:
            seen[key] = seen.get(key, 0) + 1
            out.append(row)
    return out[::-1]


def build_arrays(snap: StoreSnapshot, index: dict[str, int], dim: int, model_id: str,
                 embedder=None, contexts_kept: int | None = None,
                 plausible=None) -> VerdictArrays:
    """Arrays for the skills in `index` from a store snapshot; `contexts_kept` limits the
    contexts to the newest few per skill and polarity. `plausible` (a
    `Plausibility`, C4 and C5) keeps a helpful context only where its prompt is plausible for
    its skill on the skill's own description; `help_share` records the share kept."""
    base = VerdictArrays.empty(len(index), dim)
    codes = {s: i for i, s in enumerate(STATUSES)}
    for name, c in snap.counters.items():
        i = index.get(name)
        if i is not None:
            base.helpful[i], base.harmful[i], base.streak[i] = c.helpful, c.harmful, c.streak
            base.status_code[i] = codes.get(c.status, 0)
    contexts = snap.contexts if contexts_kept is None else _newest(snap.contexts, contexts_kept)
    ctx = _usable(contexts, index, dim, model_id, embedder)
    rsn = _usable(snap.reasons, index, dim, model_id, embedder)
    help_rows = [(i, v, t) for i, h, v, t in ctx if not h]
    share = np.ones(len(index))
    if plausible is not None and help_rows:
        ok = plausible.allows([i for i, _, _ in help_rows], [t for _, _, t in help_rows])
        total = np.bincount([i for i, _, _ in help_rows], minlength=len(index))
        kept = np.bincount([i for (i, _, _), good in zip(help_rows, ok, strict=True) if good],
                           minlength=len(index))
        share = np.where(total > 0, kept / np.maximum(total, 1), 1.0)
        help_rows = [row for row, good in zip(help_rows, ok, strict=True) if good]
    texts: list[list[str]] = [[] for _ in index]
    if plausible is None:
        for row in contexts:
            i = index.get(row.skill_name)
            if i is not None and not row.harmful and row.text:
                texts[i].append(row.text)
    else:  # only the prompts that count as evidence teach words
        for i, _, t in help_rows:
            if t:
                texts[i].append(t)
    harm_rows = [(i, v) for i, h, v, _ in ctx if h]
    return VerdictArrays(
        base.helpful, base.harmful, base.streak, base.status_code,
        Groups.build([i for i, _, _ in help_rows], [v for _, v, _ in help_rows], dim),
        Groups.build([i for i, _ in harm_rows], [v for _, v in harm_rows], dim),
        np.ascontiguousarray(np.stack([v for _, _, v, _ in rsn]), np.float32) if rsn
        else np.zeros((0, dim), np.float32),
        np.array([i for i, _, _, _ in rsn], dtype=np.intp),
        np.array([h for _, h, _, _ in rsn], dtype=bool),
        tuple(" ".join(t) for t in texts),
        share,
    )
