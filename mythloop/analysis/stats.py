"""Across replicates: means with 95% intervals, differences, deltas.

One interval method, `mean_interval` (the report, the plots, the Conclusion and any other
caller such as a comparison of two sweeps use it), chosen for honest coverage at the
replicate counts sweeps have:

    n < 3       no interval: `lo` and `hi` are None, `method` "none"
    3 <= n < 10 Student t interval, mean +- t(0.975, n-1) * sd / sqrt(n)   (`method` "t")
    n >= 10     percentile bootstrap, BOOTSTRAP_RESAMPLES resamples       ("bootstrap")

Differences between conditions pair replicates by index (the t or bootstrap interval of the
per-replicate differences); when the replicate sets differ, a Welch t interval (or an
unpaired bootstrap from 10 on each side). A percentile bootstrap over 2-9 values covers far
less than 95% (over two values it is their min-max), hence the t interval below 10. An
interval of zero width (every replicate gave the same value) says nothing about spread and
is never a claim (`zero_width`). Every bootstrap uses its own generator seeded from a fixed
seed, so the same inputs always give the same interval.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "BOOTSTRAP_FROM_N", "MIN_INTERVAL_N",
           "INTERVAL_METHODS", "bootstrap_mean", "mean_interval", "difference", "summarize",
           "zero_width"]

MIN_INTERVAL_N = 3  # no interval below this many replicates
BOOTSTRAP_FROM_N = 10  # the percentile bootstrap from this many; a t interval below
INTERVAL_METHODS = {
    "none": "no interval (fewer than 3 replicates)",
    "t": "Student t interval over replicates",
    "welch-t": "Welch t interval (unpaired replicates)",
    "bootstrap": "percentile bootstrap over replicates",
}
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


def _t95(df: float) -> float:
    from scipy.stats import t  # noqa: PLC0415 (heavy: about 1 s, only for a t interval)

    return float(t.ppf(0.975, df))


def mean_interval(
    values: list[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """Mean of the values with the 95% interval their count allows (see the module doc):
    {"mean", "lo", "hi", "n", "method"}; lo and hi are None below MIN_INTERVAL_N."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("mean_interval needs at least one value")
    mean = _r(data.mean())
    if data.size < MIN_INTERVAL_N:
        return {"mean": mean, "lo": None, "hi": None, "n": int(data.size), "method": "none"}
    if data.size >= BOOTSTRAP_FROM_N:
        return {**bootstrap_mean(values, resamples=resamples, seed=seed), "method": "bootstrap"}
    half = _t95(data.size - 1) * float(data.std(ddof=1)) / np.sqrt(data.size)
    return {"mean": mean, "lo": _r(data.mean() - half), "hi": _r(data.mean() + half),
            "n": int(data.size), "method": "t"}


def zero_width(s: Mapping[str, Any] | None) -> bool:
    """True for an interval of zero width (no spread across replicates: never a claim)."""
    return s is not None and bool(s) and s.get("lo") is not None and s.get("lo") == s.get("hi")


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
    out = mean_interval(list(present.values()), resamples=resamples, seed=seed)
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
    conditions have values for the same replicates (`mean_interval` of the differences),
    else unpaired (Welch t, or a bootstrap of each side from BOOTSTRAP_FROM_N each)."""
    t = {rep: v for rep, v in treated.items() if v is not None}
    b = {rep: v for rep, v in baseline.items() if v is not None}
    if not t or not b:
        return None
    if set(t) == set(b):
        diffs = [t[rep] - b[rep] for rep in sorted(t)]
        out = mean_interval(diffs, resamples=resamples, seed=seed)
        out["pairing"] = "paired"
        return out
    tv, bv = np.asarray([t[k] for k in sorted(t)]), np.asarray([b[k] for k in sorted(b)])
    mean = _r(tv.mean() - bv.mean())
    out = {"mean": mean, "lo": None, "hi": None, "n": int(min(tv.size, bv.size)),
           "n_treated": int(tv.size), "n_baseline": int(bv.size), "method": "none",
           "pairing": "unpaired"}
    if min(tv.size, bv.size) < MIN_INTERVAL_N:
        return out
    if min(tv.size, bv.size) >= BOOTSTRAP_FROM_N:
        rng = np.random.default_rng(seed)
        t_means = tv[rng.integers(0, tv.size, size=(resamples, tv.size))].mean(axis=1)
        b_means = bv[rng.integers(0, bv.size, size=(resamples, bv.size))].mean(axis=1)
        out["lo"], out["hi"] = _interval(t_means - b_means)
        out["method"] = "bootstrap"
        return out
    vt, vb = tv.var(ddof=1) / tv.size, bv.var(ddof=1) / bv.size
    se = float(np.sqrt(vt + vb))
    if se == 0.0:
        out["lo"] = out["hi"] = mean
    else:  # Welch-Satterthwaite degrees of freedom
        df = (vt + vb) ** 2 / (vt ** 2 / (tv.size - 1) + vb ** 2 / (bv.size - 1))
        half = _t95(df) * se
        out["lo"], out["hi"] = _r(tv.mean() - bv.mean() - half), _r(tv.mean() - bv.mean() + half)
    out["method"] = "welch-t"
    return out
