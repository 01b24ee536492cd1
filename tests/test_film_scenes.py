"""Films as scenes: the split, the stitch, scoped repair, the scene cache, a scene that stays broken.

The flow tests replay a tiny recorded film (three one-second scenes without LaTeX, scene 2
with a real runtime error) from a cassette folder written here, so real Manim renders stay
short. Each test tags its header with a fresh id so the session's scene cache starts cold.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from waiting import settle

from mythloop.llm.replay import write_cassette
from mythloop.mythos.code.scenes import (
    join_film,
    scene_cache_key,
    scene_file_text,
    scene_from_reply,
    split_film,
)
from mythloop.mythos.media.avmux import concat_videos, duration_of
from mythloop.mythos.plan.prompts import stage_prompt
from mythloop.mythos.plan.request import FilmRequest
from mythloop.mythos.plan.stages import STAGES
from mythloop.mythos.sandbox.verify import verify_scene
from mythloop.mythos.standins.offline import offline_response

HEADER = '''from manim import *

# test film {tag}
BG = "#0c0c0b"
CORAL = "#d97757"
BLUE = "#6a9bcc"
OLIVE = "#788c5d"


def tiny_label(text):
    return Text(text, font_size=30, color="#faf9f5").to_edge(DOWN)


class TinyBase(Scene):
    def open_scene(self):
        self.camera.background_color = BG
'''

SCENE_1 = '''class TinyFilm01Square(TinyBase):
    def construct(self):
        self.open_scene()
        self.add(Square(color=CORAL))
        self.wait(1)
'''

SCENE_2_BROKEN = '''class TinyFilm02Circle(TinyBase):
    def construct(self):
        self.open_scene()
        self.add(Square(color=CORAL).shift(3 * LEFT))
        self.add(Cirle(color=BLUE))
        self.wait(1)
'''

SCENE_2_FIXED = SCENE_2_BROKEN.replace("Cirle(", "Circle(")
SCENE_2_STILL_BROKEN = SCENE_2_BROKEN.replace("Cirle(", "Circel(")

SCENE_3 = '''class TinyFilm03Triangle(TinyBase):
    def construct(self):
        self.open_scene()
        self.add(Square(color=CORAL).shift(3 * LEFT), Circle(color=BLUE))
        self.add(Triangle(color=OLIVE).shift(3 * RIGHT))
        self.wait(1)
'''


def _fence(code: str) -> str:
    return "```python\n" + code + "```\n"


def _stage_cassettes(root: Path, topic: str) -> None:
    """The six planning stages' cassettes for TOPIC: the offline stand-in's answers."""
    artifact: dict = {"user_prompt": topic}
    for spec in STAGES:
        prompt = stage_prompt(spec.slug, artifact)
        answer = offline_response(spec.slug, prompt)
        write_cassette(root, topic, spec.slug, prompt, "test recording", answer)
        artifact = json.loads(answer)


def _tiny_cassettes(root: Path, topic: str, repair: str, *,
                    scenes: tuple[str, ...] = (SCENE_1, SCENE_2_BROKEN, SCENE_3),
                    repaired: str = "scene-02") -> Path:
    """A recorded film for TOPIC: offline stand-in stages, tiny split codegen, one repair
    (of scene REPAIRED)."""
    tag = uuid.uuid4().hex
    _stage_cassettes(root, topic)
    code = join_film(HEADER.format(tag=tag), list(scenes))
    write_cassette(root, topic, "codegen", None, "test recording", _fence(code))
    write_cassette(root, topic, f"repair-{repaired}-1", None, "test recording", _fence(repair))
    return root


def _manifest(run_dir: Path | str) -> dict:
    return json.loads((Path(run_dir) / "manifest.json").read_text())


def _film(request: FilmRequest):
    from mythloop_flows.film import film

    return film(request, return_state=True)


def _task_runs(flow_run_id: str, expected: set[str]) -> list:
    """Task runs of a flow run (stored from events, so poll briefly)."""
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        return settle(lambda: client.read_task_runs(flow_run_filter=FlowRunFilter(
            id=FlowRunFilterId(any_=[uuid.UUID(flow_run_id)])), limit=200), 30,
            until=lambda runs: expected <= {run.name for run in runs})


def _task_run_log(task_run_id, wanted: str) -> str:
    """A task run's log as the UI shows it (stored from events, so poll briefly)."""
    from prefect import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterTaskRunId

    with get_client(sync_client=True) as client:
        logs = settle(lambda: client.read_logs(log_filter=LogFilter(
            task_run_id=LogFilterTaskRunId(any_=[task_run_id])), limit=200), 30,
            until=lambda found: any(wanted in log.message for log in found))
    return "\n".join(log.message for log in logs)


def _task_run_names(flow_run_id: str, expected: set[str]) -> set[str]:
    return {run.name for run in _task_runs(flow_run_id, expected)}


def _parents(run) -> list:
    """The task runs a task run was called inside (Prefect's `__parents__` task input)."""
    return [getattr(parent, "id", None) for parent in run.task_inputs.get("__parents__", [])]


def _assert_steps_run_inside_their_scene(flow_run_id: str, labels: list[str],
                                         failed: frozenset[str] = frozenset()) -> None:
    """The UI's run graph: one `scene-0N` task run per scene at the film's top level, and
    each of that scene's verify, render and repair runs inside it; each Completed but the
    renders named in FAILED, which are Failed."""
    runs = _task_runs(flow_run_id, set(labels))
    by_name = {run.name: run for run in runs}
    scenes = {label: by_name[label] for label in labels}
    for label, scene in scenes.items():
        assert _parents(scene) == [], f"{label} is not at the film's top level"
        assert scene.state_type.value == "COMPLETED", (label, scene.state_name)
    steps = [run for run in runs if run.name.startswith(("verify-", "render-", "repair-"))]
    assert steps
    for run in steps:
        label = next(lb for lb in labels if run.name.split(" ")[0].startswith(
            (f"verify-{lb}", f"render-{lb}", f"repair-{lb}-")))
        assert _parents(run) == [scenes[label].id], (run.name, _parents(run))
        expected_state = "Failed" if run.name in failed else "Completed"
        assert run.state_name == expected_state, (run.name, run.state_name)


# --- the split -----------------------------------------------------------------------
def test_split_cuts_header_and_scenes_in_plan_order():
    code = join_film(HEADER.format(tag="x"), [SCENE_1, SCENE_2_FIXED, SCENE_3])
    split = split_film(code)
    assert [u.name for u in split.scenes] == ["TinyFilm01Square", "TinyFilm02Circle",
                                              "TinyFilm03Triangle"]
    assert [u.label for u in split.scenes] == ["scene-01", "scene-02", "scene-03"]
    # the base class and helpers stay in the header; no scene class does
    assert "class TinyBase(Scene)" in split.header and "def tiny_label" in split.header
    assert "TinyFilm" not in split.header
    for unit in split.scenes:
        text = scene_file_text(split.header, unit.code)
        assert split_film(text).scenes[0].name == unit.name  # each file renders one scene
        assert verify_scene(text).ok
    assert split_film(join_film(split.header, [u.code for u in split.scenes])) == split


def test_split_of_the_recorded_heat_film_has_five_scenes():
    from mythloop.data import data_path
    from mythloop.mythos.code.extract import extract_python_block

    record = json.loads(data_path("fixtures", "cassettes", "the-heat-equation",
                                  "codegen.json").read_text())
    split = split_film(extract_python_block(record["response"]))
    assert len(split.scenes) == 5 and "class HeatEquationScene(ThreeDScene)" in split.header


def test_repair_reply_keeps_only_the_scene_class():
    reply = join_film("from manim import *\nBG = 'changed by the model'\n", [SCENE_2_FIXED])
    assert scene_from_reply(reply, "TinyFilm02Circle").strip() == SCENE_2_FIXED.strip()
    with pytest.raises(ValueError, match="none is TinyFilm09"):
        scene_from_reply(join_film("from manim import *\n", [SCENE_1, SCENE_3]), "TinyFilm09")


def test_cache_key_follows_code_header_and_quality():
    base = scene_cache_key("H", SCENE_1, "l", "A")
    assert base == scene_cache_key("H", SCENE_1, "l", "A")
    assert base != scene_cache_key("H2", SCENE_1, "l", "A")
    assert base != scene_cache_key("H", SCENE_3, "l", "A")
    assert base != scene_cache_key("H", SCENE_1, "m", "A")


def test_a_repair_made_in_the_run_dir_is_read_back_not_asked_again(tmp_path, monkeypatch):
    """A resumed film's repair of the same scene code for the same error is read from the
    run dir (no model call); other code, another error or a record not made for them asks
    the model again."""
    from mythloop.mythos.pipeline import open_session

    topic = "tiny scenes repair record"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR", str(_tiny_cassettes(
        tmp_path / "cassettes", topic, SCENE_2_FIXED)))
    header = HEADER.format(tag="record")
    session = open_session(FilmRequest(prompt=topic, backend="replay", runs_dir=tmp_path))

    def repair(code: str = SCENE_2_BROKEN, failure: str = "NameError: name 'Cirle'"):
        return session.repair_scene(2, "TinyFilm02Circle", 1, header, code, failure)

    first = repair()
    assert not first.reused and session.model_calls == 1
    record = session.run_dir / "scenes" / "repair-scene-02-1.json"
    assert record.is_file()
    again = repair()  # the resume
    assert again.reused and again.code == first.code and session.model_calls == 1
    assert repair(failure="NameError: name 'Circel'").reused is False  # another error
    assert repair(code=SCENE_2_STILL_BROKEN).reused is False  # other code
    assert session.model_calls == 3
    data = json.loads(record.read_text())
    data["repair"]["code"] = "import os\nos.system('x')\n"  # no scene class in it
    record.write_text(json.dumps(data))
    assert repair(code=SCENE_2_STILL_BROKEN).reused is False and session.model_calls == 4


# --- the stitch ----------------------------------------------------------------------
def test_concat_durations_add_up(tmp_path):
    clips = []
    for number, seconds in enumerate((1.0, 1.5, 2.0)):
        clip = tmp_path / f"clip{number}.mp4"
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                        f"testsrc=size=160x120:rate=15:duration={seconds}", "-pix_fmt",
                        "yuv420p", "-c:v", "libx264", str(clip)], check=True)
        clips.append(clip)
    film = concat_videos(clips, tmp_path / "film.mp4")
    total = sum(duration_of(c) for c in clips)
    assert abs(duration_of(film) - total) <= 0.5
    assert abs(total - 4.5) <= 0.5
    assert not list(tmp_path.glob(".film*"))  # no partial file or list left behind


def test_concat_of_a_missing_scene_fails_without_a_film(tmp_path):
    with pytest.raises(RuntimeError, match="could not stitch"):
        concat_videos([tmp_path / "missing.mp4"], tmp_path / "film.mp4")
    assert not (tmp_path / "film.mp4").exists()


# --- the flow ------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_failing_scene_is_repaired_alone_and_a_rerun_renders_nothing_new(tmp_path,
                                                                           monkeypatch):
    topic = "tiny scenes repaired"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR",
                       str(_tiny_cassettes(tmp_path / "cassettes", topic, SCENE_2_FIXED)))
    request = FilmRequest(prompt=topic, backend="replay", render=True, render_workers=2,
                          runs_dir=tmp_path / "runs")
    state = _film(request)
    assert state.is_completed(), state.message
    result = state.result()
    manifest = _manifest(result.run_dir)
    scenes = manifest["scenes"]
    assert [s["name"] for s in scenes] == ["TinyFilm01Square", "TinyFilm02Circle",
                                           "TinyFilm03Triangle"]
    for scene in scenes:
        assert scene["ok"] is True and Path(scene["video"]).is_file()
        assert scene["duration"] > 0.5 and scene["render_seconds"] > 0
        assert scene["cache"] == "miss" and Path(scene["file"]).is_file()
    assert [s["attempts"] for s in scenes] == [1, 2, 1]
    # only scene 2 was repaired, with its own error, and only it rendered twice
    [repair] = manifest["repairs"]
    assert repair["scene"] == 2 and "Cirle" in repair["failure"]
    assert [r["kind"] for r in scenes[1]["renders"]] == ["scene_error", "ok"]
    assert sorted(r["scene"] for r in manifest["renders"]) == [1, 2, 2, 3]
    assert manifest["model_calls"] == len(STAGES) + 2  # stages, codegen, one repair
    # the repaired scene file holds the fix, the header unchanged; the others untouched
    run_dir = Path(result.run_dir)
    assert "Circle(color=BLUE)" in (run_dir / "scenes" / "scene-02.py").read_text()
    assert (run_dir / "scenes" / "scene-01.py").read_text() == \
        (run_dir / "scenes" / "scene-01.codegen.py").read_text()
    # the stitched film: in the run dir, as long as its scenes
    film = Path(result.video_path)
    assert film == run_dir / "film.mp4" and film.is_file()
    assert abs(duration_of(film) - sum(s["duration"] for s in scenes)) <= 0.5
    assert manifest["film"]["duration"] == pytest.approx(duration_of(film), abs=0.01)
    # the Prefect UI shows one render task run per scene (and the re-render of scene 2)
    expected = {"render-scene-01", "render-scene-02", "render-scene-02 (after repair-1)",
                "render-scene-03", "repair-scene-02-1", "stitch"}
    assert expected <= _task_run_names(manifest["prefect_flow_run_id"], expected)
    _assert_steps_run_inside_their_scene(manifest["prefect_flow_run_id"],
                                         ["scene-01", "scene-02", "scene-03"],
                                         failed=frozenset({"render-scene-02"}))

    # The same film again: stages and codegen cached, scenes 1 and 3 and the repaired
    # scene 2 come from the scene cache; only the recorded broken scene 2 renders again.
    again = _film(request)
    assert again.is_completed(), again.message
    second = _manifest(again.result().run_dir)
    rendered = [(r["scene"], r["cache"]) for r in second["renders"]]
    assert sorted(rendered) == [(1, "hit"), (2, "hit"), (2, "miss"), (3, "hit")]
    assert second["model_calls"] == 1  # the repair of scene 2
    assert abs(second["film"]["duration"] - manifest["film"]["duration"]) <= 0.1


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_rerun_after_a_failed_scene_renders_only_that_scene(tmp_path, monkeypatch):
    topic = "tiny scenes rerun"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR",
                       str(_tiny_cassettes(tmp_path / "cassettes", topic, SCENE_2_FIXED)))
    runs = tmp_path / "runs"
    first = _film(FilmRequest(prompt=topic, backend="replay", render=True, max_repairs=0,
                              runs_dir=runs))
    assert first.is_failed()
    with pytest.raises(Exception, match=r"scene-02 \(TinyFilm02Circle\) still fails"):
        first.result()
    [run_dir] = sorted((runs / "mythos").iterdir())
    manifest = _manifest(run_dir)
    assert [f["scene"] for f in manifest["failed_scenes"]] == [2]
    assert (run_dir / "scenes" / "scene-01.mp4").is_file()  # the other scenes are kept
    assert (run_dir / "scenes" / "scene-03.mp4").is_file()
    assert not (run_dir / "film.mp4").exists()

    second = _film(FilmRequest(prompt=topic, backend="replay", render=True, max_repairs=1,
                               runs_dir=runs))
    assert second.is_completed(), second.message
    manifest = _manifest(second.result().run_dir)
    fresh_renders = [r["scene"] for r in manifest["renders"] if r["cache"] == "miss"]
    assert fresh_renders == [2, 2]  # the recorded broken scene 2, then its repair
    assert {r["scene"] for r in manifest["renders"] if r["cache"] == "hit"} == {1, 3}
    assert manifest["model_calls"] == 1


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness")
def test_a_scene_that_still_fails_fails_the_film_naming_it(tmp_path, monkeypatch):
    topic = "tiny scenes still broken"
    monkeypatch.setenv("MYTHLOOP_CASSETTE_DIR",
                       str(_tiny_cassettes(tmp_path / "cassettes", topic, SCENE_2_STILL_BROKEN)))
    runs = tmp_path / "runs"
    state = _film(FilmRequest(prompt=topic, backend="replay", render=True, max_repairs=1,
                              runs_dir=runs))
    assert state.is_failed()
    with pytest.raises(Exception) as info:
        state.result()
    message = str(info.value)
    assert "scene-02 (TinyFilm02Circle) still fails after 1 repair(s)" in message
    assert "Circel" in message and "2 rendered scene(s) kept" in message
    [run_dir] = sorted((runs / "mythos").iterdir())
    manifest = _manifest(run_dir)
    [failed] = manifest["failed_scenes"]
    assert failed["scene"] == 2 and failed["name"] == "TinyFilm02Circle"
    assert [Path(p).name for p in manifest["kept_scenes"]] == ["scene-01.mp4", "scene-03.mp4"]
    assert all(Path(p).is_file() for p in manifest["kept_scenes"])
    assert [s["ok"] for s in manifest["scenes"]] == [True, False, True]
    assert manifest["scenes"][1]["attempts"] == 2 and len(manifest["repairs"]) == 1
    assert "scene-02" in manifest["failed"]["error"]
    # in the UI: scene-02's own task run failed, the others completed, and the steps inside
    # scene-02 keep their own states (Prefect would otherwise mark them RolledBack): both of
    # its renders Failed, each with the render's own error in its log
    runs = _task_runs(manifest["prefect_flow_run_id"], {"scene-01", "scene-02", "scene-03"})
    states = {run.name: run.state_type.value for run in runs}
    assert [states[f"scene-0{i}"] for i in (1, 2, 3)] == ["COMPLETED", "FAILED", "COMPLETED"]
    assert states["render-scene-02"] == states["render-scene-02 (after repair-1)"] == "FAILED"
    assert states["render-scene-01"] == states["render-scene-03"] == "COMPLETED"
    by_name = {run.name: run for run in runs}
    for name, error in (("render-scene-02", "Cirle"),
                        ("render-scene-02 (after repair-1)", "Circel")):
        assert "scene_error" in by_name[name].state.message
        logged = _task_run_log(by_name[name].id, error)
        assert error in logged and "NameError" in logged, logged[-2000:]
        assert "\x1b" not in logged  # (the render's colours cleaned away)


@pytest.mark.slow
def test_euler_cassette_scene_error_is_real_and_its_scoped_repair_renders(tmp_path):
    """Scene 1 of the recorded Euler film fails in a real render; the recorded repair of that
    scene alone (header untouched) renders. (The heat film is rendered whole elsewhere.)"""
    from mythloop.data import data_path
    from mythloop.mythos.code.extract import extract_python_block
    from mythloop.mythos.sandbox.render import render_scene

    def code(key: str) -> str:
        path = data_path("fixtures", "cassettes", "euler-s-identity", f"{key}.json")
        return extract_python_block(json.loads(path.read_text())["response"])

    split = split_film(code("codegen"))
    scene = split.scenes[0]
    fixed = scene_from_reply(code("repair-scene-01-1"), scene.name)
    outcomes = {}
    for version, scene_code in (("broken", scene.code), ("fixed", fixed)):
        path = tmp_path / version / "scene.py"
        path.parent.mkdir()
        path.write_text(scene_file_text(split.header, scene_code))
        outcomes[version] = render_scene(path, scene=scene.name, quality="l", timeout=600,
                                         out_dir=path.parent)
    assert outcomes["broken"].kind == "scene_error", outcomes["broken"].message
    # get_part_by_tex found no part, so SurroundingRectangle got None instead of a mobject
    assert "Expected all inputs for parameter mobjects" in outcomes["broken"].log_tail
    assert outcomes["fixed"].ok, outcomes["fixed"].message
    assert duration_of(outcomes["fixed"].video_path) > 5.0
