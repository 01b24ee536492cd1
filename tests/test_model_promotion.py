"""Promotion with a gate (issue 41): a candidate trained from a store's verdicts is promoted
only when held-out routing is not worse and the fixture traps hold; a worse one is kept in the
model store, not promoted, and the decision is a Prefect artifact. Small slices: the bundled
fixtures' prompts, one short fine-tune of the bundled model."""

from __future__ import annotations

import pytest

from mythloop.data import data_path
from mythloop.router.models import ModelStore
from mythloop.settings import get_settings
from mythloop.sweep.config import load_prompts
from mythloop.verdicts import VerdictIn, VerdictStore

PROMPTS = data_path("fixtures", "prompts.yaml")
POOL = data_path("fixtures", "pool")
HARSH = {"epochs": 4, "batch_size": 8, "learning_rate": 1e-4, "max_seq_length": 48,
         "scale": 20.0, "seed": 0}


def _store(path, wrong: bool) -> str:
    """HELPFUL verdicts for the fixtures' labelled prompts: on their own skill, or (wrong) on
    the next prompt's skill, as a judge that always answers wrongly would give."""
    prompts, _ = load_prompts(PROMPTS)
    labelled = [p for p in prompts if p.expected_skill and p.kind in ("trap", "normal")]
    skills = [p.expected_skill for p in labelled]
    if wrong:
        skills = skills[1:] + skills[:1]
    store = VerdictStore(path)
    store.record_verdicts([VerdictIn(session_id=f"s-{p.id}", skill_name=s, host="test",
                                     verdict="HELPFUL", reason="used it and it was right",
                                     query=p.prompt) for p, s in zip(labelled, skills, strict=True)])
    store.close()
    return str(path)


@pytest.mark.slow  # a fine-tune or two of the real model (about a minute or more)
@pytest.mark.usefixtures("prefect_harness")
def test_a_worse_candidate_is_kept_not_promoted(tmp_path):
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from mythloop_flows.promote_model import promote_model

    models = ModelStore(get_settings().models_dir)
    before = models.current_id()
    decision = promote_model(_store(tmp_path / "wrong.db", wrong=True), str(PROMPTS),
                             str(POOL), tune=HARSH)
    cand = decision["candidate"]
    assert not decision["promote"], decision["reasons"]
    assert cand["hit@1"] < decision["current"]["hit@1"]
    assert any("hit@1 lower" in r for r in decision["reasons"])
    assert models.current_id() == before  # not promoted ...
    kept = models.get(cand["model_id"])  # ... but kept, with its lineage
    assert kept is not None and kept.lineage["source"] == "promotion"
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(artifact_filter=ArtifactFilter(
            key=ArtifactFilterKey(any_=["model-promotion"])))
    assert any(cand["model_id"] in (a.description or "") for a in found)


def test_models_names_the_round_as_the_sweep_did():
    """A C5 model tuned for the second round (round index 1, file round_1.jsonl, which the
    sweep's terminal and report call round 2) is listed as made for round 2."""
    from mythloop_app.commands.models import _made_by

    lineage = {"source": "sweep", "sweep_id": "s1", "condition": "c5", "replicate": 1,
               "round": 1}  # as mythloop.sweep.tuned.tune_for_round records it
    assert _made_by(lineage).endswith("c5-rep1 round 2")
    assert _made_by({**lineage, "round": None}).endswith("round ?")
