"""C5's hard negatives (issue 52): a trusted pair also gets a skill its prompt's catalog showed
and the judge did not use. Which skill is chosen (from a real round of the plain loop on the
bundled fixtures, simulated judge), how batches keep a negative from being another pair's
positive, that pairs without negatives keep their fingerprint, and a real fine-tune with them.
"""

from __future__ import annotations

import hashlib
import json
import random

import pytest

from mythloop.data import data_path
from mythloop.fileio import read_jsonl
from mythloop.router.embedder import model_id_for
from mythloop.router.models import ModelStore
from mythloop.router.ranker import full_text
from mythloop.router.tuning import (
    TrainingPair,
    TuneSettings,
    _Batches,
    fine_tune,
    pairs_fingerprint,
    training_key,
    trusted_pairs,
)
from mythloop.skills import load_catalog
from mythloop.sweep import JudgeOptions, SweepConfig

POOL = data_path("fixtures", "pool")


def test_a_batch_never_holds_a_text_twice_as_positive_or_negative():
    texts = [f"skill {i}" for i in range(6)]
    # every pair's negative is some other pair's positive: only batches that keep them apart
    # are safe, since a negative that is a batch's positive would teach against a right answer
    pairs = [TrainingPair(f"q{i}", f"s{i % 6}", texts[i % 6], texts[(i + 1) % 6])
             for i in range(12)] + [TrainingPair(f"plain{i}", f"s{i}", texts[i]) for i in range(6)]
    batches = _Batches(pairs, 4, random.Random(3)).epoch()
    # a pair that cannot share a batch still gets one of its own (no endless loop)
    odd = TrainingPair("q", "s0", texts[0], texts[0])
    assert _Batches([odd], 4, random.Random(0)).epoch() == [[odd]]
    assert sorted(p.query for b in batches for p in b) == sorted(p.query for p in pairs)
    for batch in batches:
        seen = [p.text for p in batch] + [p.negative for p in batch if p.negative]
        assert len(seen) == len(set(seen)), batch
        assert len({bool(p.negative) for p in batch}) == 1  # all with negatives, or none


def test_pairs_without_negatives_keep_their_fingerprint():
    pairs = [TrainingPair("a prompt", "x", "x: does x"), TrainingPair("b prompt", "y", "y: does y")]
    digest = hashlib.sha256()  # the fingerprint as it was before negatives existed
    for line in sorted(json.dumps([p.query, p.text]) for p in pairs):
        digest.update(line.encode("utf-8") + b"\n")
    assert pairs_fingerprint(pairs) == digest.hexdigest()
    with_neg = [TrainingPair("a prompt", "x", "x: does x", "y: does y"), pairs[1]]
    assert pairs_fingerprint(with_neg) != pairs_fingerprint(pairs)


@pytest.fixture(scope="module")
def one_round(tmp_path_factory):
    """A C5 replicate of the bundled fixtures after one round of the plain loop."""
    from mythloop.sweep import ConditionRun, load_prompts
    from mythloop_flows.feedback_loop import _catalog, _contract, _embedder, _prepare_results_dir

    config = SweepConfig(conditions=["c5"], rounds=2, replicates=1, judge="simulated",
                         judge_options=JudgeOptions(noise=0.2),
                         results_dir=tmp_path_factory.mktemp("hn") / "sweep")
    prompts, seed = load_prompts(config.resolved_prompts_file())
    run = ConditionRun(config=config, cond="c5", replicate=1,
                       results_dir=_prepare_results_dir(config),
                       catalog=_catalog(config.resolved_pool()), prompts=prompts,
                       base_seed=seed, embedder=_embedder(None))
    run.open()
    run.prepare_round(0)
    measured = run.measure(0)
    for row in run.learn_round(0, measured.catalogs, _contract()):
        run.append_turn(row)
    run.mark_round_complete(0)
    yield run
    run.close()


def test_each_pair_gets_the_best_ranked_skill_it_was_shown_and_not_used(one_round):
    from mythloop.sweep.tuned import with_hard_negatives

    run = one_round
    pairs = trusted_pairs(run.store, run.catalog)
    assert pairs
    assert with_hard_negatives(run, pairs, 0) == pairs  # no round before round 0: none
    chosen = with_hard_negatives(run, pairs, 1)
    assert [(p.query, p.skill, p.text) for p in chosen] == \
        [(p.query, p.skill, p.text) for p in pairs]
    by_text = {full_text(s): s.name for s in run.catalog.skills}
    text_of = {p.id: " ".join(p.prompt.split()) for p in run.prompts}
    positives = {(p.query, p.skill) for p in pairs}
    turns = [t for t in read_jsonl(run.turns_path) if t["status"] == "ok"]
    with_negative = [p for p in chosen if p.negative]
    assert with_negative
    for pair in chosen:
        praised = [t for t in turns if text_of[t["prompt_id"]] == pair.query and any(
            g["name"] == pair.skill and g["verdict"] == "HELPFUL" for g in t["tags"])]
        assert praised, pair
        turn = praised[-1]
        tagged = {g["name"] for g in turn["tags"]}
        unused = [n for n in turn["ranked_top5"]
                  if n not in tagged and (pair.query, n) not in positives]
        want = full_text(next(s for s in run.catalog.skills if s.name == unused[0])) \
            if unused else ""
        assert pair.negative == want, pair
        if pair.negative:
            assert by_text[pair.negative] != pair.skill


def test_a_fine_tune_with_hard_negatives_trains_and_says_so(tmp_path):
    skills = {s.name: s for s in load_catalog(POOL).skills}
    names = ["regex-debugger", "structured-logging", "sops-age-secrets", "asyncio-debugging"]
    queries = ["my regex hangs on long input", "logs we can query as json",
               "keep secrets encrypted in git", "an event loop that never returns"]
    plain = [TrainingPair(q, n, full_text(skills[n])) for q, n in zip(queries, names, strict=True)]
    hard = [TrainingPair(p.query, p.skill, p.text, full_text(skills["docker-multistage-builds"]))
            for p in plain]
    store = ModelStore(tmp_path / "models")
    quick = TuneSettings(epochs=1, batch_size=4, learning_rate=1e-4, max_seq_length=32, seed=1)
    b = fine_tune(_base(), hard, store, settings=quick)  # one fine-tune: a model load is slow
    plain_key = training_key(model_id_for(_base()), pairs_fingerprint(plain), quick)
    assert b.lineage["training_key"] != plain_key  # the plain pairs' model is another one
    assert "hard negatives" in b.lineage["loss"]
    saved = [json.loads(line) for line in (b.path / "pairs.jsonl").read_text().splitlines()]
    assert all(row["negative"] for row in saved)


def _base() -> str:
    from mythloop.router.embedder import default_model

    return default_model()
