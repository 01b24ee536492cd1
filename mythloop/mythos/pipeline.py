"""The film's steps as plain functions over a `FilmSession` (no Prefect here).

`tasks/film.py` wraps each step as a Prefect task and `flows/film.py` chains them:
six reasoning stages -> codegen -> per scene: verify -> render -> scoped repair -> stitch.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from mythloop.data import data_path
from mythloop.fileio import (
    write_json_atomic,
    write_json_if_changed,
    write_text_atomic,
    write_text_if_changed,
)
from mythloop.llm import FallbackLadder, get_backend
from mythloop.llm.replay import cassette_path
from mythloop.mythos.code.extract import ExtractionError, extract_json_object, extract_python_block
from mythloop.mythos.code.extract import find_scene_class as _find_scene_class
from mythloop.mythos.code.scenes import FilmSplitError, scene_from_reply, split_film
from mythloop.mythos.plan.prompts import (
    codegen_prompt,
    repair_prompt,
    stage_prompt,
    system_prompt,
)
from mythloop.mythos.plan.request import FilmRequest
from mythloop.mythos.plan.stages import load_charter, stage_by_slug, validate_artifact
from mythloop.mythos.records import CodegenResult, RepairResult, SceneCode, StageOutcome
from mythloop.mythos.rundir import Manifest, create_run_dir
from mythloop.settings import get_settings

if TYPE_CHECKING:
    from mythloop.llm import Backend, Completion, FallbackLadder

__all__ = ["FilmSession", "StageFailed", "SceneCodeError", "open_session", "cache_basis",
           "SCENE_FILE"]

SCENE_FILE = "mythos_scene.py"


class StageFailed(RuntimeError):
    """A reasoning stage returned an unusable artifact twice: stop instead of filming nothing."""


class SceneCodeError(RuntimeError):
    """Codegen or a repair returned no usable Manim scene."""


@dataclass
class FilmSession:
    """One film run: the request, its run dir and manifest, and the model backend."""

    request: FilmRequest
    run_dir: Path
    manifest: Manifest
    backend: Backend | FallbackLadder
    timeout: float
    model_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def model_label(self) -> str:
        return getattr(self.backend, "model", None) or self.request.model or "default"

    # --- model calls ----------------------------------------------------------------
    def call(self, prompt: str, key: str) -> Completion:
        """One model call; counted, and fallback switches copied into the manifest."""
        with self._lock:
            self.model_calls += 1
        completion = self.backend.complete(prompt, system=system_prompt(), timeout=self.timeout,
                                           key=key)
        switches = getattr(self.backend, "switches", None)
        if switches:
            self.manifest.update(model=self.model_label, model_fallbacks=list(switches))
        return completion

    def repair_unavailable(self, index: int, attempt: int) -> str | None:
        """Why no model can make repair `attempt` of scene `index` (None: one can be asked):
        the offline stand-ins repair nothing, and a replay answers only what its cassettes
        recorded (a layout repair of findings nobody recorded has no answer)."""
        if self.request.backend == "offline":
            return "the offline stand-ins are no model and repair nothing"
        cassette_dir = getattr(self.backend, "cassette_dir", None)
        topic = getattr(self.backend, "topic", None)
        if self.request.backend == "replay" and cassette_dir is not None and topic:
            key = f"repair-scene-{index:02d}-{attempt}"
            if not cassette_path(cassette_dir, topic, key).is_file():
                return f"the replay cassettes hold no recorded {key} and no model is there"
        return None

    # --- reasoning stages ------------------------------------------------------------
    def run_stage(self, slug: str, input_artifact: dict) -> StageOutcome:
        """Call the stage's agent; retry once with the rejection reason; raise StageFailed."""
        spec = stage_by_slug(slug)
        stem = spec.artifact_name.split(".")[0]
        started = time.perf_counter()
        prompt = stage_prompt(slug, input_artifact)
        completion = self.call(prompt, key=slug)
        raw_path = self.run_dir / f"{stem}.raw.txt"
        write_text_atomic(raw_path, completion.text)
        artifact, problem = _parse_stage(slug, completion.text)
        retried = False
        if problem:
            retried = True
            completion = self.call(stage_prompt(slug, input_artifact, rejection=problem),
                                   key=slug)
            raw_path = self.run_dir / f"{stem}.retry.raw.txt"
            write_text_atomic(raw_path, completion.text)
            artifact, problem = _parse_stage(slug, completion.text)
            if problem:
                raise StageFailed(
                    f"stage {slug!r} returned an unusable artifact twice ({problem}); "
                    f"stopping instead of filming an empty story. Raw trace: {raw_path}")
        return StageOutcome(artifact=artifact, raw=completion.text, retried=retried,
                            model=completion.model,
                            seconds=round(time.perf_counter() - started, 3),
                            simulated=bool(getattr(completion, "simulated", False)))

    def record_stage(self, slug: str, outcome: StageOutcome, *, task_run_id: str | None,
                     cached: bool, attempts: int) -> dict:
        """Write the stage's artifact (and raw trace for cached ones) and its manifest row."""
        spec = stage_by_slug(slug)
        # a resumed film leaves what it had written as it was (cached: the same content)
        write_json_if_changed(self.run_dir / spec.artifact_name, outcome.artifact)
        stem = spec.artifact_name.split(".")[0]
        if cached:
            write_text_if_changed(self.run_dir / f"{stem}.raw.txt", outcome.raw)
        self.manifest.add_stage({
            "stage": slug, "artifact": spec.artifact_name, "seconds": outcome.seconds,
            "retried": outcome.retried, "cached": cached, "attempts": attempts,
            "model": outcome.model, "prefect_task_run_id": task_run_id})
        return outcome.artifact

    # --- codegen and repair ------------------------------------------------------------
    def codegen(self, dossier: dict) -> CodegenResult:
        """The dossier -> one file: a shared header and N Scene classes (the film's scenes)."""
        started = time.perf_counter()
        completion = self.call(codegen_prompt(dossier), key="codegen")
        write_text_atomic(self.run_dir / "07_codegen.raw.txt", completion.text)
        code, scene = _scene_from(completion.text, "codegen")
        try:
            split = split_film(code)
        except FilmSplitError as exc:
            raise SceneCodeError(f"codegen: {exc}") from exc
        return CodegenResult(code=code, scene_name=scene, header=split.header,
                             scenes=[SceneCode(index=u.index, name=u.name, code=u.code,
                                               narration=u.narration)
                                     for u in split.scenes],
                             raw=completion.text, model=completion.model,
                             seconds=round(time.perf_counter() - started, 3))

    def repair_scene(self, index: int, name: str, attempt: int, header: str, scene_code: str,
                     failure: str) -> RepairResult:
        """Scoped repair: one failing scene class + its error tail (header read-only). A repair
        this run dir already made of the same scene code for the same error (a resumed film)
        is read back from `scenes/repair-scene-03-1.json`: no model call."""
        key = f"repair-scene-{index:02d}-{attempt}"
        scenes_dir = self.run_dir / "scenes"
        scenes_dir.mkdir(exist_ok=True)
        record = scenes_dir / f"{key}.json"
        basis = self._repair_basis(name, attempt, header, scene_code, failure)
        done = _finished_repair(record, basis, name)
        if done is not None:
            return done
        started = time.perf_counter()
        completion = self.call(repair_prompt(scene_code, failure, header=header,
                                             scene_name=name), key=key)
        write_text_atomic(scenes_dir / f"{key}.raw.txt", completion.text)
        code = extract_python_block(completion.text)
        if not code.strip():
            raise SceneCodeError(f"{key}: the model returned no Python code")
        try:
            new_code = scene_from_reply(code, name)
        except FilmSplitError as exc:
            raise SceneCodeError(f"{key}: {exc}") from exc
        result = RepairResult(code=new_code, raw=completion.text, model=completion.model,
                              seconds=round(time.perf_counter() - started, 3))
        write_json_atomic(record, {"basis": basis, "repair": result.model_dump(mode="json")})
        return result

    def _repair_basis(self, name: str, attempt: int, header: str, scene_code: str,
                      failure: str) -> str:
        """What a repair depends on: the scene, its error, the backend and model asked."""
        payload = json.dumps({"name": name, "attempt": attempt, "header": header,
                              "code": scene_code, "failure": failure,
                              "backend": self.request.backend, "model": self.request.model,
                              "system": system_prompt()}, sort_keys=True)
        return hashlib.sha256(payload.encode("utf-8")).hexdigest()

    def write_scene(self, code: str, version: str) -> Path:
        """The current scene is always mythos_scene.py; each version is kept beside it."""
        write_text_if_changed(self.run_dir / f"mythos_scene.{version}.py", code)
        return write_text_if_changed(self.run_dir / SCENE_FILE, code)


REPAIR_RECORD_BYTES = 4 << 20  # a repair's record: a scene class and the reply it came from


def _finished_repair(record: Path, basis: str, name: str) -> RepairResult | None:
    """The repair `record` holds, when it was made for `basis` and still reads as a scene
    class NAME (None otherwise: the repair is asked for again)."""
    try:
        if record.stat().st_size > REPAIR_RECORD_BYTES:
            return None
        data = json.loads(record.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("basis") != basis:
            return None
        done = RepairResult.model_validate(data.get("repair"))
        code = scene_from_reply(done.code, name)
    except (OSError, ValueError, FilmSplitError):
        return None
    return done.model_copy(update={"code": code, "reused": True})


def _parse_stage(slug: str, text: str) -> tuple[dict | None, str | None]:
    try:
        artifact = extract_json_object(text)
    except ExtractionError as exc:
        return None, str(exc)
    return artifact, validate_artifact(slug, artifact)


def _scene_from(text: str, step: str) -> tuple[str, str]:
    code = extract_python_block(text)
    if not code.strip():
        raise SceneCodeError(f"{step}: the model returned no Python code")
    try:
        scene = _find_scene_class(code)
    except (ValueError, SyntaxError) as exc:
        scene = ""
        if not isinstance(exc, SyntaxError):
            raise SceneCodeError(f"{step}: {exc}") from exc
    return code, scene


def cache_basis(step: str, input_obj: object, request: FilmRequest) -> str:
    """What a cached stage result depends on: the step's charter text, its input, backend, model.

    Rerunning a film after a failed render therefore calls no model for finished steps,
    while editing a charter or switching model invalidates exactly the affected steps.
    """
    if step == "codegen":
        charter = load_charter("codegen.md")
    else:
        charter = load_charter(stage_by_slug(step).charter_file)
    payload = json.dumps({"step": step, "charter": charter, "system": system_prompt(),
                          "input": input_obj, "backend": request.backend,
                          "model": request.model, "topic": request.prompt
                          if request.backend == "replay" else None,
                          "recording": _recording_digest(request, step)},
                         sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def _recording_digest(request: FilmRequest, step: str) -> str | None:
    """With replay, the sha256 of the cassette that answers `step` (a re-recorded cassette
    is a new answer, not a cached one); None otherwise or when there is none."""
    if request.backend != "replay":
        return None
    folder = os.environ.get("MYTHLOOP_CASSETTE_DIR")
    path = cassette_path(Path(folder) if folder else data_path("fixtures", "cassettes"),
                         request.prompt, step)
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def open_session(request: FilmRequest, *, flow_run_id: str | None = None) -> FilmSession:
    """Create the run dir, the manifest and the backend for one film."""
    settings = get_settings()
    runs_root = request.runs_dir or settings.resolved_runs_dir
    if request.resume_dir is not None:  # an interrupted film continues where it was
        run_dir = Path(request.resume_dir).expanduser().resolve()
        if not (run_dir / "manifest.json").is_file():
            raise ValueError(f"{run_dir} holds no film (no manifest.json) to resume")
    else:
        run_dir = create_run_dir(runs_root, request.prompt)
    options: dict = {}
    if request.backend == "replay":
        options["topic"] = request.prompt
        if os.environ.get("MYTHLOOP_CASSETTE_DIR"):  # tests and benches: their own recordings
            options["cassette_dir"] = os.environ["MYTHLOOP_CASSETTE_DIR"]
    elif request.backend in ("claude", "gemini", "codex", "openai"):
        if request.model or settings.model:
            options["model"] = request.model or settings.model
        if settings.command and request.backend != "openai":
            options["command"] = settings.command
    primary = get_backend(request.backend, **options)
    backend: Backend | FallbackLadder = primary
    fallbacks = request.fallbacks or settings.model_fallbacks
    if fallbacks and request.backend not in ("offline", "replay"):
        backend = FallbackLadder(primary, fallbacks)
    manifest = Manifest(
        run_dir, prompt=request.prompt, backend=request.backend,
        model=getattr(backend, "model", None) or request.model,
        offline=request.backend == "offline", replay=request.backend == "replay",
        request=request.model_dump(mode="json"), prefect_flow_run_id=flow_run_id,
        stages=[])
    return FilmSession(request=request, run_dir=run_dir, manifest=manifest, backend=backend,
                       timeout=request.stage_timeout or settings.timeout)

