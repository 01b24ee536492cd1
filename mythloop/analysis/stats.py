"""95% intervals with the prompt as the unit (docs/statistics.md says why and how well they cover).

A metric at a round is a mean over prompts and replicates: a matrix Y[prompt, replicate]
(NaN where a prompt has no value in a replicate). Its interval accounts for both sources of
variation the sweep has: which prompts were drawn, and the judge's randomness across
replicates (a replicate is a whole run, so it may move every prompt together). One method,
everywhere an interval is drawn (`interval`, `paired_difference`; `mean_interval`,
`summarize` and `difference` are the same method over values that are their own units):

1. Variance of the mean, clustered by prompt, with the replicate (run) component of a
   crossed two-way random-effects layout (prompts x replicates; ANOVA estimates):

       V = s^2(prompt means) / P  +  max(0, MS_rep - MS_resid) / (P R)

   The first term is the clustered standard error of Miller (2024, "Adding Error Bars to
   Evals") and covers prompt sampling plus the judge's noise within a prompt; the second adds
   what replicates share (Field & Welsh 2007 on which variance a cluster resampling does and
   does not see in crossed data; Owen 2007, "The pigeonhole bootstrap"). With 1 replicate
   only the first term exists: the interval then covers prompt variation only, and says so
   (`covers`). Degrees of freedom: P - 1 (see `_combine`).
2. The interval itself, within the metric's range: a bounded metric (rates, hit@k, MRR,
   nDCG in [0, 1]; ranks in [1, 11]; a difference of either in [-w, w]) is rescaled to
   [0, 1] and given a Wilson score interval at its effective sample size m(1 - m) / V (the
   design-effect Wilson interval of Korn & Graubard 1998 and Dean & Pagano 2015), with Korn
   & Graubard's degrees-of-freedom adjustment (the normal quantile times t_{P-1} / t_{N-1},
   N = P x R observations). It stays inside the range by construction and, unlike a
   percentile bootstrap over 38 prompts, holds its coverage at rates near 0 or 1
   (bench/intervals.py measures it). When every value sits at a bound (V = 0) the design
   effect is undefined: for a rate (each observation a 0/1 outcome, so "all hit" is k = N
   of N) the effective size is N (Korn & Graubard's choice); for a graded value (a rank,
   MRR, nDCG) identical values are no spread, at a bound as inside it (three ranks of 1 and
   three of 2 read alike). A metric with no upper bound (a count) gets the t interval cut at
   its lower bound; an unbounded one (a score gap) the t interval.

A rate that is counted rather than averaged over prompts (verdict accuracy: k correct of n
scored verdicts; a trap pair's win rate: k replicates won of n) takes its interval from the
counts (`count_interval`): the pooled k / n with a Wilson score interval at n, divided by the
design effect when the replicates' own rates spread more than n independent outcomes would.

Differences between conditions are paired by prompt (the same prompt ranked under both):
per prompt and replicate when both ran the same replicates (so a replicate shared by both
conditions cancels), else per prompt on each condition's replicate mean, each side's
replicate component added. An interval that cannot be computed has `lo` = `hi` = None and
says why in `why`. Every number is analytic: the same inputs always give the same bytes.

Output of every function: {"mean", "lo", "hi", "n", "method", "n_prompts", "n_replicates",
"covers"[, "why"]}: `n` counts the observations (prompts x replicates).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "CONFIDENCE", "INTERVAL_METHODS",
           "MIN_INTERVAL_N", "COVERS_PROMPTS_ONLY", "Bounds", "bootstrap_mean", "count_interval",
           "difference", "interval", "mean_interval", "paired_difference", "power_mde", "summarize",
           "zero_width"]

CONFIDENCE = 0.95
MIN_INTERVAL_N = 2  # units (prompts, or replicates where they are the unit) for an interval
# Kept for callers of the earlier API (analyze(resamples=, seed=)): the method is analytic.
BOOTSTRAP_RESAMPLES = 0
BOOTSTRAP_SEED = 0
INTERVAL_METHODS = {
    "none": "no interval",
    "wilson-cluster": "Wilson interval at the clustered effective size (prompts x replicates)",
    "t-cluster": "t interval, clustered by prompt (prompts x replicates)",
    "wilson-units": "Wilson interval at the effective size, over replicates",
    "t-units": "t interval over replicates",
    "wilson-counts": "Wilson interval on the counts k of n (design effect over replicates)",
}
COVERS_PROMPTS_ONLY = "prompt variation only (1 replicate: the judge's randomness across " \
                      "replicates is not covered)"
COVERS_BOTH = "prompt variation and the judge's randomness across replicates"
COVERS_UNITS = "variation across replicates"
COVERS_COUNTS = "the counted outcomes, widened when the replicates spread more than they would"
_DIGITS = 12  # rounding keeps metrics.json byte-stable across platforms

Bounds = tuple[float | None, float | None]


def _r(value: float) -> float:
    return round(float(value), _DIGITS)


@lru_cache(maxsize=4096)
def _tq(df: float, p: float = 0.5 + CONFIDENCE / 2) -> float:
    """The t quantile (scipy.special.stdtrit: scipy.stats' own, without importing
    scipy.stats, which costs 1-3 s per process on a busy machine)."""
    from scipy.special import stdtrit  # noqa: PLC0415 (loaded on first use)

    return float(stdtrit(df, p))


def _z() -> float:
    return _tq(math.inf)


def _t_quantile(df: float) -> float:
    return _tq(round(float(df), 6))


# --- step 1: mean, variance, degrees of freedom -------------------------------------------
def _terms(y: np.ndarray) -> tuple[float, list[tuple[float, float]], int, int]:
    """(mean, [(variance term, its df)], prompts, replicates) of a P x R matrix with NaN
    where missing; the terms sum to V. The replicate component comes from the prompts with
    a value in every replicate."""
    rows = ~np.all(np.isnan(y), axis=1)
    y = y[rows]
    p = int(y.shape[0])
    r = int(y.shape[1]) if y.ndim == 2 else 1
    if p == 0:
        return math.nan, [], 0, r
    pm = np.nanmean(y, axis=1)
    mean = float(pm.mean())
    if p < 2:
        return mean, [], p, r
    terms = [(float(pm.var(ddof=1)) / p, float(p - 1))]
    complete = y[~np.any(np.isnan(y), axis=1)]
    pc = int(complete.shape[0])
    if r >= 2 and pc >= 2:
        grand = complete.mean()
        rm, cm = complete.mean(axis=0), complete.mean(axis=1)
        ms_rep = pc * float(((rm - grand) ** 2).sum()) / (r - 1)
        resid = complete - cm[:, None] - rm[None, :] + grand
        ms_res = float((resid ** 2).sum()) / ((pc - 1) * (r - 1))
        if ms_rep > ms_res:  # truncated at 0: a negative estimate is no variance
            terms.append(((ms_rep - ms_res) / (pc * r), float(r - 1)))
    return mean, terms, p, r


def _combine(terms: list[tuple[float, float]]) -> tuple[float, float]:
    """V and its degrees of freedom: those of the prompt term (P - 1). A Satterthwaite df
    over the replicate terms (R - 1 = 2 at 3 replicates) made intervals at 3 replicates about
    1.5 times wider and over-cover (0.97-0.98); with P - 1 they cover 0.93-0.97 without a
    shared replicate effect and 0.93-0.95 with one (bench/intervals.py, docs/statistics.md)."""
    v = sum(t for t, _ in terms)
    return max(v, 0.0), max(terms[0][1], 1.0) if terms else 0.0


# --- step 2: the interval within the range ------------------------------------------------
def _wilson(u: float, v: float, q: float, units: int, proportion: bool = True
            ) -> tuple[float, float]:
    """Wilson score interval for a [0, 1] mean u with variance v at effective size
    u(1-u)/v. With v = 0 there is no spread, except for a rate (PROPORTION) at a bound:
    every one of UNITS 0/1 outcomes alike is a count, k = 0 or n of n, and gets the Wilson
    interval at n."""
    if v <= 0:
        if not proportion or 0 < u < 1:
            return u, u  # every unit gave the same value: no spread
        n = float(units)
    else:
        n = max(u * (1 - u) / v, 1e-12)
    return _wilson_at(u, n, q)


def _wilson_at(u: float, n: float, q: float) -> tuple[float, float]:
    """The Wilson score interval of a share u of n outcomes at quantile q."""
    q2 = q * q
    centre = (u + q2 / (2 * n)) / (1 + q2 / n)
    half = q / (1 + q2 / n) * math.sqrt(max(u * (1 - u), 0.0) / n + q2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _finish(mean: float, terms: list[tuple[float, float]], p: int, r: int, bounds: Bounds,
            *, units: str, covers: str | None = None, proportion: bool = True
            ) -> dict[str, Any]:
    """The summary dict from step 1's output, with step 2's interval."""
    out: dict[str, Any] = {"mean": _r(mean), "lo": None, "hi": None, "n": p * r,
                           "method": "none", "n_prompts": p, "n_replicates": r}
    if units == "replicates":
        out["n_prompts"], out["n_replicates"] = None, p
        out["n"] = p
    if p < MIN_INTERVAL_N or not terms:
        who = "replicate" if units == "replicates" else "prompt"
        out["why"] = f"only {p} {who}{'' if p == 1 else 's'}"  # an interval needs 2
        return out
    v, df = _combine(terms)
    q = _t_quantile(df)
    lo_b, hi_b = bounds
    kind = "units" if units == "replicates" else "cluster"
    if lo_b is not None and hi_b is not None and hi_b > lo_b:
        w = hi_b - lo_b
        u = min(max((mean - lo_b) / w, 0.0), 1.0)
        if kind == "cluster":
            # Korn & Graubard's degrees-of-freedom adjustment of the effective size,
            # n* = n_eff (t_{N-1} / t_df)^2, at the normal quantile: N = P x R observations
            q = _z() * q / _t_quantile(max(p * r - 1, 1))
        # every value at a bound (V = 0): the effective size is the number of observations,
        # Korn & Graubard's choice when the design effect is undefined
        a, b = _wilson(u, v / (w * w), q, p * r if kind == "cluster" else p, proportion)
        out["lo"], out["hi"], out["method"] = _r(lo_b + a * w), _r(lo_b + b * w), f"wilson-{kind}"
    else:
        half = q * math.sqrt(v)
        lo, hi = mean - half, mean + half
        if lo_b is not None:
            lo = max(lo, lo_b)
        if hi_b is not None:
            hi = min(hi, hi_b)
        out["lo"], out["hi"], out["method"] = _r(lo), _r(hi), f"t-{kind}"
    out["df"] = _r(df)
    out["covers"] = covers or (COVERS_UNITS if units == "replicates" else
                               COVERS_BOTH if r >= 2 else COVERS_PROMPTS_ONLY)
    return out


def _matrix(y: Any) -> np.ndarray:
    a = np.asarray(y, dtype=float)
    return a[:, None] if a.ndim == 1 else a


def _proportion(bounds: Bounds, proportion: bool | None) -> bool:
    """Whether a metric is a rate of 0/1 outcomes (given, else: its range is [0, 1])."""
    if proportion is not None:
        return proportion
    return bounds == (0.0, 1.0)


def interval(y: Any, bounds: Bounds = (None, None), *, proportion: bool | None = None
             ) -> dict[str, Any]:
    """Mean of a prompts x replicates matrix (NaN: missing) with its 95% interval.
    PROPORTION: the values are 0/1 outcomes (default: when BOUNDS are [0, 1]); only then do
    values all at a bound get an interval (`_wilson`)."""
    a = _matrix(y)
    if a.size == 0 or np.all(np.isnan(a)):
        raise ValueError("interval needs at least one value")
    mean, terms, p, r = _terms(a)
    return _finish(mean, terms, p, r, bounds, units="prompts",
                   proportion=_proportion(bounds, proportion))


def _diff_bounds(bounds: Bounds) -> Bounds:
    lo, hi = bounds
    if lo is None or hi is None:
        return (None, None)
    return (-(hi - lo), hi - lo)


def paired_difference(treated: Any, baseline: Any, bounds: Bounds = (None, None), *,
                      paired_replicates: bool = True, proportion: bool | None = None
                      ) -> dict[str, Any]:
    """treated - baseline, paired by prompt (rows are the same prompts, in the same order).
    With paired_replicates (both ran the same replicates, columns in the same order) the
    difference is taken per prompt and replicate; else per prompt on each side's replicate
    mean, each side's replicate component added to the variance."""
    t, b = _matrix(treated), _matrix(baseline)
    if t.shape[0] != b.shape[0]:
        raise ValueError("paired_difference needs the same prompts (rows) on both sides")
    both = ~np.all(np.isnan(t), axis=1) & ~np.all(np.isnan(b), axis=1)
    t, b = t[both], b[both]
    if t.shape[0] == 0:
        raise ValueError("paired_difference: no prompt has a value on both sides")
    dbounds = _diff_bounds(bounds)
    prop = _proportion(bounds, proportion)
    if paired_replicates and t.shape == b.shape:
        mean, terms, p, r = _terms(t - b)
        out = _finish(mean, terms, p, r, dbounds, units="prompts", proportion=prop)
        out["pairing"] = "paired by prompt and replicate"
        return out
    d = np.nanmean(t, axis=1) - np.nanmean(b, axis=1)
    mean, terms, p, _ = _terms(d[:, None])
    for side in (t, b):
        _, side_terms, _, _ = _terms(side)
        terms += side_terms[1:]  # the replicate component of each side
    r = min(t.shape[1], b.shape[1])
    out = _finish(mean, terms, p, r, dbounds, units="prompts", proportion=prop)
    out["n"] = int(p * (t.shape[1] + b.shape[1]) / 2) if p else 0
    out["n_replicates"] = [int(t.shape[1]), int(b.shape[1])]
    out["pairing"] = "paired by prompt (replicates unpaired)"
    return out


# --- the same method over values that are their own units ---------------------------------
def mean_interval(values: Sequence[float], bounds: Bounds = (None, None), *,
                  proportion: bool | None = None, **_: Any) -> dict[str, Any]:
    """Mean of independent values (each its own unit, e.g. one value per replicate) with the
    same interval: lo and hi are None below MIN_INTERVAL_N values (`why` says so)."""
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("mean_interval needs at least one value")
    mean, terms, p, _one = _terms(data[:, None])
    return _finish(mean, terms, p, 1, bounds, units="replicates",
                   proportion=_proportion(bounds, proportion))


def count_interval(counts: Mapping[int, tuple[int, int] | None]) -> dict[str, Any] | None:
    """A counted rate, {replicate: (k, n)}: the pooled K / N with a Wilson score interval
    at N (95%, normal quantile), N divided by the design effect when the replicates' own
    rates k/n spread more than N independent outcomes would (the ratio estimator's variance
    over replicates against p(1-p)/N; never below 1). None when nothing was counted."""
    present = {rep: (int(c[0]), int(c[1])) for rep, c in sorted(counts.items())
               if c is not None and int(c[1]) > 0}
    if not present:
        return None
    k = sum(c[0] for c in present.values())
    n = sum(c[1] for c in present.values())
    p = k / n
    deff = 1.0
    if len(present) >= 2 and 0 < p < 1:
        r = len(present)
        v = r / (r - 1) * sum((ni / n) ** 2 * (ki / ni - p) ** 2 for ki, ni in present.values())
        deff = max(1.0, v / (p * (1 - p) / n))
    lo, hi = _wilson_at(p, n / deff, _z())
    return {"mean": _r(p), "lo": _r(lo), "hi": _r(hi), "n": n, "k": k,
            "method": "wilson-counts", "n_prompts": None, "n_replicates": len(present),
            "covers": COVERS_COUNTS, "design_effect": _r(deff),
            "replicates": list(present), "values": [_r(ki / ni) for ki, ni in present.values()],
            "counts": [[ki, ni] for ki, ni in present.values()]}


def bootstrap_mean(values: Sequence[float], bounds: Bounds = (None, None), **_: Any
                   ) -> dict[str, Any]:
    """Earlier name of `mean_interval` (the method is no longer a bootstrap)."""
    return mean_interval(values, bounds)


def zero_width(s: Mapping[str, Any] | None) -> bool:
    """True for an interval of zero width (no spread: never a claim)."""
    return s is not None and bool(s) and s.get("lo") is not None and s.get("lo") == s.get("hi")


def summarize(per_replicate: Mapping[int, float | None], bounds: Bounds = (None, None),
              *, proportion: bool | None = None, **_: Any) -> dict[str, Any] | None:
    """Mean and interval over the replicates that have a value (each replicate its own
    unit: for a number that is not a mean over prompts); None when none has. A rate whose
    replicates each give one 0/1 outcome (a trap pair won or lost) is k of n replicates:
    `count_interval`."""
    present = {rep: v for rep, v in sorted(per_replicate.items()) if v is not None}
    if not present:
        return None
    if _proportion(bounds, proportion) and all(v in (0.0, 1.0) for v in present.values()):
        return count_interval({rep: (int(v), 1) for rep, v in present.items()})
    out = mean_interval(list(present.values()), bounds, proportion=proportion)
    out["replicates"] = list(present)
    out["values"] = [_r(v) for v in present.values()]
    return out


def difference(treated: Mapping[int, float | None], baseline: Mapping[int, float | None],
               bounds: Bounds = (None, None), *, proportion: bool | None = None, **_: Any
               ) -> dict[str, Any] | None:
    """treated - baseline over replicate values (each replicate its own unit): paired by
    replicate when both have the same replicates, else each side's variance added."""
    t = {rep: v for rep, v in treated.items() if v is not None}
    b = {rep: v for rep, v in baseline.items() if v is not None}
    if not t or not b:
        return None
    dbounds = _diff_bounds(bounds)
    prop = _proportion(bounds, proportion)
    if set(t) == set(b):
        out = mean_interval([t[k] - b[k] for k in sorted(t)], dbounds, proportion=prop)
        out["pairing"] = "paired by replicate"
        return out
    tv, bv = np.asarray(list(t.values())), np.asarray(list(b.values()))
    terms = [(float(x.var(ddof=1)) / x.size, float(x.size - 1)) for x in (tv, bv) if x.size > 1]
    n = min(tv.size, bv.size)
    out = _finish(float(tv.mean() - bv.mean()), terms if n >= MIN_INTERVAL_N else [], n, 1,
                  dbounds, units="replicates", proportion=prop)
    out.update({"n_treated": int(tv.size), "n_baseline": int(bv.size), "pairing": "unpaired"})
    return out


# --- power ---------------------------------------------------------------------------------
def power_mde(sd_diff: float | None, n_prompts: int, *, power: float = 0.8,
              replicates: int = 1, largest: float = 2.0) -> dict[str, Any]:
    """Smallest true difference a paired two-sided 95% test over N_PROMPTS detects with
    POWER: (t_{0.975, N-1} + t_{power, N-1}) * sd / sqrt(N), sd the standard deviation of the
    per-prompt differences (replicate means). Without an observed sd (or an observed 0) the
    conservative bound for a difference of two rates, sd = 1 (the largest a [-1, 1]
    difference with mean 0 can have), is used and said. Above LARGEST (the widest the
    difference can be) the run detects no difference at all: `mde` is LARGEST and
    `detects` False."""
    if n_prompts < 2:
        return {"mde": None, "why": f"only {n_prompts} prompt: no test"}
    df = n_prompts - 1
    k = _tq(float(df)) + _tq(float(df), power)
    basis = "observed sd of the per-prompt differences"
    if sd_diff is None or not np.isfinite(sd_diff) or sd_diff <= 0:
        sd_diff, basis = 1.0, "conservative bound sd = 1 (no spread observed)"
    mde = k * sd_diff / math.sqrt(n_prompts)
    return {"mde": _r(min(mde, largest)), "detects": mde <= largest, "sd": _r(sd_diff),
            "n_prompts": n_prompts, "replicates": replicates, "power": power, "basis": basis}
