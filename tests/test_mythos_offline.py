"""Offline stand-ins: valid, non-degenerate, deterministic, honest about being stand-ins."""

from __future__ import annotations

import json

from mythloop.mythos.code.extract import extract_json_object, extract_python_block, find_scene_class
from mythloop.mythos.code.scenes import scene_file_text, split_film
from mythloop.mythos.plan.prompts import codegen_prompt, repair_prompt, stage_prompt
from mythloop.mythos.plan.stages import STAGES, validate_artifact
from mythloop.mythos.sandbox.verify import verify_scene
from mythloop.mythos.standins.offline import OFFLINE_SCENE_NAME, offline_response, topic_from_prompt


def run_offline_chain(topic: str) -> dict:
    artifact: dict = {"user_prompt": topic}
    dossier = {}
    for spec in STAGES:
        raw = offline_response(spec.slug, stage_prompt(spec.slug, artifact))
        artifact = extract_json_object(raw)
        assert validate_artifact(spec.slug, artifact) is None, spec.slug
        assert artifact["offline"] is True
        dossier[spec.artifact_name] = artifact
    return dossier


def test_every_stage_stand_in_is_valid_and_carries_the_topic():
    dossier = run_offline_chain("the heat equation")
    assert all(a["topic"] == "the heat equation" for a in dossier.values())
    assert len(dossier["05_shot_list.json"]["shots"]) >= 8
    assert dossier["04_math_dossier.json"]["formulas"]


def test_stand_ins_are_deterministic():
    prompt = stage_prompt("cinematographer", {"user_prompt": "x", "topic": "waves"})
    assert offline_response("cinematographer", prompt) == offline_response("cinematographer", prompt)


def test_codegen_is_a_working_offline_scene():
    dossier = run_offline_chain("Euler's identity")
    raw = offline_response("codegen", codegen_prompt(dossier))
    assert raw.startswith("```python\n")
    code = extract_python_block(raw)
    assert find_scene_class(code).startswith(OFFLINE_SCENE_NAME)
    assert "Offline stand-in" in code and "Euler's identity" in code
    split = split_film(code)  # the stand-in is a split film too: header + three scenes
    assert [u.name for u in split.scenes] == [f"{OFFLINE_SCENE_NAME}01Question",
                                              f"{OFFLINE_SCENE_NAME}02Formula",
                                              f"{OFFLINE_SCENE_NAME}03KeyTerm"]
    for unit in split.scenes:
        assert verify_scene(scene_file_text(split.header, unit.code)).ok
    assert "zoom_to_fit(" in code and "max_zoom=2.2" in code and "#0c0c0b" in code
    assert "from mythloop.scenekit import" in split.header and "end_scene(self, self.lane" in code
    result = verify_scene(code)
    assert result.ok, result.reason
    compile(code, "offline_scene.py", "exec")


def test_repair_returns_the_same_scene():
    dossier = run_offline_chain("the heat equation")
    split = split_film(extract_python_block(offline_response("codegen", codegen_prompt(dossier))))
    scene = split.scenes[1]
    prompt = repair_prompt(scene.code, "Traceback ...", header=split.header, scene_name=scene.name)
    repaired = extract_python_block(offline_response("repair-scene-02-2", prompt))
    assert repaired == scene.code


def test_topic_falls_back_and_odd_characters_stay_safe():
    assert topic_from_prompt("no artifact in here") == "an idea worth a film"
    code = extract_python_block(
        offline_response("codegen", codegen_prompt({"01_intent.json": {"topic": 'a "quoted" \\ topic'}})))
    compile(code, "scene.py", "exec")
    assert json.dumps("a quoted topic") in code
