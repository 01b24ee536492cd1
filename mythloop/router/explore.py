"""The learning catalog's exploration slot (C4): a skill with little history gets shown.

A learning turn shows the model the top k of the ranking, and only a skill shown can earn a
verdict; a skill the ranking keeps just below the top k (a new skill, one withheld from
learning) would never be judged, so it could never rise. The last slot of the catalog is
therefore filled by Thompson sampling (Thompson 1933; Chapelle and Li 2011) over the skills
ranked k..EXPLORE_WINDOW * k: each candidate's value is drawn from a Gaussian centred on its
score with a spread that shrinks with the verdicts it has,

    draw_i = score_i + sigma * z_i / sqrt(1 + n_i),     z_i ~ N(0, 1), n_i = helpful + harmful

and the best draw takes the slot. A skill judged many times is shown at its rank; one never
judged that ranks close enough is shown now and then, earns verdicts and, if helpful, rises
(if harmful, the agreement rule demotes it after three unanimous HARMFUL verdicts, and its
spread shrinks). Only skills plausible for the prompt compete (within the window of the
ranking, never an archived one). The draws come from a generator seeded by the sweep's
replicate seed, the round and the prompt id, so a rerun or a resume shows the same catalog.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from mythloop.router.ranker import RankedSkill

__all__ = ["EXPLORE_WINDOW", "Exploration", "exploration_rng", "learning_catalog"]

EXPLORE_WINDOW = 3
"""The exploration slot draws from ranks k..EXPLORE_WINDOW * k (k: the catalog's size)."""


@dataclass(frozen=True)
class Exploration:
    """Which catalog slot was exploratory, what it showed and why."""

    slot: int
    """1-based position in the catalog (the last)."""
    skill: str
    rank: int
    """The skill's rank in the ranking."""
    verdicts: int
    draw: float
    displaced: str
    """The skill the ranking alone would have shown in that slot."""
    displaced_verdicts: int
    displaced_draw: float
    sigma: float

    @property
    def reason(self) -> str:
        return (f"slot {self.slot}: {self.skill} (rank {self.rank}, {self.verdicts} verdicts) "
                f"drew {self.draw:.3f} over {self.displaced} (rank {self.slot}, "
                f"{self.displaced_verdicts} verdicts, {self.displaced_draw:.3f}); Thompson draw "
                f"score + {self.sigma:g} * z / sqrt(1 + verdicts)")

    def to_dict(self) -> dict:
        return {**asdict(self), "reason": self.reason}


def exploration_rng(seed: int, round_idx: int, prompt_id: str) -> np.random.Generator:
    """The generator of one prompt's draw in one round: stable across reruns and resumes."""
    digest = hashlib.sha256(f"explore:{seed}:{round_idx}:{prompt_id}".encode()).hexdigest()
    return np.random.default_rng(int(digest[:16], 16))


def learning_catalog(ranked: Sequence[RankedSkill], k: int, sigma: float,
                     rng: np.random.Generator) -> tuple[list[RankedSkill], Exploration | None]:
    """The k skills to show for a learning turn and the exploration that chose the last one
    (None when the ranking's own k-th skill kept it). `ranked` holds the ranking's top
    EXPLORE_WINDOW * k (or more) in rank order."""
    top = list(ranked[:k])
    if sigma <= 0 or k < 1 or len(ranked) <= k:
        return top, None
    cands = [r for r in ranked[k - 1:EXPLORE_WINDOW * k] if r.score > -1.0]  # archived: never
    if len(cands) < 2 or cands[0].rank != k:
        return top, None
    verdicts = np.array([c.helpful + c.harmful for c in cands], dtype=np.float64)
    draws = (np.array([c.score for c in cands])
             + sigma * rng.standard_normal(len(cands)) / np.sqrt(1.0 + verdicts))
    best = int(np.argmax(draws))
    if best == 0:
        return top, None
    chosen = cands[best]
    return top[:k - 1] + [chosen], Exploration(
        slot=k, skill=chosen.name, rank=chosen.rank, verdicts=int(verdicts[best]),
        draw=round(float(draws[best]), 6), displaced=cands[0].name,
        displaced_verdicts=int(verdicts[0]), displaced_draw=round(float(draws[0]), 6),
        sigma=sigma)
