"""Coverage of the report's 95% intervals (mythloop.analysis.stats), measured by simulation.
How it measures: docs/statistics.md, "Coverage (bench/intervals.py)"."""

import numpy as np
from common import part_main
from scipy.special import expit, logit

from mythloop.analysis.stats import interval, paired_difference

PROMPTS = 38
REPLICATES = (1, 3, 5)
RATES = (0.1, 0.5, 0.9)
EFFECTS = (0.0, 1.0)  # logit shift of the treated condition
SD_PROMPT, SD_JUDGE, SD_EFFECT, SD_SHARED = 1.0, 0.5, 0.5, 0.3
SEED = 20240917


def true_rate(mu: float, var: float) -> float:
    """E[expit(N(mu, var))] by Gauss-Hermite quadrature (probabilists' nodes)."""
    x, w = np.polynomial.hermite_e.hermegauss(80)
    return float((w * expit(mu + np.sqrt(var) * x)).sum() / w.sum())


def _outcomes(rng: np.random.Generator, logits: np.ndarray, reps: int, shared: bool
              ) -> np.ndarray:
    noise = rng.normal(0.0, SD_JUDGE, size=(logits.size, reps))
    if shared:
        noise = noise + rng.normal(0.0, SD_SHARED, size=(1, reps))
    return (rng.random((logits.size, reps)) < expit(logits[:, None] + noise)).astype(float)


def coverage(rate: float, reps: int, effect: float, sims: int, *, shared: bool = False,
             seed: int = SEED) -> dict[str, float]:
    """Coverage of the level interval (baseline) and of the paired difference."""
    rng = np.random.default_rng([seed, int(rate * 100), reps, int(effect * 10), int(shared)])
    mu = float(logit(rate))
    extra = SD_SHARED ** 2 if shared else 0.0
    base_var = SD_PROMPT ** 2 + SD_JUDGE ** 2 + extra
    true_level = true_rate(mu, base_var)
    true_diff = true_rate(mu + effect, base_var + SD_EFFECT ** 2) - true_level
    level_hits = diff_hits = 0
    widths = []
    for _ in range(sims):
        a = rng.normal(mu, SD_PROMPT, size=PROMPTS)
        y0 = _outcomes(rng, a, reps, shared)
        y1 = _outcomes(rng, a + effect + rng.normal(0, SD_EFFECT, PROMPTS), reps, shared)
        s = interval(y0, (0.0, 1.0))
        d = paired_difference(y1, y0, (0.0, 1.0))
        level_hits += s["lo"] is not None and s["lo"] <= true_level <= s["hi"]
        diff_hits += d["lo"] is not None and d["lo"] <= true_diff <= d["hi"]
        if d["lo"] is not None:
            widths.append(d["hi"] - d["lo"])
    return {"level": level_hits / sims, "difference": diff_hits / sims,
            "true_level": true_level, "true_difference": true_diff,
            "difference_width": float(np.mean(widths)) if widths else float("nan")}


def alternatives(rate: float, reps: int, sims: int, *, resamples: int = 1000,
                 seed: int = SEED) -> dict[str, float]:
    """Coverage of the level by the methods not chosen (docs/statistics.md), on the same sweeps."""
    from scipy.stats import t

    rng = np.random.default_rng([seed, int(rate * 100), reps, 99])
    mu = float(logit(rate))
    truth = true_rate(mu, SD_PROMPT ** 2 + SD_JUDGE ** 2)
    boot = tcl = trep = outside = 0
    for _ in range(sims):
        y = _outcomes(rng, rng.normal(mu, SD_PROMPT, size=PROMPTS), reps, False)
        pi = rng.integers(0, PROMPTS, size=(resamples, PROMPTS))
        ri = rng.integers(0, reps, size=(resamples, PROMPTS, reps))
        means = y[pi[:, :, None], ri].mean(axis=(1, 2))
        lo, hi = np.percentile(means, [2.5, 97.5])
        boot += lo <= truth <= hi
        pm = y.mean(axis=1)
        half = t.ppf(0.975, PROMPTS - 1) * pm.std(ddof=1) / np.sqrt(PROMPTS)
        tcl += pm.mean() - half <= truth <= pm.mean() + half
        outside += pm.mean() - half < 0 or pm.mean() + half > 1
        if reps >= 3:
            rm = y.mean(axis=0)
            h = t.ppf(0.975, reps - 1) * rm.std(ddof=1) / np.sqrt(reps)
            trep += rm.mean() - h <= truth <= rm.mean() + h
    return {"percentile bootstrap": float(boot / sims), "t over prompts": float(tcl / sims),
            "t over prompts, share outside [0, 1]": float(outside / sims),
            "t over replicate means": float(trep / sims) if reps >= 3 else None}


def table(sims: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for rate in RATES:
        for reps in REPLICATES:
            for effect in EFFECTS:
                c = coverage(rate, reps, effect, sims)
                if effect == EFFECTS[0]:
                    out[f"level rate={rate} reps={reps}"] = c["level"]
                out[f"difference effect={effect:+g} rate={rate} reps={reps}"] = c["difference"]
        for reps in (3, 5):  # judge noise shared by a replicate's prompts
            c = coverage(rate, reps, EFFECTS[-1], sims, shared=True)
            out[f"shared level rate={rate} reps={reps}"] = c["level"]
            out[f"shared difference effect={EFFECTS[-1]:+g} rate={rate} reps={reps}"] = \
                c["difference"]
    return out


def run(sims: int = 4000) -> dict:
    """Coverage per shape (`sims` simulated sweeps each), against the goal 0.93-0.97."""
    if sims < 1:
        raise SystemExit("intervals: sims must be at least 1")
    cov = table(sims)
    others = {f"rate={rate} reps={reps}": alternatives(rate, reps, max(sims // 4, 50))
              for rate in RATES for reps in REPLICATES}
    within = {k: 0.93 <= v <= 0.97 for k, v in cov.items()}
    return {"coverage": cov, "nominal": 0.95, "goal": [0.93, 0.97],
            "all_within_goal": all(v for k, v in within.items() if not k.startswith("shared")),
            "shared_within_goal": all(v for k, v in within.items() if k.startswith("shared")),
            "lowest": min(cov, key=cov.get), "highest": max(cov, key=cov.get),
            "not_chosen_level_coverage": others, "sims": sims, "prompts": PROMPTS,
            "sd": {"prompt": SD_PROMPT, "judge": SD_JUDGE, "effect": SD_EFFECT,
                   "shared": SD_SHARED}}


if __name__ == "__main__":  # the harness runs it: python bench/intervals.py [--set sims=400]
    part_main("intervals")
