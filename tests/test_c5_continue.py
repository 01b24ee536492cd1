"""C5 paying only for what changed (issue 52): with MYTHLOOP_C5_CONTINUE a round after a tuned
one trains the last round's model on the trusted pairs it has not learned, unless a pair it
learned lost the trust; a resumed run finds the same model; off, every round trains the base.
Real fine-tunes of the bundled model on a C5 replicate of the bundled fixtures (simulated
judge)."""

from __future__ import annotations

import pytest

from mythloop.data import data_path
from mythloop.router.embedder import get_embedder, model_id_for
from mythloop.router.models import ModelStore
from mythloop.router.tuning import learned_pairs
from mythloop.skills import load_catalog
from mythloop.sweep import ConditionRun, JudgeOptions, SweepConfig
from mythloop.sweep.config import load_sweep_prompts
from mythloop.sweep.tuned import base_model, read_models, round_pairs, tune_for_round
from mythloop.verdicts import render_self_eval_contract

pytestmark = pytest.mark.slow  # several fine-tunes of the real model


def _key(pair):
    return (pair.query, pair.skill, pair.text, pair.negative)


def _run(tmp_path) -> ConditionRun:
    config = SweepConfig(conditions=["c5"], rounds=3, results_dir=tmp_path / "out",
                         judge_options=JudgeOptions(noise=0.2))
    prompts, seed = load_sweep_prompts(config)
    run = ConditionRun(config=config, cond="c5", replicate=1, results_dir=config.results_dir,
                       catalog=load_catalog(data_path("fixtures", "pool")), prompts=prompts,
                       base_seed=seed, embedder=get_embedder(cache_dir=tmp_path / "emb"))
    run.open()
    return run


def _round(run: ConditionRun, round_idx: int) -> None:
    measured = run.measure(round_idx)
    for row in run.learn_round(round_idx, measured.catalogs, render_self_eval_contract()):
        run.append_turn(row)
    run.mark_round_complete(round_idx)


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory):
    """A C5 replicate with continuation on: round 0 learned, round 1 tuned from the base and
    learned, round 2's fine-tune continuing round 1's model."""
    tmp = tmp_path_factory.mktemp("cont")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MYTHLOOP_C5_CONTINUE", "1")
        mp.setenv("MYTHLOOP_C5_MAX_SEQ_LENGTH", "32")
        models = ModelStore(tmp / "models")
        run = _run(tmp)
        try:
            _round(run, 0)
            first = tune_for_round(run, 1, models)
            _round(run, 1)
            second = tune_for_round(run, 2, models)
            pairs, _ = round_pairs(run, 2)
            yield {"run": run, "tmp": tmp, "models": models, "first": first,
                   "second": second, "pairs": pairs}
        finally:
            run.close()


def test_a_round_after_a_tuned_one_trains_that_model_on_the_new_pairs(two_rounds):
    first, second, models = two_rounds["first"], two_rounds["second"], two_rounds["models"]
    run = two_rounds["run"]
    base = model_id_for(base_model(run))
    assert first["trained"] and "continued_from" not in first  # round 1: from the base
    assert models.get(first["model_id"]).lineage["base_model"] == base
    assert second["trained"] and second["continued_from"] == first["model_id"]
    learned_1 = {_key(p) for p in learned_pairs(models.get(first["model_id"]))}
    now = {_key(p) for p in two_rounds["pairs"]}
    new = now - learned_1
    assert learned_1 < now and new  # the store grew by round 1's verdicts
    assert second["pairs"] == len(now) and second["pairs_new"] == len(new)
    tuned = models.get(second["model_id"])
    assert tuned.lineage["base_model"] == first["model_id"]  # trained from round 1's model
    assert tuned.lineage["pairs"] == len(new) and tuned.lineage["pairs_learned"] == len(now)
    assert {_key(p) for p in learned_pairs(tuned)} == now  # what it has learned, all of it
    assert run.embedder.model_id == second["model_id"]
    assert read_models(run.dir)["2"]["continued_from"] == first["model_id"]


def test_a_resumed_run_finds_the_continued_model_and_trains_nothing(two_rounds, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_C5_CONTINUE", "1")
    monkeypatch.setenv("MYTHLOOP_C5_MAX_SEQ_LENGTH", "32")
    models = two_rounds["models"]
    saved = {m.id for m in models.saved()}
    rerun = _run(two_rounds["tmp"])  # a fresh process would rank with the base model
    try:
        assert rerun.embedder.model_id == model_id_for(base_model(rerun))
        again = tune_for_round(rerun, 2, models)
        assert again["model_id"] == two_rounds["second"]["model_id"]
        assert {m.id for m in models.saved()} == saved  # nothing trained
        assert rerun.embedder.model_id == again["model_id"]
    finally:
        rerun.close()


def test_a_pair_that_lost_the_trust_sends_the_fine_tune_back_to_the_base(two_rounds,
                                                                         monkeypatch):
    """A pair the last model learned that the store no longer trusts (a twin the pool now
    holds harmful, say) must stop teaching: only a model trained from the base unlearns it."""
    import mythloop.sweep.tuned as tuned

    monkeypatch.setenv("MYTHLOOP_C5_CONTINUE", "1")
    monkeypatch.setenv("MYTHLOOP_C5_MAX_SEQ_LENGTH", "32")
    models, run = two_rounds["models"], two_rounds["run"]
    learned = learned_pairs(models.get(two_rounds["second"]["model_id"]))
    distrusted = learned[0]
    kept = [p for p in two_rounds["pairs"] if _key(p) != _key(distrusted)]
    monkeypatch.setattr(tuned, "round_pairs", lambda _run, _idx: (kept, []))
    record = tune_for_round(run, 3, models)
    assert record["trained"] and "continued_from" not in record
    assert record["restarted"].startswith("1 pair(s)")
    model = models.get(record["model_id"])
    assert model.lineage["base_model"] == model_id_for(base_model(run))
    assert {_key(p) for p in learned_pairs(model)} == {_key(p) for p in kept}
    # and with nothing new to learn, the round keeps the last model, even in a fresh run
    rerun = _run(two_rounds["tmp"] / "fresh")
    try:
        (rerun.dir / "models.json").write_text((run.dir / "models.json").read_text())
        same = tune_for_round(rerun, 4, models)
        assert not same["trained"] and same["model_id"] == record["model_id"]
        assert "0 new trusted pairs" in same["why"]
        assert rerun.embedder.model_id == record["model_id"]
    finally:
        rerun.close()


def test_off_every_round_trains_the_base_on_every_pair(two_rounds, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_C5_CONTINUE", "0")
    monkeypatch.setenv("MYTHLOOP_C5_MAX_SEQ_LENGTH", "32")
    models, run = two_rounds["models"], two_rounds["run"]
    record = tune_for_round(run, 2, models)
    assert record["trained"] and "continued_from" not in record and "restarted" not in record
    model = models.get(record["model_id"])
    assert model.id != two_rounds["second"]["model_id"]
    assert model.lineage["base_model"] == model_id_for(base_model(run))
    assert model.lineage["pairs"] == len(two_rounds["pairs"])
    assert "pairs_learned" not in model.lineage
