"""Verdict-blended skill ranking, vectorised with numpy over all skills.

    final = ( semantic
            + w_lexical * lexical
            + w_count   * count_bonus
            + w_context * (help_match - w_harm * harm_match)
            + w_related * (related_helpful - related_harmful) ) * status_mult

C3 matches each skill's 3 newest past prompts per polarity and has no lexical term. C4 adds
`w_lexical * lexical` (BM25 over name + description, the best skill scoring 1), takes
help_match as the cosine with the skill's *prototype* (the mean of its kept helpful prompts
and c4_prior copies of its name+description vector, renormalised: a skill with no history
is matched against its description, on the same scale as one with history) and harm_match
as the best match among its kept harmful prompts, and weights the context terms with
c4_w_context (docs/blend.md, "Cold skills").

archived forces final = -1.0; blend off gives final = semantic.

The agreement rule (condition C4, docs/blend.md) keeps that formula and the stored
counters but asks for agreement before it demotes: with theta ~ Beta(a0 + harmful,
b0 + helpful), a skill is *credibly harmful* when P(theta > 1/2) >= kappa. Only then do
its demoting terms count (the negative part of count_bonus, harm_match, related_harmful,
the suspect multiplier and archiving); promoting terms count as in C3. C4 also reads verdicts through a plausibility gate (mythloop/router/plausible.py,
`c4_plausible_rank`): a kept helpful prompt counts in a skill's prototype, and its share of
them in its helpful count, only where the skill ranks within the first few for that prompt on
its own name and description; `c4_max_lift` optionally caps what verdicts add above a
skill's no-verdict score (docs/blend.md, "Defences in C4 and C5"). The per-skill
verdict state is held as arrays and rebuilt from the store whenever its version
changes, which is checked before every ranking: a write is visible to the very
next call (the published run cached it for a whole run).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from mythloop.router.lexical import BM25
from mythloop.router.plausible import Plausibility
from mythloop.router.state import BatchProducts, Dot, VerdictArrays, build_arrays, matvec
from mythloop.settings import Settings, get_settings
from mythloop.skills import Catalog, Skill

if TYPE_CHECKING:
    from mythloop.router.lexical import BM25

__all__ = ["Router", "RankedSkill", "BREAKDOWN_KEYS", "AGREEMENT_PRIOR", "AGREEMENT_CREDIBILITY",
           "harm_credibility", "name_text", "full_text"]

AGREEMENT_PRIOR = (1.0, 1.0)
"""C4: Beta prior pseudo-counts (harmful a0, helpful b0) on a skill's harmful share."""
AGREEMENT_CREDIBILITY = 0.9
"""C4: posterior probability P(harmful share > 1/2) a skill needs before it is demoted."""
C3_CONTEXTS = 3
"""C3: past prompts per skill and polarity its context terms match (the newest)."""

BREAKDOWN_KEYS = (
    "semantic", "lexical", "count_bonus", "help_match", "harm_match",
    "related_helpful", "related_harmful", "status_mult", "final",
)


@dataclass(frozen=True)
class RankedSkill:
    """One ranked skill with its score breakdown, status and counters."""

    name: str
    rank: int
    score: float
    breakdown: dict
    status: str
    helpful: int
    harmful: int
    streak: int
    tier: str | None
    description: str

    def to_dict(self) -> dict:
        """A JSON-ready dict."""
        return asdict(self)


def harm_credibility(helpful, harmful, prior: tuple[float, float] = AGREEMENT_PRIOR) -> np.ndarray:
    """P(theta > 1/2) for theta ~ Beta(a0 + harmful, b0 + helpful), per skill (C4's test)."""
    from scipy.special import betainc  # noqa: PLC0415 (heavy, only for C4's test)

    a = np.asarray(harmful, dtype=np.float64) + float(prior[0])
    b = np.asarray(helpful, dtype=np.float64) + float(prior[1])
    return 1.0 - betainc(a, b, 0.5)  # betainc(a, b, x) = P(theta <= x)


def name_text(name: str) -> str:
    """The text embedded for a skill's name."""
    return name.replace("-", " ")


def full_text(skill: Skill) -> str:
    """The text embedded for a skill's name and description."""
    return f"{name_text(skill.name)}: {skill.description}"


class Router:
    """Ranks a catalog's skills for a query, blending in the store's verdicts."""

    def __init__(self, catalog: Catalog | Sequence[Skill], store, embedder,
                 settings: Settings | None = None, blend: bool | None = None,
                 agreement: bool = False, plausibility: Plausibility | None = None) -> None:
        """`agreement=True` applies the C4 rule on top of the blend (module docstring), and
        with it the plausibility gate: `plausibility`, or one built from this embedder
        (C5 passes the base model's, so a tuned model never judges its own evidence)."""
        skills = list(catalog.skills if isinstance(catalog, Catalog) else catalog)
        texts = [full_text(s) for s in skills] + [name_text(s.name) for s in skills]
        vecs = embedder.embed(texts) if skills else np.zeros((0, 0), np.float32)
        n = len(skills)
        self._setup(skills, vecs[:n], vecs[n:], store, embedder, embedder.model_id, settings, blend)
        self.agreement = bool(agreement)
        self.plausibility: Plausibility | None = None
        if self.agreement:
            self.plausibility = plausibility or self.own_plausibility()

    @classmethod
    def from_vectors(cls, skills: Sequence[Skill], full_vecs: np.ndarray, name_vecs: np.ndarray,
                     store, *, model_id: str, embedder=None, settings: Settings | None = None,
                     blend: bool | None = None) -> Router:
        """A router over precomputed normalised vectors (benchmarks, large synthetic pools)."""
        router = cls.__new__(cls)
        router._setup(list(skills), full_vecs, name_vecs, store, embedder, model_id, settings, blend)
        return router

    def _setup(self, skills, full_vecs, name_vecs, store, embedder, model_id, settings, blend) -> None:
        settings = settings or get_settings()
        self.skills = skills
        self.store = store
        self.embedder = embedder
        self.model_id = model_id
        self.blend = settings.eval_blend if blend is None else bool(blend)
        self.agreement = False  # C4's rule (set by the constructor)
        self.agreement_prior = AGREEMENT_PRIOR
        self.agreement_credibility = AGREEMENT_CREDIBILITY
        self.weights = {
            "count": settings.w_count, "context": settings.w_context,
            "harm": settings.w_harm, "related": settings.w_related,
        }
        self.c4_weights = {**self.weights, "context": settings.c4_w_context,
                           "lexical": settings.c4_w_lexical}
        self.weights["lexical"] = 0.0
        self.c4_prototype = bool(settings.c4_prototype)
        self.c4_prior = float(settings.c4_prior)
        self.c4_lexical_learned = bool(settings.c4_lexical_learned)
        self.c4_plausible_rank = int(settings.c4_plausible_rank)
        self.c4_max_lift = float(settings.c4_max_lift)
        self.plausibility = None  # C4's gate (set by the constructor)
        self._protos: tuple[int, np.ndarray] | None = None  # (id of the arrays, prototypes)
        self._credible_of: tuple[VerdictArrays, np.ndarray] | None = None
        self._lexical: BM25 | None = None  # BM25 index, built on first use
        self._lexical_docs: tuple[str, ...] = ()  # the learned prompts it was built with
        self.related_k = max(0, int(settings.related_k))
        self.index = {s.name: i for i, s in enumerate(skills)}
        n = len(skills)
        dim = int(full_vecs.shape[1]) if n else 0
        # One (2n, d) matrix: a single matrix-vector product gives both cosines.
        self._emb = np.ascontiguousarray(np.concatenate([full_vecs, name_vecs]), dtype=np.float32)
        self.dim = dim
        self._lock = threading.Lock()
        self._arrays = VerdictArrays.empty(n, dim)
        self._version: int | None = None

    def own_plausibility(self) -> Plausibility | None:
        """The plausibility gate over this router's own vectors and embedder (None when the
        gate is off, or without an embedder to embed a prompt with)."""
        if self.c4_plausible_rank <= 0 or self.embedder is None or not self.skills:
            return None
        n = len(self.skills)
        return Plausibility([s.name for s in self.skills], [s.description for s in self.skills],
                            self._emb[:n], self._emb[n:], self.embedder,
                            lexical_weight=self.c4_weights["lexical"],
                            max_rank=self.c4_plausible_rank)

    def __len__(self) -> int:
        return len(self.skills)

    @property
    def embedding_bytes(self) -> int:
        """Size of the skills' embedding matrix (name+description and name vectors)."""
        return int(self._emb.nbytes)

    @property
    def state_bytes(self) -> int:
        """Size of the verdict arrays held for ranking."""
        return self._arrays.nbytes

    def refresh(self, force: bool = False) -> VerdictArrays:
        """Rebuild the verdict arrays when the store changed since the last read."""
        if self.store is None:
            return self._arrays
        version = self.store.version()
        if not force and version == self._version:
            return self._arrays
        with self._lock:
            snap = self.store.snapshot()
            self._arrays = build_arrays(snap, self.index, self.dim, self.model_id, self.embedder,
                                        contexts_kept=None if self.agreement else C3_CONTEXTS,
                                        plausible=self.plausibility if self.agreement else None)
            self._version = snap.version
            return self._arrays

    def score_vector(self, qvec: np.ndarray, query: str | None = None) -> dict[str, np.ndarray]:
        """Every breakdown term for every skill, for a normalised query vector (and the query
        text, which the lexical signal needs)."""
        return self._score(qvec, self.refresh() if self.blend else None, query)

    def _lexical_scores(self, query: str, learned: tuple[str, ...] = ()) -> np.ndarray:
        """BM25 of the query over the skills' name + description (+ the prompts each was
        judged helpful for, `learned`), best skill = 1. Rebuilt when `learned` changes."""
        with self._lock:
            if self._lexical is None or learned != self._lexical_docs:
                docs = [f"{name_text(s.name)} {s.description}" for s in self.skills]
                if learned:
                    docs = [f"{d} {extra}" for d, extra in zip(docs, learned, strict=True)]
                self._lexical, self._lexical_docs = BM25(docs), learned
            index = self._lexical
        return index.normalised(query)

    def _prior_prototypes(self, a: VerdictArrays) -> np.ndarray:
        """C4's prototypes with the description prior, built once per verdict-array state."""
        cached = self._protos
        if cached is not None and cached[0] == id(a):
            return cached[1]
        protos = a.help.prior_prototypes(self._emb[:len(self.skills)], self.c4_prior)
        self._protos = (id(a), protos)
        return protos

    def _credible(self, a: VerdictArrays, helpful: np.ndarray) -> np.ndarray:
        """C4's credibly-harmful mask from HELPFUL (the helpful counts the gate let count,
        derived from A alone), computed once per verdict-array state (it depends on the
        counters alone, not on the query)."""
        cached = self._credible_of
        if cached is not None and cached[0] is a:
            return cached[1]
        credible = (harm_credibility(helpful, a.harmful, self.agreement_prior)
                    >= self.agreement_credibility)
        self._credible_of = (a, credible)
        return credible

    def _score(self, qvec: np.ndarray, a: VerdictArrays | None,
               query: str | None = None, dot: Dot = matvec) -> dict[str, np.ndarray]:
        """score_vector with the verdict arrays already read (one store read per ranking);
        `dot` gives every matrix-vector product (from a batch's products: rank_many)."""
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        n = len(self.skills)
        sims = dot(self._emb, q).reshape(2, n) if n else np.zeros((2, 0), np.float32)
        semantic = sims.max(axis=0).astype(np.float64)
        zeros = np.zeros(n)
        if not self.blend:
            return {"semantic": semantic, "lexical": zeros, "count_bonus": zeros, "help_match": zeros,
                    "harm_match": zeros, "related_helpful": zeros, "related_harmful": zeros,
                    "status_mult": np.ones(n), "final": semantic}
        assert a is not None  # the blend reads the verdict arrays
        w = self.c4_weights if self.agreement else self.weights
        if self.agreement and self.c4_prototype and self.c4_prior > 0:
            help_match = dot(self._prior_prototypes(a), q).astype(np.float64)
        elif self.agreement and self.c4_prototype:
            help_match = a.help.prototype_per_skill(q, n, dot)
        else:
            help_match = a.help.max_per_skill(q, n, dot)
        harm_match = a.harm.max_per_skill(q, n, dot)
        learned = a.help_texts if self.agreement and self.c4_lexical_learned else ()
        lexical = (self._lexical_scores(query, learned)
                   if w["lexical"] and query is not None else zeros)
        rel_help, rel_harm = a.related(q, n, self.related_k, dot)
        helpful = a.helpful
        if self.agreement and a.help_share is not None:
            # praise collected where the skill is not plausible is no evidence: the count
            # keeps only the share of its helpful verdicts that the gate let count
            helpful = a.helpful * a.help_share
        total = helpful + a.harmful
        count_bonus = np.where(
            total > 0, ((helpful + 1) / (total + 2) - 0.5) * np.minimum(1.0, total / 10.0), 0.0)
        mult = a.status_mult
        archived = a.archived
        if self.agreement:  # C4: demote only a credibly harmful skill
            credible = self._credible(a, helpful)
            if self.c4_prior > 0:  # the same footing for every skill not credibly harmful
                # Its count bonus leans on the pool's helpful share until its own n reaches
                # 10 (the ramp), as a new skill's prototype leans on its description; and its
                # description counts among its helpful reasons (docs/blend.md, "Cold skills").
                n_all = float(total.sum())
                pooled = float(helpful.sum()) / n_all - 0.5 if n_all else 0.0
                ramp = np.minimum(1.0, total / 10.0)
                count_bonus = np.where(credible, count_bonus,
                                       count_bonus + (1.0 - ramp) * pooled)
                rel_help = np.where(credible, rel_help,
                                    np.maximum(rel_help, sims[0].astype(np.float64)))
                if self.c4_prototype:  # a credibly harmful skill's description counts for nothing
                    help_match = np.where(credible, a.help.prototype_per_skill(q, n, dot),
                                          help_match)
            count_bonus = np.where(credible, count_bonus, np.maximum(count_bonus, 0.0))
            harm_match = np.where(credible, harm_match, 0.0)
            rel_harm = np.where(credible, rel_harm, 0.0)
            mult = np.where(credible, mult, np.maximum(mult, 1.0))
            archived = archived & credible
        final = (semantic + w["lexical"] * lexical + w["count"] * count_bonus
                 + w["context"] * (help_match - w["harm"] * harm_match)
                 + w["related"] * (rel_help - rel_harm)) * mult
        if self.agreement and self.c4_max_lift > 0:
            # what the skill's description earns with no verdicts (C4's terms of a skill
            # without history), and verdicts may add at most c4_max_lift to it
            full = sims[0].astype(np.float64)
            prior = full if self.c4_prior > 0 else zeros
            base = (semantic + w["lexical"] * lexical + w["context"] * prior
                    + w["related"] * full)
            final = np.minimum(final, base + self.c4_max_lift)
        final = np.where(archived, -1.0, final)
        return {"semantic": semantic, "lexical": lexical, "count_bonus": count_bonus,
                "help_match": help_match,
                "harm_match": harm_match, "related_helpful": rel_help, "related_harmful": rel_harm,
                "status_mult": mult, "final": final}

    def rank_vector(self, qvec: np.ndarray, top_k: int | None = 10,
                    query: str | None = None,
                    exclude: Collection[str] | None = None) -> list[RankedSkill]:
        """Rank for a normalised query vector; top_k None or <= 0 returns every skill.
        The query text, when given, feeds the lexical signal. Skills named in `exclude`
        are left out, as if not in the pool (a sweep's skills added at a later round)."""
        a = self.refresh()  # counters and status are reported with the blend off too
        return self._ranked(self._score(qvec, a, query), a, top_k, exclude)

    def rank_many(self, qvecs: np.ndarray, queries: Sequence[str | None],
                  top_k: int | None = 10,
                  exclude: Collection[str] | None = None) -> list[list[RankedSkill]]:
        """rank_vector for each row of `qvecs` (and its query text), every matrix multiplied
        once by all the rows (BatchProducts: the same ranking, a cosine may differ in its
        last float32 bits)."""
        a = self.refresh()
        products = BatchProducts(qvecs)
        return [self._ranked(self._score(products.q[i], a, query, products.dot(i)), a, top_k,
                             exclude)
                for i, query in enumerate(queries)]

    def _ranked(self, terms: dict[str, np.ndarray], a: VerdictArrays, top_k: int | None,
                exclude: Collection[str] | None) -> list[RankedSkill]:
        final = terms["final"]
        n = final.shape[0]
        pool = np.arange(n)
        if exclude:
            gone = [self.index[name] for name in exclude if name in self.index]
            pool = np.setdiff1d(pool, np.asarray(gone, dtype=np.intp))
        m = pool.shape[0]
        k = m if not top_k or top_k <= 0 else min(int(top_k), m)
        if k == 0:
            return []
        sub = final[pool]
        cand = pool[np.argpartition(-sub, k - 1)[:k]] if k < m else pool
        order = cand[np.lexsort((cand, -final[cand]))]  # ties broken by catalog (name) order
        rows = []
        for rank, i in enumerate(order.tolist(), start=1):
            skill = self.skills[i]
            rows.append(RankedSkill(
                name=skill.name, rank=rank, score=float(final[i]),
                breakdown={key: float(terms[key][i]) for key in BREAKDOWN_KEYS},
                status=a.status_name(i), helpful=int(a.helpful[i]), harmful=int(a.harmful[i]),
                streak=int(a.streak[i]), tier=skill.tier, description=skill.description,
            ))
        return rows

    def rank(self, query: str, top_k: int | None = 10,
             exclude: Collection[str] | None = None) -> list[RankedSkill]:
        """Embed the query and rank the catalog for it (less the skills in `exclude`)."""
        if self.embedder is None:
            raise RuntimeError("this router was built from vectors without an embedder; use rank_vector")
        return self.rank_vector(self.embedder.embed_one(query), top_k, query, exclude)


def synthetic_skill(name: str) -> Skill:
    """A placeholder Skill for synthetic pools (benchmarks)."""
    return Skill(name=name, description=f"synthetic skill {name}", body="", path=Path(name), tier=None)
