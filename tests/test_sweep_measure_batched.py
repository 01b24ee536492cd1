"""A round's measurement embeds its prompts in one batched model call and ranks them from one
matrix product per block (issue 52), as ranking each prompt on its own does, on the bundled fixtures with a simulated
judge (labelled as such in every output) and the bundled model.
"""

from __future__ import annotations

import pytest

from mythloop.data import data_path
from mythloop.fileio import read_jsonl
from mythloop.router import get_embedder
from mythloop.router.models import ModelStore
from mythloop.skills import load_catalog
from mythloop.sweep import ConditionRun, JudgeOptions, SweepConfig
from mythloop.sweep.config import load_sweep_prompts
from mythloop.sweep.tuned import tune_for_round
from mythloop.verdicts import render_self_eval_contract


def _run(tmp_path, cond: str) -> ConditionRun:
    config = SweepConfig(conditions=[cond], rounds=2, results_dir=tmp_path / "out",
                         judge_options=JudgeOptions(noise=0.2))
    prompts, seed = load_sweep_prompts(config)
    embedder = get_embedder(cache_dir=tmp_path / "embeddings")  # its own, empty cache
    run = ConditionRun(config=config, cond=cond, replicate=1, results_dir=config.results_dir,
                       catalog=load_catalog(data_path("fixtures", "pool")), prompts=prompts,
                       base_seed=seed, embedder=embedder)
    run.open()
    return run


def _one_by_one(run: ConditionRun, round_idx: int) -> dict:
    """(prompt id, rank) -> (skill, score, breakdown) as ranking each prompt alone gives."""
    from mythloop.router.explore import EXPLORE_WINDOW

    k, shown = run.config.learn_top_k, run.config.measure_top_k
    depth = max(shown, EXPLORE_WINDOW * k) if run.explores else shown
    out = {}
    for prompt in run.prompts:
        for r in run.router.rank(prompt.prompt, top_k=depth, exclude=run.absent(round_idx))[:shown]:
            out[(prompt.id, r.rank)] = (r.name, round(r.score, 6),
                                        {key: round(v, 6) for key, v in r.breakdown.items()})
    return out


def _same_as_one_by_one(run: ConditionRun, round_idx: int) -> None:
    """The round file ranks as ranking each prompt alone does: the same skills at the same
    ranks, each figure the same to the 6 decimals kept, give or take one in the last (the
    batch's float32 sums run in another order)."""
    rows = list(read_jsonl(run.round_path(round_idx)))
    got = {(r["prompt_id"], r["rank"]): (r["skill_name"], r["score"], r["breakdown"])
           for r in rows}
    alone = _one_by_one(run, round_idx)
    assert {k: v[0] for k, v in got.items()} == {k: v[0] for k, v in alone.items()}
    for key, (_, score, terms) in got.items():
        assert abs(score - alone[key][1]) <= 2e-6, key
        assert terms.keys() == alone[key][2].keys()
        assert all(abs(terms[t] - alone[key][2][t]) <= 2e-6 for t in terms), key


def test_measure_embeds_prompts_in_one_call_and_ranks_as_one_by_one(tmp_path):
    run = _run(tmp_path, "c4")  # the blend and C4's terms, with verdicts after round 0
    try:
        contract = render_self_eval_contract()
        for round_idx in range(2):
            calls = run.embedder.calls
            measured = run.measure(round_idx)
            assert run.embedder.calls - calls <= 1, "one model call for all the prompts"
            _same_as_one_by_one(run, round_idx)
            if round_idx == 0:
                for row in run.learn_round(0, measured.catalogs, contract):
                    assert row.ok
                assert run.store.verdicts()  # round 1 ranks with verdicts
    finally:
        run.close()


@pytest.mark.slow  # a fine-tune of the real model
def test_a_tuned_round_embeds_everything_in_one_pass_and_ranks_as_one_by_one(tmp_path):
    run = _run(tmp_path, "c5")
    try:
        measured = run.measure(0)
        run.learn_round(0, measured.catalogs, render_self_eval_contract())
        record = tune_for_round(run, 1, ModelStore(tmp_path / "models"))
        assert record["trained"] and run.embedder.model_id == record["model_id"]
        calls = run.embedder.calls
        assert calls <= 1  # skills, names, prompts, stored texts: one pass (0: all cached)
        run.measure(1)
        assert run.embedder.calls == calls  # the measurement found every vector there
        _same_as_one_by_one(run, 1)
    finally:
        run.close()
