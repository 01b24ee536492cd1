"""Replay cassettes: complete, well-formed, honest, and carrying one realistic Manim error."""

from __future__ import annotations

import difflib
import json
import re

import pytest

from mythloop.data import data_path
from mythloop.mythos.code.extract import extract_json_object, extract_python_block, find_scene_class
from mythloop.mythos.code.scenes import join_film, scene_from_reply, split_film
from mythloop.mythos.plan.stages import STAGES
from mythloop.mythos.sandbox.verify import verify_scene

TOPICS = {"the-heat-equation": "the heat equation", "euler-s-identity": "Euler's identity"}
KEYS = [s.slug for s in STAGES] + ["codegen", "repair-scene-01-1"]
REPAIR = "repair-scene-01-1"
PALETTE = ["#0c0c0b", "#faf9f5", "#d97757", "#6a9bcc", "#788c5d", "#d4a27f", "#b0aea5"]


def load(slug: str, key: str) -> dict:
    return json.loads(data_path("fixtures", "cassettes", slug, f"{key}.json").read_text(encoding="utf-8"))


def code_of(slug: str, key: str) -> str:
    return extract_python_block(load(slug, key)["response"])


@pytest.mark.parametrize("slug", TOPICS)
def test_cassette_format(slug):
    for key in KEYS:
        doc = load(slug, key)
        assert set(doc) == {"topic", "key", "prompt_sha256", "model", "recorded_utc", "response"}
        assert doc["topic"] == TOPICS[slug] and doc["key"] == key
        assert re.sub(r"[^a-z0-9]+", "-", doc["topic"].lower()).strip("-") == slug
        # repairs answer a prompt carrying machine-specific error output: never hashed
        if key.startswith("repair"):
            assert doc["prompt_sha256"] is None
        else:
            assert re.fullmatch(r"[0-9a-f]{64}", doc["prompt_sha256"])
        assert "hand-written" in doc["model"]
        assert doc["response"].strip()


@pytest.mark.parametrize("slug", TOPICS)
def test_artifacts_are_rich(slug):
    acts = extract_json_object(load(slug, "curriculum")["response"])["acts"]
    assert len(acts) >= 3
    dossier = extract_json_object(load(slug, "math-director")["response"])
    assert all(f["latex_parts"] and f["term_glossary"] for f in dossier["formulas"])
    verbs = {s["verb"] for s in extract_json_object(load(slug, "cinematographer")["response"])["shots"]}
    assert {"HEADLINE", "ZOOM_IN", "PULL_BACK", "CAPTION", "TILT_3D", "RETURN_2D"} <= verbs


@pytest.mark.parametrize("slug", TOPICS)
def test_recorded_code_implements_the_scene_spec(slug):
    spec = extract_json_object(load(slug, "scene-composer")["response"])
    split = split_film(code_of(slug, "codegen"))
    repaired = scene_from_reply(code_of(slug, REPAIR), split.scenes[0].name)
    fixed = join_film(split.header, [repaired] + [u.code for u in split.scenes[1:]])
    for key, code in (("codegen", code_of(slug, "codegen")), (REPAIR, fixed)):
        units = split_film(code).scenes
        assert len(units) >= 3  # a film of 30 s or more is at least three scenes
        assert [u.name for u in units] == sorted(u.name for u in units)  # plan order
        assert all(u.name.startswith(spec["scene_name"]) for u in units)
        for unit in units:  # each scene starts from its own set-up, never shared memory
            assert "self.open_scene()" in unit.code
        assert find_scene_class(code)
        result = verify_scene(code)
        assert result.ok, f"{key}: {result.reason}"
        assert "set_camera_orientation(phi=0 * DEGREES, theta=-90 * DEGREES)" in code
        assert re.search(r"zoom_to_fit\(.*max_zoom=2\.[0-9]", code)  # zoom 2-3, formula in frame
        assert re.search(r"\b(font_)?size=64\b", code) and "font_size=30" in code  # headline, caption
        assert all(color in code for color in PALETTE)
        # the layout-safe way: one caption lane, fitted formulas, captions cleared at the end
        assert "from mythloop.scenekit import" in split_film(code).header
        assert "CaptionLane(self" in code and "to_edge(DOWN" not in code
        for unit in units:
            assert re.search(r"end_scene\(self, self\.lane[,)]", unit.code), unit.name
            assert "declare_caption" not in unit.code  # captions never carry over


@pytest.mark.parametrize("slug", TOPICS)
def test_repair_changes_only_the_broken_line(slug):
    """The recorded repair answers the failing scene class alone (no header), one line changed."""
    scene = split_film(code_of(slug, "codegen")).scenes[0]
    broken, fixed = scene.code, code_of(slug, REPAIR)
    assert split_film(fixed).scenes[0].name == scene.name and "from manim" not in fixed
    changed = [
        line for line in difflib.unified_diff(broken.splitlines(), fixed.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert len(changed) == 2, changed


def test_heat_codegen_calls_an_api_manim_ce_removed():
    from manim import Axes

    broken, fixed = code_of("the-heat-equation", "codegen"), code_of("the-heat-equation", REPAIR)
    assert "axes.get_graph(" in broken and "axes.get_graph(" not in fixed
    assert not hasattr(Axes, "get_graph") and hasattr(Axes, "plot")


def test_euler_codegen_looks_up_a_tex_part_that_does_not_exist():
    broken, fixed = code_of("euler-s-identity", "codegen"), code_of("euler-s-identity", REPAIR)
    parts = re.search(r'identity = MathTex\((.*?), font_size', broken).group(1)
    wanted_broken = re.search(r'get_part_by_tex\((r"[^"]*")\)', broken).group(1)
    wanted_fixed = re.search(r'get_part_by_tex\((r"[^"]*")\)', fixed).group(1)
    assert wanted_broken not in parts and wanted_fixed in parts


def test_recorded_prompt_hashes_match_todays_prompts():
    """A charter edit that changes what a film sends must come with re-recorded (or
    knowingly rehashed) cassettes: `python -m mythloop.mythos.standins.cassettes --rehash`."""
    from mythloop.mythos.standins.cassettes import TOPICS, check

    for topic in TOPICS:
        assert check(topic) == [], topic


def test_the_check_command_named_in_the_docstring_runs(capsys):
    """`python -m mythloop.mythos.standins.cassettes --check` (the docstring's command) is
    accepted and checks; --check with --rehash is refused."""
    from mythloop.mythos.standins.cassettes import TOPICS, main

    assert main(["--check"]) == 0
    out = capsys.readouterr().out
    assert all(f"{topic}: all prompts match" in out for topic in TOPICS)
    with pytest.raises(SystemExit) as exc:
        main(["--check", "--rehash"])
    assert exc.value.code == 2
