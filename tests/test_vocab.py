"""Closed vocabularies (mythloop.vocab): each defined once and read everywhere, an unknown
value refused where it comes in (the CLI before Prefect starts, the models on load), and the
CLI's defaults are the config models' own."""

from __future__ import annotations

import typing

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from mythloop.mythos.plan.request import FilmRequest
from mythloop.mythos.records import FailedScene, RenderEntry, SceneRender
from mythloop.mythos.sandbox.render import RenderResult
from mythloop.mythos.sandbox.sandbox_classify import classify
from mythloop.sweep.config import JudgeOptions, SweepConfig, SweepPrompt
from mythloop.sweep.records import MeasurementRow, TurnRow
from mythloop.vocab import (
    CONDITION_HELP,
    CONDITIONS,
    PROMPT_KINDS,
    RENDER_KINDS,
    TURN_STATUSES,
    Condition,
)
from mythloop_app.cli import app


def _command(name: str):
    return typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]


def _defaults(name: str) -> dict[str, object]:
    return {p.name: p.default for p in _command(name).params if p.name}


def test_conditions_are_defined_once():
    (inner,) = typing.get_args(SweepConfig.model_fields["conditions"].annotation)
    assert inner is Condition
    assert CONDITIONS == typing.get_args(Condition)
    assert set(CONDITION_HELP) == set(CONDITIONS)
    help_text = CliRunner().invoke(app, ["sweep", "--help"], env={"COLUMNS": "400"}).output
    for cond in CONDITIONS:
        assert f"{cond} (" in help_text  # every condition named in --help, from the vocab


def test_unknown_condition_refused_before_prefect(monkeypatch):
    """The CLI answers an unknown condition with one line and exit 2 without entering the
    flow runtime (no Prefect server); the config model refuses it too, naming the choices."""
    import mythloop_app.commands.sweep as sweep_command

    def no_runtime(*args, **kwargs):
        raise AssertionError("the flow runtime started for a bad condition")

    monkeypatch.setattr(sweep_command, "flow_runtime", no_runtime)
    out = CliRunner().invoke(app, ["sweep", "--conditions", "c0,c7", "--rounds", "1"],
                             env={"COLUMNS": "200"})
    assert out.exit_code == 2, out.output
    lines = [ln for ln in out.output.splitlines() if ln.strip()]
    assert lines == ["error: unknown condition(s) c7: use c0, c3, c4 and/or c5 (--conditions)"]
    with pytest.raises(ValidationError, match="'c0', 'c3', 'c4' or 'c5'"):
        SweepConfig(conditions=["c7"])


def test_render_kinds_include_the_flows_own():
    """`layout` and `interrupted` (set by the film flow / a stopped render) are kinds like
    the sandbox's; anything else is refused by the render and manifest records."""
    assert {"layout", "interrupted", "ok", "scene_error"} <= set(RENDER_KINDS)
    for kind in ("layout", "interrupted"):
        assert RenderEntry(kind=kind).kind == kind
        assert FailedScene(kind=kind).kind == kind
    for model in (RenderResult, SceneRender):
        with pytest.raises(ValidationError, match="kind"):
            model(ok=False, kind="exploded")
    with pytest.raises(ValidationError):
        RenderEntry(kind="exploded")
    entry = RenderEntry(kind="ok")
    with pytest.raises(ValidationError):  # manifest parts validate assignments too
        entry.kind = "exploded"  # type: ignore[assignment]


@pytest.mark.parametrize("case", [
    {"timed_out": True, "returncode": None, "video": False, "log": ""},
    {"timed_out": False, "returncode": 0, "video": True, "log": ""},
    {"timed_out": False, "returncode": 1, "video": False, "log": "ValueError: bad"},
    {"timed_out": False, "returncode": 1, "video": False,
     "log": "No such file or directory: 'latex'"},
    {"timed_out": False, "returncode": -9, "video": False, "log": ""},
])
def test_classify_answers_in_the_vocabulary(case):
    kind, message = classify(timeout=10, scene_file="s.py", limits_text="x", **case)
    assert kind in RENDER_KINDS and message


def test_turn_status_and_prompt_kind_are_closed():
    base = {"round": 0, "prompt_id": "p"}
    for status in TURN_STATUSES:
        assert TurnRow(**base, status=status).status == status
    with pytest.raises(ValidationError, match="status"):
        TurnRow(**base, status="maybe")
    for kind in PROMPT_KINDS:
        assert SweepPrompt(id="p", prompt="text", kind=kind).learned == (kind != "heldout")
    with pytest.raises(ValidationError, match="prompt_kind"):
        MeasurementRow(prompt_id="p", prompt_kind="odd", rank=1, skill_name="s", score=0.1)


def test_cli_defaults_are_the_config_models():
    """Change a default in SweepConfig / JudgeOptions / FilmRequest and the CLI follows."""
    config, judge = SweepConfig(), JudgeOptions()
    sweep = _defaults("sweep")
    assert list(sweep["conditions"]) == config.conditions
    for name in ("rounds", "replicates", "judge", "strict", "task_per_turn", "parallel_shards"):
        assert sweep[name] == getattr(config, name), name
    assert list(sweep["noise"]) == [judge.noise]  # --noise takes a list of levels
    for name in ("omit_rate", "invent_rate"):
        assert sweep[name] == getattr(judge, name), name
    film = _defaults("film")
    for name in ("quality", "max_repairs", "burn_subtitles", "layout_repair", "fresh"):
        assert film[name] == FilmRequest.model_fields[name].default, name
    # the backend is the one exception: the CLI has none until one is configured (--backend
    # or MYTHLOOP_BACKEND; else one line listing the choices), while the run form in the UI
    # pre-fills the labelled offline rehearsal
    assert film["backend"] is None
    assert FilmRequest.model_fields["backend"].default == "offline"
