"""A Mythos film on Prefect: six reasoning stages -> codegen -> N scenes -> stitched film.

Every step is its own task run, named after the step (`intent` ... `scene-composer`,
`codegen`, then one task run per scene, `scene-03`, whose own steps run inside it:
`verify-scene-03`, `render-scene-03`, `repair-scene-03-1`, ...; then `stitch`), with its own
retries and timeout, so the Prefect UI shows each stage, scene, retry and timeout by name.
Scenes render side by side on Prefect's ThreadPoolTaskRunner (at most `render_workers` at
once), each in the render sandbox; a failing scene is repaired alone and a rerun renders only
the scenes whose code changed or failed (the scene cache in mythloop.mythos.code.scenes). What
follows each step (repair, keep the last good video, give up) is decided in
mythloop.mythos.scene_policy, recorded by mythloop.mythos.scene_book; this module keeps the
order of the steps.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, cast
from uuid import UUID

from prefect import flow
from prefect.artifacts import (
    create_image_artifact,
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.futures import PrefectFuture, as_completed
from prefect.runtime import flow_run
from prefect.states import Crashed, State
from prefect.transactions import CommitMode, transaction
from prefect.utilities.annotations import quote

from mythloop.fileio import write_text_if_changed
from mythloop.mythos.code.scenes import SceneUnit, scene_cache_key, scene_file_text, scene_narration
from mythloop.mythos.media.filmmedia import scene_narrations
from mythloop.mythos.pipeline import SCENE_FILE, FilmSession, cache_basis, open_session
from mythloop.mythos.plan.request import FilmRequest
from mythloop.mythos.plan.stages import STAGES
from mythloop.mythos.records import CodegenResult, FilmResult, SceneRender, StageOutcome
from mythloop.mythos.rundir import slugify, utc_now
from mythloop.mythos.sandbox import render_pool
from mythloop.mythos.sandbox.layout import Finding, scene_zooms
from mythloop.mythos.sandbox.render import prewarm
from mythloop.mythos.scene_book import SceneBook
from mythloop.mythos.scene_policy import (
    NO_REPAIR_KINDS,
    FilmFailed,
    Good,
    RenderView,
    RepairRules,
    SceneFailed,
    Step,
    after_render,
    after_verify,
    before_repair,
    last_line,
)
from mythloop.mythos.summary import film_summary
from mythloop.preview import preview_url_for
from mythloop.procs import STOPPING, stop_stays_a_stop
from mythloop.settings import get_settings
from mythloop_tasks import film as steps
from mythloop_tasks.common import TaskPool, mythloop_task, say, with_timeout

__all__ = ["film", "scene", "FilmFailed", "SceneFailed", "NO_REPAIR_KINDS"]


def _run_name() -> str:
    request = flow_run.parameters.get("request") or {}
    prompt = request.get("prompt") if isinstance(request, dict) else getattr(request, "prompt", "")
    return f"film-{slugify(prompt or 'film')}"


class _Progress:
    """A progress artifact updated after every step (from any scene's thread)."""

    def __init__(self, total: int, run_dir: Path) -> None:  # total grows with scenes/repairs
        self.total, self.done = total, 0
        self.lock = threading.Lock()
        self.id: UUID = create_progress_artifact(  # type: ignore[assignment]  # sync here
            progress=0.0, description=f"Film progress: {run_dir}")

    def step(self, extra_total: int = 0) -> None:
        with self.lock:
            self.total += extra_total
            self.done += 1
            update_progress_artifact(self.id, min(100.0, 100.0 * self.done / self.total))


def _state_meta(state: State) -> tuple[str | None, bool]:
    details = state.state_details
    return (str(details.task_run_id) if details and details.task_run_id else None,
            state.name == "Cached")


@flow(name="film", flow_run_name=_run_name)
def film(request: FilmRequest) -> FilmResult:
    """Turn a prompt into a rendered Manim film: six agents, codegen, verify, render, repair."""
    session = open_session(request, flow_run_id=str(flow_run.id) if flow_run.id else None)
    say(f"[film] run dir: {session.run_dir}")
    if request.render and request.resume_dir is None:  # (started already by the CLI)
        prewarm(request.render_workers or os.cpu_count() or 1)  # manim imports overlap the stages
    progress = _Progress(len(STAGES) + 2 + (1 if request.render else 0), session.run_dir)
    try:
        with stop_stays_a_stop():  # a Ctrl-C that cut Prefect's engine: Crashed, not Failed
            result = _make_film(session, request, progress)
    except BaseException as exc:
        session.manifest.update(failed={"error": " ".join(str(exc).split())[:2000],
                                        "type": type(exc).__name__},
                                model_calls=session.model_calls, completed_utc=utc_now())
        _publish_summary(session)
        raise
    _publish_summary(session)
    return result


def _make_film(session: FilmSession, request: FilmRequest, progress: _Progress) -> FilmResult:
    manifest = session.manifest
    artifact: dict = {"user_prompt": request.prompt}
    dossier: dict = {}
    for spec in STAGES:
        basis = cache_basis(spec.slug, artifact, request)
        task = with_timeout(steps.run_stage, session.timeout + 60, name=spec.slug,
                            task_run_name=spec.slug, refresh_cache=request.fresh)
        state = task(quote(session), spec.slug, artifact, basis, return_state=True)
        # a failed stage raises here, with its own message; a result cached before stage
        # outcomes were models comes back as a dict
        outcome = StageOutcome.model_validate(state.result())
        task_run_id, cached = _state_meta(state)
        artifact = session.record_stage(spec.slug, outcome, task_run_id=task_run_id,
                                        cached=cached, attempts=0 if cached else 1)
        dossier[spec.artifact_name] = artifact
        say(f"[film] {spec.slug:<16} -> {spec.artifact_name}{' (cached)' if cached else ''}")
        progress.step()

    basis = cache_basis("codegen", dossier, request)
    coded = with_timeout(steps.codegen, session.timeout + 60, task_run_name="codegen",
                         refresh_cache=request.fresh)(
        quote(session), dossier, basis, return_state=True)
    generated = CodegenResult.model_validate(coded.result())
    task_run_id, cached = _state_meta(coded)
    if cached:
        write_text_if_changed(session.run_dir / "07_codegen.raw.txt", generated.raw)
    header = generated.header
    units = [SceneUnit(s.index, s.name, s.code, s.narration or scene_narration(s.code))
             for s in generated.scenes]
    session.write_scene(generated.code, "codegen")
    scenes_dir = session.run_dir / "scenes"
    scenes_dir.mkdir(exist_ok=True)
    write_text_if_changed(scenes_dir / "header.py", header)
    manifest.add_stage({"stage": "codegen", "artifact": SCENE_FILE,
                        "seconds": generated.seconds, "cached": cached,
                        "model": generated.model, "prefect_task_run_id": task_run_id})
    manifest.update(scene_count=len(units), shared_header=str(scenes_dir / "header.py"))
    say(f"[film] codegen          -> {SCENE_FILE} ({len(units)} scene(s): "
        f"{', '.join(u.name for u in units)}){' (cached)' if cached else ''}")
    progress.step()
    # what is left: one render per scene, the stitch and the subtitles/voice step (or the
    # static checks alone)
    progress.total = progress.done + (len(units) + 2 if request.render else 1)

    narration, sources = scene_narrations([u.narration for u in units],
                                          dossier.get("03_curriculum.json") or {})
    book = SceneBook(session, header, units, say=say)
    book.open(narration, sources)
    video = _FilmScenes(session, request, progress, book, narration).run()
    manifest.update(scene_file=str(session.run_dir / SCENE_FILE),
                    scene_name=units[0].name, video_path=video, model=session.model_label,
                    model_calls=session.model_calls, completed_utc=utc_now())
    return FilmResult(run_dir=str(session.run_dir), video_path=video,
                      video_url=preview_url_for(Path(video)) if video else None,
                      scene_file=str(session.run_dir / SCENE_FILE), scenes=len(units),
                      repairs=len(manifest.record.repairs), model_calls=session.model_calls)


SCENES_SETTLE_S = 10.0  # on a stop, how long the flow waits for the scenes under way to end


class _FilmScenes:
    """Every scene a task run of its own (`scene-03`), a bounded number at once; then stitch.

    A failing scene is repaired alone, with its own code and error tail, while the other
    scenes keep their videos.
    """

    def __init__(self, session: FilmSession, request: FilmRequest, progress: _Progress,
                 book: SceneBook, narration: list[list[str]]) -> None:
        self.session, self.request, self.progress = session, request, progress
        self.book, self.units, self.narration = book, book.units, narration
        self.timeout = request.render_timeout or get_settings().render_timeout
        self.workers = request.render_workers or os.cpu_count() or 1
        self.rules = RepairRules(max_repairs=request.max_repairs,
                                 layout_repair=request.layout_repair,
                                 offline=request.backend == "offline")
        # set when the flow stops waiting (Ctrl-C, a crash): scenes under way start no new step
        self.stopping = threading.Event()

    def run(self) -> str | None:
        if not self.request.render:
            self._verify_only()
            return None
        failures = self._scenes()
        self.book.static_checks()
        if failures:
            raise self.book.failed(failures)
        return self._stitch()

    def _scenes(self) -> list[SceneFailed]:
        """Each scene a `scene` task run on the task runner; collected as they end."""
        workers = max(1, min(self.workers, len(self.units)))
        say(f"[film] rendering {len(self.units)} scene(s), {workers} at a time")
        if self.request.layout_repair and self.rules.offline:
            say("[film] --layout-repair: the offline stand-ins are no model and repair "
                "nothing; layout findings stay warnings")
        elif self.request.layout_repair and self.request.backend == "replay":
            say("[film] --layout-repair: replay has no model; only repairs its cassettes "
                "recorded are replayed, other layout findings stay warnings")
        self.session.manifest.update(render_workers=workers)
        failures: list[SceneFailed] = []
        with TaskPool(workers) as pool:
            try:
                futures = [pool.submit(scene.with_options(task_run_name=unit.label),
                                       {"scenes": quote(self), "unit": unit})
                           for unit in self.units]
                for future in as_completed(cast("list[PrefectFuture[Any]]", futures)):
                    try:
                        future.result()
                    except SceneFailed as exc:
                        failures.append(exc)
            except BaseException as exc:
                stop = not isinstance(exc, Exception)  # Ctrl-C, SIGTERM: the command stops
                if stop:
                    STOPPING.set()  # (before the scene threads see `stopping` and fail)
                self.stopping.set()  # scenes under way start no further render or repair
                # ... and the pool starts no queued scene (on its exit, or here on a stop).
                # The stop reaches this thread, not the scenes under way: a render in flight
                # stops within a second of STOPPING. Their last states are sent before the
                # command flushes its events and stops its server; a scene that does not end
                # in time (a model call in flight) is recorded Crashed, not left Running.
                if stop:
                    pool.stop_under_way("Execution was aborted by an interrupt signal (the "
                                        "film was stopped).", wait=SCENES_SETTLE_S)
                raise
        warm = render_pool.current_pool()
        if warm is not None:  # where the renders' start-up CPU went (bench/film.py reads it)
            self.session.manifest.update(warm_workers={
                "started": warm.started, "startup_cpu_s": round(warm.startup_cpu_s, 3),
                "counted": "over this process's life (a `mythloop film` command: this film)"})
        return failures

    def _stitch(self) -> str:
        book, manifest = self.book, self.session.manifest
        target = self.session.run_dir / "film.mp4"
        videos = book.videos()
        for unit, cut in book.cuts():  # what a scene leaves that the next does not start from
            say(f"[film] warning: layout {unit.label} t={cut.t:.1f}s {cut.kind}: "
                f"{cut.detail[:300]}")
        for unit, why in book.unquoted(self.narration):  # two texts on screen at once
            say(f"[film] warning: captions {unit.label}: not its narration lines: {why}")
        stitched = steps.stitch.with_options(task_run_name="stitch")(videos, str(target))
        manifest.update(film={"file": str(target), "duration": stitched.duration,
                              "scene_durations_sum": book.duration_sum(),
                              "method": "ffmpeg concat demuxer, -c copy"})
        # its length is said once the voice is in: held frames may lengthen the film
        say(f"[film] stitch           -> {target} ({len(videos)} scenes)")
        self.progress.step()
        media = steps.finish_media.with_options(task_run_name="subtitles-and-voice")(
            str(target), book.scene_media(), self.narration, self.request.voice,
            self.request.burn_subtitles)
        done = manifest.record.film
        assert done is not None, "the stitch recorded the film"
        manifest.update(subtitles=media.subtitles, voice=media.voice, poster=media.poster,
                        film=done.model_copy(update={"duration": media.duration,
                                                     "scene_spans": media.scene_spans}))
        voiced = (f", voice {media.voice.engine}" if media.voice else "")
        say(f"[film] subtitles        -> {media.subtitles.srt} "
            f"({media.subtitles.cues} cues{voiced}"
            f"{', burnt in' if self.request.burn_subtitles else ''}; "
            f"film {media.duration:.1f} s)")
        self.progress.step()
        return str(target)

    def _verify_only(self) -> None:
        """Without --render: the static check of every scene, nothing rendered."""
        problems = []
        for unit in self.units:
            path = self.book.write_scene(unit, unit.code, "codegen")
            checked = steps.verify.with_options(task_run_name=f"verify-{unit.label}")(
                scene_file_text(self.book.header, unit.code), self.request.prompt)
            self.book.checked(unit, checked, ok=None)
            if not checked.ok:
                problems.append(f"{unit.label} ({unit.name}): {checked.reason} "
                                f"(line {checked.line}) in {path}")
        self.session.manifest.update(static_check={"passed": not problems,
                                                   "detail": "; ".join(problems) or None,
                                                   "line": None})
        say(f"[film] verify           -> {'ok' if not problems else problems[0]}")
        self.progress.step()
        if problems:
            raise FilmFailed("the generated scene failed the static check: "
                             + "; ".join(problems))


@mythloop_task(name="scene", retries=0)
def scene(scenes: _FilmScenes, unit: SceneUnit) -> State[Any] | None:
    """One scene: verify -> render -> (repair -> verify -> render)...; its steps are task runs
    inside this one. Raises SceneFailed when the scene cannot be rendered; ends Crashed when
    Ctrl-C or SIGTERM stopped it (a scene with a video keeps it)."""
    # Each step's run keeps its own final state when the scene fails (by default Prefect
    # marks the nested runs of a failed task `RolledBack`).
    try:
        with transaction(commit_mode=CommitMode.EAGER):
            _scene_steps(scenes, unit)
    except SceneFailed as exc:
        if exc.kind != "interrupted":
            raise
        return Crashed(message=str(exc))
    if scenes.stopping.is_set() and unit.index in scenes.book.interrupted_scenes:
        return Crashed(message=f"{unit.label} ({unit.name}): stopped (the film was "
                               "interrupted); it keeps its rendered video")
    return None


def _rendered(state: State[Any]) -> SceneRender:
    """The SceneRender a render task's state holds (Completed, Failed or Crashed alike)."""
    if state.is_completed() or state.is_failed() or state.is_crashed():
        data = state.result(raise_on_failure=False)
        if isinstance(data, SceneRender):
            return data
        if isinstance(data, dict):  # (read back from storage as JSON)
            return SceneRender.model_validate(data)
    state.result()  # an error of Prefect's own (not the render's): raise it
    raise RuntimeError(f"the render task ended {state.name} without a render")


def _scene_steps(scenes: _FilmScenes, unit: SceneUnit) -> None:
    book, request = scenes.book, scenes.request
    code, version, attempt = unit.code, "codegen", 0
    good: Good | None = None  # the last rendered video, kept if a later repair fails
    layout_repaired = False
    while True:
        if scenes.stopping.is_set():
            _stop(book.interrupted(unit, good, attempt))
            return
        suffix = "" if attempt == 0 else f" (after repair-{attempt})"
        path = book.write_scene(unit, code, version)
        checked = steps.verify.with_options(task_run_name=f"verify-{unit.label}{suffix}")(
            scene_file_text(book.header, code), request.prompt)
        book.checked(unit, checked)
        step = after_verify(checked.ok, f"static check: {checked.reason} (line {checked.line})",
                            good)
        error = last_line(step.why)[:500]
        if step.action == "render":
            # no Prefect timeout (a task in a worker thread cannot be interrupted), its tag
            # only: render_scene kills the render's process group at its own deadline. A
            # failed render is a Failed (a stopped one a Crashed) run that holds the render.
            key = scene_cache_key(book.header, code, request.quality, unit.name)
            render_state = with_timeout(steps.render_scene_task, scenes.timeout, enforced=False,
                                        task_run_name=f"render-{unit.label}{suffix}")(
                str(path), unit.name, request.quality, scenes.timeout,
                str(scenes.session.run_dir / "render" / unit.label), key, not request.fresh,
                scene_zooms(scenes.session.run_dir, unit.index, len(scenes.units)),
                return_state=True)
            rendered = _rendered(render_state)
            book.rendered(unit, attempt, rendered)
            _say_rendered(unit, suffix, rendered.ok, rendered.cache, rendered.video_path,
                          rendered.message, rendered.layout_findings)
            scenes.progress.step()
            step = after_render(RenderView(rendered.ok, rendered.kind, rendered.message,
                                           rendered.log_tail, rendered.layout_findings),
                                good, attempt, scenes.rules, layout_repaired)
            error = rendered.message
            if step.action in ("accept", "accept_then_repair"):
                good = book.accept(unit, code, version, rendered, key)
            if step.action == "accept":
                return
            if step.action == "accept_then_repair" and good is not None:
                unavailable = scenes.session.repair_unavailable(unit.index, attempt + 1)
                if unavailable:  # say so in one line; the scene keeps its video
                    book.unrepaired(unit, good, unavailable)
                    return
                layout_repaired = True
                step = Step("repair", why=good.finding, kind="layout")
        if step.action == "keep" and good is not None:
            book.keep(unit, good, attempt, step.why)
            return
        failure = ""
        if step.action == "repair":
            failure = step.why
            step = before_repair(failure, attempt, scenes.rules)
            error = last_line(failure)[:500]
        if step.action == "give_up":
            raise book.give_up(unit, step, path, error)
        if scenes.stopping.is_set():
            _stop(book.interrupted(unit, good, attempt, before="its repair"))
            return
        attempt += 1
        try:
            repaired = with_timeout(  # the backend enforces session.timeout
                steps.repair, scenes.session.timeout, enforced=False, name="repair",
                task_run_name=f"repair-{unit.label}-{attempt}")(
                quote(scenes.session), unit.index, unit.name, attempt,  # type: ignore[call-overload]
                book.header, code, failure)
        except Exception as exc:  # no usable repair: this scene fails, the others go on
            if scenes.stopping.is_set() or STOPPING.is_set():  # the stop ended it
                _stop(book.interrupted(unit, good, attempt, before="the end of its repair"))
                return
            if good is not None:  # ... unless it has a rendered video to keep
                book.keep(unit, good, attempt, f"{type(exc).__name__}: {exc}")
                return
            raise book.repair_failed(unit, attempt, exc, path) from exc
        code, version = repaired.code, f"repair{attempt}"
        book.repaired(unit, attempt, repaired, failure)
        say(f"[film] repair-{unit.label}-{attempt} -> scenes/{unit.label}.py (scene alone"
            f"{'; made before in this run dir, no model call' if repaired.reused else ''})")
        scenes.progress.step(extra_total=2)


def _stop(error: SceneFailed | None) -> None:
    """The film stops: raise the scene's error (None: it kept a video and is done)."""
    if error is not None:
        raise error


def _say_rendered(unit: SceneUnit, suffix: str, ok: bool, cache: str, video: str | None,
                  message: str, findings: list[Finding] | None) -> None:
    say(f"[film] render-{unit.label}{suffix} -> {'cached ' if cache == 'hit' else ''}"
        f"{video if ok else message}")
    if ok and findings:  # one warning line per finding: scene, scene time, what
        say(f"[film] layout-{unit.label}{suffix} -> {len(findings)} finding(s)")
        for finding in findings:
            why = f" ({finding.detail[:200]})" if finding.kind == "unchecked" else ""
            say(f"[film] warning: layout {unit.label} t={finding.t:.1f}s {finding.kind}: "
                f"{finding.what}{why}")


def _publish_summary(session: FilmSession) -> None:
    """A markdown summary per film and a link to the video, for the Prefect UI."""
    with session.manifest.lock:
        data = session.manifest.record.model_copy(deep=True)  # scenes may still be updating
    summary = film_summary(data, session.run_dir)
    try:
        create_markdown_artifact(markdown=summary.markdown, description="Film summary")
        if summary.poster_url:
            create_image_artifact(image_url=summary.poster_url,
                                  description="The film's poster frame")
        if data.video_path:
            create_link_artifact(link=summary.video_url or Path(data.video_path).as_uri(),
                                 link_text=Path(data.video_path).name,
                                 description="The rendered film" + (
                                     "" if summary.video_url else " (a file on the machine "
                                     "that made it; `mythloop serve` serves it over HTTP)"))
    except Exception as exc:  # an artifact is a courtesy; never lose the film over it
        say(f"[film] could not publish the summary artifact: {exc}")
