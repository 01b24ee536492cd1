"""Across replicates: means with percentile-bootstrap 95% intervals, differences, deltas.

Every bootstrap uses its own generator seeded from a fixed seed, so the same
inputs always give the same interval. With one replicate the interval collapses
to the point and `n` says 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "bootstrap_mean", "difference", "summarize"]

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240917
_DIGITS = 12  # rounding keeps metrics.json byte-stable across platforms


def _r(value: float) -> float:
    return round(float(value), _DIGITS)


def _interval(samples: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return _r(lo), _r(hi)


def bootstrap_mean(
    values: list[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """Mean of the values with a percentile-bootstrap 95% interval."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap_mean needs at least one value")
    mean = _r(data.mean())
    if data.size == 1 or np.all(data == data[0]):
        return {"mean": mean, "lo": mean, "hi": mean, "n": int(data.size)}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))
    lo, hi = _interval(data[idx].mean(axis=1))
    return {"mean": mean, "lo": lo, "hi": hi, "n": int(data.size)}


def summarize(
    per_replicate: Mapping[int, float | None],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any] | None:
    """Mean and interval over the replicates that have a value; None when none has."""
    present = {rep: v for rep, v in sorted(per_replicate.items()) if v is not None}
    if not present:
        return None
    out = bootstrap_mean(list(present.values()), resamples=resamples, seed=seed)
    out["replicates"] = list(present)
    out["values"] = [_r(v) for v in present.values()]
    return out


def difference(
    treated: Mapping[int, float | None],
    baseline: Mapping[int, float | None],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any] | None:
    """treated - baseline with a 95% interval: paired by replicate index when both
    conditions have values for the same replicates, else an unpaired bootstrap."""
    t = {rep: v for rep, v in treated.items() if v is not None}
    b = {rep: v for rep, v in baseline.items() if v is not None}
    if not t or not b:
        return None
    if set(t) == set(b):
        diffs = [t[rep] - b[rep] for rep in sorted(t)]
        out = bootstrap_mean(diffs, resamples=resamples, seed=seed)
        out["method"] = "paired"
        return out
    tv, bv = np.asarray([t[k] for k in sorted(t)]), np.asarray([b[k] for k in sorted(b)])
    mean = _r(tv.mean() - bv.mean())
    rng = np.random.default_rng(seed)
    # Resample each condition over its own replicates; a single replicate stays fixed.
    t_means = tv[rng.integers(0, tv.size, size=(resamples, tv.size))].mean(axis=1)
    b_means = bv[rng.integers(0, bv.size, size=(resamples, bv.size))].mean(axis=1)
    lo, hi = _interval(t_means - b_means)
    if tv.size == 1 and bv.size == 1:
        lo = hi = mean
    return {
        "mean": mean,
        "lo": lo,
        "hi": hi,
        "n": int(min(tv.size, bv.size)),
        "n_treated": int(tv.size),
        "n_baseline": int(bv.size),
        "method": "unpaired",
    }
