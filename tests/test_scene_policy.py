"""What follows each step of a film scene (mythloop.mythos.scene_policy): pure decisions, so
every branch is checked here without Prefect or a render."""

from __future__ import annotations

import pytest

from mythloop.mythos.code.scenes import SceneUnit
from mythloop.mythos.sandbox.layout import Finding
from mythloop.mythos.scene_policy import (
    NO_REPAIR_KINDS,
    Good,
    RenderView,
    RepairRules,
    SceneFailed,
    after_render,
    after_verify,
    before_repair,
    film_failure,
    good_from,
    last_line,
)

FINDING = Finding(kind="off_frame", at="wait 1", t=1.0, what="text 'x'",
                  detail="2.0 units past the right edge")
RULES = RepairRules(max_repairs=2, layout_repair=True)


def _good(findings: list[Finding] | None = None) -> Good:
    return good_from("class A(Scene): ...", "codegen", "/runs/x/scenes/scene-01.mp4", 1.0,
                     findings)


def test_a_clean_render_is_accepted():
    step = after_render(RenderView(True, "ok", findings=[]), None, 0, RULES, False)
    assert step.action == "accept"


def test_layout_findings_get_one_repair_while_repairs_are_left():
    render = RenderView(True, "ok", findings=[FINDING])
    step = after_render(render, None, 0, RULES, layout_repaired=False)
    assert (step.action, step.kind) == ("accept_then_repair", "layout")
    # only once per scene, only with a repair left, only when asked, never offline
    assert after_render(render, None, 0, RULES, layout_repaired=True).action == "accept"
    assert after_render(render, None, 2, RULES, False).action == "accept"
    assert after_render(render, None, 0, RepairRules(2, layout_repair=False),
                        False).action == "accept"
    assert after_render(render, None, 0, RepairRules(2, True, offline=True),
                        False).action == "accept"


def test_the_layout_repair_error_is_the_findings_text():
    good = _good([FINDING])
    assert "off_frame" in good.finding and "Layout check" in good.finding
    assert _good([]).finding == "" and _good(None).findings is None


def test_a_repair_with_more_findings_keeps_the_earlier_video():
    good = _good([FINDING])
    worse = RenderView(True, "ok", findings=[FINDING, FINDING])
    step = after_render(worse, good, 1, RULES, True)
    assert step.action == "keep" and "2 layout finding(s), more than before" in step.why
    same = RenderView(True, "ok", findings=[FINDING])
    assert after_render(same, good, 1, RULES, True).action == "accept"


def test_a_repair_that_fails_to_render_keeps_the_earlier_video():
    step = after_render(RenderView(False, "scene_error", "NameError: Sqare", "tail"),
                        _good([FINDING]), 1, RULES, True)
    assert step.action == "keep" and step.why == "NameError: Sqare"


@pytest.mark.parametrize("kind", sorted(NO_REPAIR_KINDS))
def test_environment_problems_spend_no_repair(kind):
    step = after_render(RenderView(False, kind, "render stopped"), None, 0, RULES, False)
    assert step.action == "give_up" and step.kind == kind
    assert step.why == f"render stopped ({NO_REPAIR_KINDS[kind]}: no repair spent)"


def test_a_scene_error_goes_to_repair_with_its_log_tail():
    step = after_render(RenderView(False, "scene_error", "exit 1", "line\nNameError: Cirle"),
                        None, 0, RULES, False)
    assert step.action == "repair" and step.why.endswith("NameError: Cirle")
    assert after_render(RenderView(False, "scene_error", "exit 1", ""), None, 0, RULES,
                        False).why == "exit 1"


def test_verify():
    assert after_verify(True, "", None).action == "render"
    assert after_verify(False, "static check: import os", None).action == "repair"
    kept = after_verify(False, "static check: import os", _good())
    assert kept.action == "keep" and kept.why == "static check: import os"


def test_before_repair_gives_up_out_of_repairs_or_offline():
    assert before_repair("boom", 1, RULES).action == "repair"
    out = before_repair("trace\nNameError: x", 2, RULES)
    assert out.action == "give_up" and out.kind == "scene_error"
    assert out.why == "still fails after 2 repair(s): NameError: x"
    assert before_repair("boom", 0, RepairRules(2, offline=True)).action == "give_up"


def test_last_line():
    assert last_line("a\n  b  \n\n") == "b"
    assert last_line("") == last_line(None) == "unknown failure"


def test_film_failure_names_scenes_in_order_and_an_environment_kind():
    one, two = SceneUnit(1, "A", ""), SceneUnit(2, "B", "")
    text = film_failure([SceneFailed(two, "scene-02 (B): timed out", kind="timeout"),
                         SceneFailed(one, "scene-01 (A) still fails")], 3, 1, "/r/scenes", "/r")
    assert text == ("2 of 3 scene(s) failed: scene-01 (A) still fails; scene-02 (B): timed "
                    "out [timeout]; 1 rendered scene(s) kept in /r/scenes; run dir /r")
