"""The interval method (mythloop.analysis.stats): the prompt as the unit, inside the metric's
range, from 1 replicate, paired by prompt, and calibrated (a small run of bench/intervals.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mythloop.analysis.stats import (
    count_interval,
    difference,
    interval,
    mean_interval,
    paired_difference,
    power_mde,
    summarize,
    zero_width,
)

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _binary(rng, rate: float, prompts: int, reps: int) -> np.ndarray:
    p = 1 / (1 + np.exp(-rng.normal(np.log(rate / (1 - rate)), 1.0, size=prompts)))
    return (rng.random((prompts, reps)) < p[:, None]).astype(float)


@pytest.mark.parametrize("rate", [0.02, 0.1, 0.5, 0.9, 0.98])
@pytest.mark.parametrize("reps", [1, 3])
def test_rates_and_their_differences_stay_in_range(rate, reps):
    rng = np.random.default_rng([int(rate * 100), reps])
    for _ in range(20):
        y0, y1 = _binary(rng, rate, 38, reps), _binary(rng, 1 - rate, 38, reps)
        s = interval(y0, (0.0, 1.0))
        assert 0.0 <= s["lo"] <= s["mean"] <= s["hi"] <= 1.0
        d = paired_difference(y1, y0, (0.0, 1.0))
        assert -1.0 <= d["lo"] <= d["mean"] <= d["hi"] <= 1.0
        assert (s["n"], s["n_prompts"], s["n_replicates"]) == (38 * reps, 38, reps)


def test_ranks_stay_within_1_and_11():
    ranks = np.array([[1.0], [1.0], [11.0], [2.0], [1.0]])
    s = interval(ranks, (1.0, 11.0))
    assert 1.0 <= s["lo"] < s["mean"] < s["hi"] <= 11.0


@pytest.mark.parametrize("rank", [1.0, 2.0, 11.0])
def test_identical_ranks_have_no_spread_at_a_bound_as_inside(rank):
    """Three replicates that all ranked a skill 1st read as three that all ranked it 2nd:
    no spread (the 1s once got [1.00, 9.61], the 2s none)."""
    s = summarize({1: rank, 2: rank, 3: rank}, (1.0, 11.0))
    assert zero_width(s) and s["lo"] == s["hi"] == s["mean"] == rank
    m = interval(np.full((10, 3), rank), (1.0, 11.0))
    assert zero_width(m) and m["lo"] == rank
    # a rate all at a bound is a count (30 of 30 hit): it keeps an interval
    hits = interval(np.ones((10, 3)), (0.0, 1.0))
    assert hits["hi"] == 1.0 and 0.8 < hits["lo"] < 1.0


def _wilson_reference(k: int, n: int) -> tuple[float, float]:
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(ci.low), float(ci.high)


def test_a_counted_rate_takes_its_interval_from_its_counts():
    """77 of 77 verdicts right over 3 replicates is 77 of 77 (not [0.139, 1.000], the
    Wilson interval of 3 replicates at a t quantile with 2 df); a trap pair won in 3 of 3
    replicates is 3 of 3."""
    s = count_interval({1: (26, 26), 2: (25, 25), 3: (26, 26)})
    assert (s["k"], s["n"], s["method"]) == (77, 77, "wilson-counts")
    assert (s["lo"], s["hi"]) == pytest.approx(_wilson_reference(77, 77), abs=1e-9)
    assert s["lo"] > 0.95
    won = summarize({1: 1.0, 2: 1.0, 3: 1.0}, (0.0, 1.0))
    assert (won["k"], won["n"]) == (3, 3)
    assert (won["lo"], won["hi"]) == pytest.approx(_wilson_reference(3, 3), abs=1e-9)
    some = count_interval({1: (7, 20), 2: (6, 20), 3: (8, 20)})
    assert (some["lo"], some["hi"]) == pytest.approx(_wilson_reference(21, 60), abs=1e-9)
    assert count_interval({1: (0, 0)}) is None and count_interval({}) is None


def test_replicates_that_disagree_widen_a_counted_rate():
    alike = count_interval({1: (10, 20), 2: (10, 20), 3: (10, 20)})
    apart = count_interval({1: (1, 20), 2: (10, 20), 3: (19, 20)})
    assert alike["mean"] == apart["mean"] == 0.5
    assert apart["design_effect"] > 5 and alike["design_effect"] == 1.0
    assert apart["hi"] - apart["lo"] > 2 * (alike["hi"] - alike["lo"])


def test_one_replicate_covers_prompts_only_and_says_so():
    y = np.array([[1.0], [0.0], [1.0], [1.0], [0.0], [1.0]])
    s = interval(y, (0.0, 1.0))
    assert s["lo"] is not None and "prompt variation only" in s["covers"]
    assert "judge" in interval(np.tile(y, (1, 3)), (0.0, 1.0))["covers"]


def test_no_interval_says_why():
    s = interval(np.array([[1.0, 0.0, 1.0]]), (0.0, 1.0))  # one prompt
    assert s["lo"] is None and s["hi"] is None and s["why"] == "only 1 prompt"
    one = mean_interval([0.4])
    assert one["lo"] is None and one["why"] == "only 1 replicate"
    assert summarize({1: None}) is None and difference({1: None}, {1: 0.2}) is None


def test_a_shared_replicate_effect_widens_the_interval():
    """A replicate that moved every prompt together is variance the prompt means alone
    would miss: the replicate component adds it."""
    rng = np.random.default_rng(7)
    base = rng.random((38, 1)) * 0.5
    noise = rng.normal(0, 0.02, size=(38, 3))
    shared = base + noise + np.array([[0.0, 0.2, 0.4]])
    independent = base + noise
    w_shared = np.diff([interval(shared)[k] for k in ("lo", "hi")])[0]
    w_indep = np.diff([interval(independent)[k] for k in ("lo", "hi")])[0]
    assert w_shared > 1.5 * w_indep


def test_pairing_by_prompt_narrows_the_difference():
    rng = np.random.default_rng(3)
    prompt = rng.random(38)
    y0 = (rng.random((38, 3)) < prompt[:, None]).astype(float)
    y1 = (rng.random((38, 3)) < np.clip(prompt + 0.15, 0, 1)[:, None]).astype(float)
    paired = paired_difference(y1, y0, (0.0, 1.0))
    # the same data with the prompts shuffled on one side: no pairing left
    unpaired = paired_difference(y1[rng.permutation(38)], y0, (0.0, 1.0))
    assert paired["hi"] - paired["lo"] < unpaired["hi"] - unpaired["lo"]
    assert paired["pairing"] == "paired by prompt and replicate"
    mixed = paired_difference(y1[:, :2], y0, (0.0, 1.0))
    assert mixed["pairing"] == "paired by prompt (replicates unpaired)"
    assert mixed["n_replicates"] == [2, 3]


def test_no_spread_is_zero_width_and_deterministic():
    same = np.tile(np.array([[1.0], [0.0], [1.0]]), (1, 3))
    d = paired_difference(same, same, (0.0, 1.0))
    assert zero_width(d) and d["mean"] == 0
    y = _binary(np.random.default_rng(1), 0.3, 38, 3)
    assert interval(y, (0.0, 1.0)) == interval(y.copy(), (0.0, 1.0))


def test_values_as_units_use_the_same_method():
    s = mean_interval([0.2, 0.4, 0.6], (0.0, 1.0))
    assert s["method"] == "wilson-units" and 0.0 <= s["lo"] < 0.4 < s["hi"] <= 1.0
    counts = mean_interval([0.0, 1.0, 0.0], (0.0, None))
    assert counts["method"] == "t-units" and counts["lo"] == 0.0  # cut at the lower bound
    d = difference({1: 0.5, 2: 0.7, 3: 0.4}, {1: 0.4, 2: 0.5, 3: 0.4}, (0.0, 1.0))
    assert d["pairing"] == "paired by replicate" and -1.0 <= d["lo"] < 0.1 < d["hi"] <= 1.0
    unpaired = difference({1: 0.5, 2: 0.7, 3: 0.9}, {1: 0.4, 2: 0.5, 4: 0.3}, (0.0, 1.0))
    assert unpaired["pairing"] == "unpaired" and unpaired["lo"] < 0.3 < unpaired["hi"]


def test_power_shrinks_with_prompts_and_falls_back_to_a_bound():
    small, large = power_mde(0.4, 10), power_mde(0.4, 100)
    assert large["mde"] < small["mde"] and large["detects"]
    # (t.975 + t.80) * sd / sqrt(N) at N = 100
    assert large["mde"] == pytest.approx((1.984217 + 0.845230) * 0.4 / 10, rel=1e-4)
    assert "conservative" in power_mde(None, 38)["basis"]
    assert power_mde(1.0, 3, largest=1.0)["detects"] is False


def _bench():
    sys.path.insert(0, str(BENCH))
    try:
        import intervals as bench
    finally:
        sys.path.remove(str(BENCH))
    return bench


def test_coverage_small_run_and_broken_methods_fail_it():
    """A few hundred simulated sweeps (bench/intervals.py, seeded): the method covers near
    95% at 1 and 3 replicates, also when a replicate moves every prompt together; on those
    same sweeps, a method that ignores the replicate level (every prompt x replicate an
    independent observation) under-covers, and a t interval over the 3 replicate means (the
    earlier method) is far wider and leaves [0, 1]."""
    from scipy.stats import t

    bench = _bench()
    for reps in (1, 3):
        c = bench.coverage(0.1, reps, 1.0, 300, seed=11)
        assert 0.91 <= c["level"] <= 0.99 and 0.91 <= c["difference"] <= 0.99, c
    mu = np.log(0.5 / 0.5)
    truth = bench.true_rate(mu, bench.SD_PROMPT ** 2 + bench.SD_JUDGE ** 2 +
                            bench.SD_SHARED ** 2)
    rng = np.random.default_rng(5)
    ours = naive = 0
    widths_ours, widths_t, outside = [], [], 0
    for _ in range(400):
        y = bench._outcomes(rng, rng.normal(mu, bench.SD_PROMPT, 38), 3, True)
        s = interval(y, (0.0, 1.0))
        ours += s["lo"] <= truth <= s["hi"]
        flat = interval(y.reshape(-1, 1), (0.0, 1.0))
        naive += flat["lo"] <= truth <= flat["hi"]
        means = y.mean(axis=0)
        half = t.ppf(0.975, 2) * means.std(ddof=1) / np.sqrt(3)
        widths_ours.append(s["hi"] - s["lo"])
        widths_t.append(2 * half)
        outside += means.mean() - half < 0 or means.mean() + half > 1
    assert ours / 400 >= 0.91 and naive / 400 < 0.91, (ours, naive)
    assert np.mean(widths_t) > 1.3 * np.mean(widths_ours)
    rng = np.random.default_rng(6)
    for _ in range(200):  # near a bound the t interval leaves the range
        y = bench._outcomes(rng, rng.normal(np.log(0.05 / 0.95), 1.0, 38), 3, True)
        means = y.mean(axis=0)
        half = t.ppf(0.975, 2) * means.std(ddof=1) / np.sqrt(3)
        outside += means.mean() - half < 0
    assert outside > 0
