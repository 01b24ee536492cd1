"""Prompt builders: deterministic text holding charter, artifact and contract."""

from __future__ import annotations

import json

from mythloop.mythos.plan.prompts import (
    FAILURE_TAIL_CHARS,
    codegen_prompt,
    json_contract,
    prompt_sha256,
    repair_prompt,
    stage_prompt,
    system_prompt,
)
from mythloop.mythos.plan.stages import STAGES, load_charter

ARTIFACT = {"user_prompt": "the heat equation", "latex": "\\frac{\\partial u}{\\partial t}", "n": [1, 2]}


def test_stage_prompt_holds_charter_artifact_and_contract():
    for spec in STAGES:
        prompt = stage_prompt(spec.slug, ARTIFACT)
        charter, contract = load_charter(spec.slug), json_contract()
        assert prompt.index(charter) < prompt.index("INPUT ARTIFACT JSON:") < prompt.index(contract)
        after = prompt.split("INPUT ARTIFACT JSON:\n", 1)[1]
        assert json.loads(after[: after.index(contract)]) == ARTIFACT
        assert "PREVIOUS ATTEMPT REJECTED" not in prompt


def test_stage_prompt_is_deterministic():
    first = stage_prompt("math-director", ARTIFACT)
    assert first == stage_prompt("math-director", dict(ARTIFACT))
    assert prompt_sha256(first) == prompt_sha256(stage_prompt("math-director", ARTIFACT))
    assert first != stage_prompt("math-director", {**ARTIFACT, "n": [1, 3]})


def test_rejection_is_appended_for_the_retry():
    plain = stage_prompt("math-director", ARTIFACT)
    retry = stage_prompt("math-director", ARTIFACT, rejection="math dossier is only 48 bytes")
    assert retry.startswith(plain.rstrip("\n"))
    assert "PREVIOUS ATTEMPT REJECTED" in retry and "math dossier is only 48 bytes" in retry


def test_system_prompt_is_the_cinematic_charter():
    text = system_prompt()
    for needle in ("#0c0c0b", "#faf9f5", "#d97757", "move_camera", "phi = 0", "64"):
        assert needle in text
    assert not text.startswith("---")


def test_codegen_prompt_inlines_the_dossier():
    dossier = {"05_shot_list.json": {"shots": [{"verb": "ZOOM_IN", "latex": "{a}"}]}}
    prompt = codegen_prompt(dossier)
    assert "{dossier_json}" not in prompt and "DOSSIER JSON:" in prompt
    assert json.dumps(dossier, indent=2) in prompt
    assert prompt == codegen_prompt(json.loads(json.dumps(dossier)))


def test_repair_prompt_keeps_only_the_failure_tail():
    code = "from manim import *\nclass A(ThreeDScene):\n    def construct(self):\n        x = {1: 2}\n"
    failure = "HEAD-MARKER " + "x" * 20000 + " TAIL-MARKER"
    prompt = repair_prompt(code, failure, header="BG = '#0c0c0b'", scene_name="A")
    assert code.rstrip("\n") in prompt
    assert "SHARED HEADER (read-only):\nBG = '#0c0c0b'" in prompt and "FAILING SCENE (A):" in prompt
    assert "TAIL-MARKER" in prompt and "HEAD-MARKER" not in prompt
    assert failure[-FAILURE_TAIL_CHARS:] in prompt
    assert "{scene_code}" not in prompt and "{failure_tail}" not in prompt
    assert "{shared_header}" not in prompt and "{scene_name}" not in prompt
    assert prompt == repair_prompt(code, failure, header="BG = '#0c0c0b'", scene_name="A")
