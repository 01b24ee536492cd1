"""Stage specs, artifact validation (schema + the seed's degeneracy rules) and charter loading."""

from __future__ import annotations

import json

import pytest

from mythloop.data import agents_dir, data_path
from mythloop.mythos.code.extract import extract_json_object
from mythloop.mythos.plan.stages import STAGES, load_charter, stage_by_slug, validate_artifact

TOPICS = ["the-heat-equation", "euler-s-identity"]


def cassette_artifact(topic: str, slug: str) -> dict:
    doc = json.loads(data_path("fixtures", "cassettes", topic, f"{slug}.json").read_text(encoding="utf-8"))
    return extract_json_object(doc["response"])


def test_stage_order_and_artifact_names():
    assert [s.slug for s in STAGES] == [
        "intent", "cartographer", "curriculum", "math-director", "cinematographer", "scene-composer"]
    assert [s.artifact_name for s in STAGES] == [
        "01_intent.json", "02_knowledge_map.json", "03_curriculum.json",
        "04_math_dossier.json", "05_shot_list.json", "06_scene_spec.json"]
    with pytest.raises(KeyError, match="known stages"):
        stage_by_slug("director")


@pytest.mark.parametrize("topic", TOPICS)
@pytest.mark.parametrize("slug", [s.slug for s in STAGES])
def test_cassette_artifacts_are_healthy(topic, slug):
    assert validate_artifact(slug, cassette_artifact(topic, slug)) is None


def test_the_seed_48_byte_dossier_is_rejected():
    empty = {"formulas": [], "color_identity": {}, "numbers": []}
    assert validate_artifact("math-director", empty) == "math dossier has an empty 'formulas' list"


def test_tiny_dossier_is_rejected_by_size():
    tiny = {"formulas": [{"id": "f", "act_number": 1, "latex_parts": ["x"], "term_glossary": []}],
            "color_identity": {}, "numbers": []}
    problem = validate_artifact("math-director", tiny)
    assert problem is not None and problem.startswith("math dossier is only") and "bytes" in problem


def test_shot_list_needs_eight_shots():
    shots = cassette_artifact("the-heat-equation", "cinematographer")
    shots["shots"] = shots["shots"][:7]
    assert validate_artifact("cinematographer", shots) == "shot list has only 7 beats (need at least 8)"


def test_small_artifacts_are_rejected():
    assert validate_artifact("intent", {"core_claim": "x"}) == f"artifact is only {len(json.dumps({'core_claim': 'x'}))} bytes"
    assert validate_artifact("curriculum", {}) == "artifact is not a non-empty JSON object"
    assert validate_artifact("curriculum", ["not", "a", "dict"]) == "artifact is not a non-empty JSON object"


def test_missing_key_is_named_in_one_line():
    intent = cassette_artifact("euler-s-identity", "intent")
    del intent["title_options"]
    problem = validate_artifact("intent", intent)
    assert problem is not None and "title_options" in problem and "01_intent.json" in problem
    assert "\n" not in problem


def test_wrong_nested_type_is_reported():
    dossier = cassette_artifact("the-heat-equation", "math-director")
    dossier["formulas"][0]["latex_parts"] = "not a list"
    problem = validate_artifact("math-director", dossier)
    assert problem is not None and "latex_parts" in problem


def test_lenient_types_and_extra_keys_pass():
    intent = cassette_artifact("the-heat-equation", "intent")
    intent["duration_seconds"] = "120"
    intent["a_key_nobody_asked_for"] = {"fine": True}
    assert validate_artifact("intent", intent) is None


@pytest.mark.parametrize("spec", STAGES, ids=lambda s: s.slug)
def test_charter_names_every_key_of_its_artifact(spec):
    text = load_charter(spec.slug)
    assert not text.startswith("---") and "description:" not in text.splitlines()[0]
    assert spec.artifact_name in text
    for name, field in spec.model.model_fields.items():
        assert (field.alias or name) in text, f"{spec.charter_file} never mentions {name}"


def test_charter_frontmatter_is_complete():
    for spec in STAGES:
        raw = (agents_dir() / spec.charter_file).read_text(encoding="utf-8")
        head = raw.split("---")[1]
        for key in ("name:", "stage:", "artifact:", "description:"):
            assert key in head, f"{spec.charter_file} frontmatter lacks {key}"
        assert f"stage: {spec.slug}" in head and f"artifact: {spec.artifact_name}" in head


def test_missing_charter_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="not found"):
        load_charter("no-such-charter.md")
