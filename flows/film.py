"""A Mythos film on Prefect: six reasoning stages -> codegen -> N scenes -> stitched film.

Every step is its own task run, named after the step (`intent` ... `scene-composer`,
`codegen`, then per scene `verify-scene-03`, `render-scene-03`, `repair-scene-03-1`, and
`stitch`), with its own retries and timeout, so the Prefect UI shows each stage, scene,
retry and timeout by name. Scenes render concurrently (at most `render_workers` at once),
each in the render sandbox; a failing scene is repaired alone and a rerun renders only
the scenes whose code changed or failed (the scene cache in mythloop.mythos.sandbox.scene_cache).
"""

from __future__ import annotations

import contextvars
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from prefect import flow
from prefect.artifacts import (
    create_image_artifact,
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from mythloop.fileio import write_text_atomic
from mythloop.mythos.code.scenes import (
    SceneUnit,
    join_film,
    scene_cache_key,
    scene_file_text,
    scene_narration,
)
from mythloop.mythos.media.avmux import duration_of
from mythloop.mythos.media.filmmedia import scene_narrations
from mythloop.mythos.pipeline import SCENE_FILE, FilmSession, cache_basis, open_session
from mythloop.mythos.plan.request import FilmRequest
from mythloop.mythos.plan.stages import STAGES
from mythloop.mythos.records import (
    CodegenResult,
    FailedScene,
    RenderEntry,
    RepairEntry,
    SceneRecord,
    StageOutcome,
    StaticCheck,
)
from mythloop.mythos.rundir import slugify, utc_now
from mythloop.mythos.sandbox.layout import Finding, format_findings
from mythloop.preview import preview_url_for
from mythloop_tasks import film as steps
from mythloop_tasks.common import say

NO_REPAIR_KINDS = {"timeout": "a render timeout is a budget problem, not a code problem",
                   "missing_tool": "a missing LaTeX/ffmpeg/dvisvgm is an environment problem",
                   "interrupted": "Ctrl-C or SIGTERM stopped the render, not the scene"}


class FilmFailed(RuntimeError):
    """The film could not be finished; the message says why and where the run dir is."""


def _run_name() -> str:
    request = flow_run.parameters.get("request") or {}
    prompt = request.get("prompt") if isinstance(request, dict) else getattr(request, "prompt", "")
    return f"film-{slugify(prompt or 'film')}"


class _Progress:
    """A progress artifact updated after every step."""

    def __init__(self, total: int, run_dir: Path) -> None:  # total grows with scenes/repairs
        self.total, self.done = total, 0
        self.id = create_progress_artifact(progress=0.0, description=f"Film progress: {run_dir}")

    def step(self, extra_total: int = 0) -> None:
        self.total += extra_total
        self.done += 1
        update_progress_artifact(self.id, min(100.0, 100.0 * self.done / self.total))


def _state_meta(state) -> tuple[str | None, bool]:
    details = state.state_details
    return (str(details.task_run_id) if details and details.task_run_id else None,
            state.name == "Cached")


@flow(name="film", flow_run_name=_run_name)
def film(request: FilmRequest) -> dict:
    """Turn a prompt into a rendered Manim film: six agents, codegen, verify, render, repair."""
    session = open_session(request, flow_run_id=str(flow_run.id) if flow_run.id else None)
    say(f"[film] run dir: {session.run_dir}")
    progress = _Progress(len(STAGES) + 2 + (1 if request.render else 0), session.run_dir)
    try:
        result = _make_film(session, request, progress)
    except BaseException as exc:
        session.manifest.update(failed={"error": " ".join(str(exc).split())[:2000],
                                        "type": type(exc).__name__},
                                model_calls=session.model_calls, completed_utc=utc_now())
        _publish_summary(session)
        raise
    _publish_summary(session)
    return result


def _make_film(session: FilmSession, request: FilmRequest, progress: _Progress) -> dict:
    manifest = session.manifest
    artifact: dict = {"user_prompt": request.prompt}
    dossier: dict = {}
    for spec in STAGES:
        basis = cache_basis(spec.slug, artifact, request)
        task = steps.run_stage.with_options(
            name=spec.slug, task_run_name=spec.slug, refresh_cache=request.fresh,
            timeout_seconds=session.timeout + 60)
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
    state = steps.codegen.with_options(task_run_name="codegen", refresh_cache=request.fresh,
                                       timeout_seconds=session.timeout + 60)(
        quote(session), dossier, basis, return_state=True)
    generated = CodegenResult.model_validate(state.result())
    task_run_id, cached = _state_meta(state)
    if cached:
        write_text_atomic(session.run_dir / "07_codegen.raw.txt", generated.raw)
    header = generated.header
    units = [SceneUnit(s.index, s.name, s.code, s.narration or scene_narration(s.code))
             for s in generated.scenes]
    session.write_scene(generated.code, "codegen")
    scenes_dir = session.run_dir / "scenes"
    scenes_dir.mkdir(exist_ok=True)
    write_text_atomic(scenes_dir / "header.py", header)
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
    film_scenes = _FilmScenes(session, request, progress, header, units, narration, sources)
    video = film_scenes.run()
    manifest.update(scene_file=str(session.run_dir / SCENE_FILE),
                    scene_name=units[0].name, video_path=video, model=session.model_label,
                    model_calls=session.model_calls, completed_utc=utc_now())
    return {"run_dir": str(session.run_dir), "video_path": video,
            "video_url": preview_url_for(Path(video)) if video else None,
            "scene_file": str(session.run_dir / SCENE_FILE),
            "scenes": len(units),
            "repairs": len(manifest.record.repairs),
            "model_calls": session.model_calls}


class SceneFailed(RuntimeError):
    """One scene could not be rendered (after its repairs, or for an environment problem)."""

    def __init__(self, unit: SceneUnit, message: str, kind: str = "scene_error") -> None:
        super().__init__(message)
        self.unit, self.kind = unit, kind


class _FilmScenes:
    """Verify, render and repair every scene on its own, a bounded number at once; then stitch.

    Each scene is a chain of task runs named after it (`verify-scene-03`, `render-scene-03`,
    `repair-scene-03-1`, `render-scene-03 (after repair-1)`); a failing scene is repaired
    alone, with its own code and error tail, while the other scenes keep their videos.
    """

    def __init__(self, session: FilmSession, request: FilmRequest, progress: _Progress,
                 header: str, units: list[SceneUnit], narration: list[list[str]],
                 sources: list[str | None] | None = None) -> None:
        self.session, self.request, self.progress = session, request, progress
        self.header, self.units, self.narration = header, units, narration
        self.sources = sources or [None] * len(units)
        self.lock = session.manifest.lock  # one lock for the manifest and the scene records
        self.dir = session.run_dir / "scenes"
        self.records: dict[int, SceneRecord] = {}
        self.code: dict[int, str] = {u.index: u.code for u in units}
        self.timeout = request.render_timeout or _render_timeout()
        self.workers = request.render_workers or os.cpu_count() or 1
        # set when the flow stops waiting (Ctrl-C, a crash): scenes in flight start no new step
        self.stopping = threading.Event()

    # -- manifest, under one lock: scenes finish on different threads -----------------
    def _record(self, unit: SceneUnit, **fields) -> None:
        with self.lock:
            record = self.records.setdefault(unit.index, SceneRecord())
            for key, value in fields.items():  # each validated by SceneRecord
                setattr(record, key, value)
            scenes = [self.records[i] for i in sorted(self.records)]
            self.session.manifest.update(scenes=scenes)

    def _append(self, key: str, item: RenderEntry | RepairEntry) -> None:
        with self.lock:
            self.session.manifest.append(key, item)

    def _step(self, extra_total: int = 0) -> None:
        with self.lock:
            self.progress.step(extra_total)

    def _write_scene(self, unit: SceneUnit, code: str, version: str) -> Path:
        text = scene_file_text(self.header, code)
        write_text_atomic(self.dir / f"{unit.label}.{version}.py", text)
        path = self.dir / f"{unit.label}.py"
        write_text_atomic(path, text)
        with self.lock:
            self.code[unit.index] = code
            self.session.write_scene(join_film(self.header, [self.code[u.index]
                                                             for u in self.units]), "current")
        return path

    # -- the film ----------------------------------------------------------------------
    def run(self) -> str | None:
        for unit, lines, source in zip(self.units, self.narration, self.sources, strict=True):
            self._record(unit, index=unit.index, name=unit.name, label=unit.label,
                         file=str(self.dir / f"{unit.label}.py"), ok=None, attempts=0,
                         cache=None, render_seconds=0.0, renders=[], repairs=[],
                         narration=" ".join(lines) or None, narration_source=source)
        if not self.request.render:
            return self._verify_only()
        failures: list[SceneFailed] = []
        workers = max(1, min(self.workers, len(self.units)))
        say(f"[film] rendering {len(self.units)} scene(s), {workers} at a time")
        self.session.manifest.update(render_workers=workers)
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="scene")
        try:
            # each scene runs its task chain in a copy of the flow's context (Prefect's
            # run context lives in contextvars, which threads do not inherit)
            futures = [pool.submit(contextvars.copy_context().run, self._scene, unit)
                       for unit in self.units]
            for future in futures:
                try:
                    future.result()
                except SceneFailed as exc:
                    failures.append(exc)
        except BaseException:
            self.stopping.set()  # scenes under way start no further render or repair
            pool.shutdown(wait=False, cancel_futures=True)  # scenes not started never start
            raise
        pool.shutdown(wait=True)
        checks = [self.records[u.index].static_check or StaticCheck() for u in self.units]
        bad = [f"{u.label}: {c.detail}" for u, c in zip(self.units, checks, strict=True)
               if not c.passed]
        self.session.manifest.update(static_check={"passed": not bad,
                                                   "detail": "; ".join(bad) or None,
                                                   "line": None})
        if failures:
            self._fail(failures)
        videos = [self.records[u.index].video for u in self.units]
        target = self.session.run_dir / "film.mp4"
        stitched = steps.stitch.with_options(task_run_name="stitch")(videos, str(target))
        total = round(sum(self.records[u.index].duration for u in self.units), 3)
        self.session.manifest.update(film={"file": str(target), "duration": stitched.duration,
                                           "scene_durations_sum": total,
                                           "method": "ffmpeg concat demuxer, -c copy"})
        say(f"[film] stitch           -> {target} ({stitched.duration:.1f} s, "
            f"{len(videos)} scenes)")
        self._step()
        scenes = [{"label": u.label, "video": self.records[u.index].video,
                   "duration": self.records[u.index].duration} for u in self.units]
        media = steps.finish_media.with_options(task_run_name="subtitles-and-voice")(
            str(target), scenes, self.narration, self.request.voice,
            self.request.burn_subtitles)
        film = self.session.manifest.record.film
        self.session.manifest.update(
            subtitles=media.subtitles, voice=media.voice, poster=media.poster,
            film=film.model_copy(update={"duration": media.duration,
                                         "scene_spans": media.scene_spans}))
        voiced = (f", voice {media.voice.engine}" if media.voice else "")
        say(f"[film] subtitles        -> {media.subtitles.srt} "
            f"({media.subtitles.cues} cues{voiced}"
            f"{', burnt in' if self.request.burn_subtitles else ''})")
        self._step()
        return str(target)

    def _verify_only(self) -> None:
        problems = []
        for unit in self.units:
            path = self._write_scene(unit, unit.code, "codegen")
            checked = steps.verify.with_options(task_run_name=f"verify-{unit.label}")(
                scene_file_text(self.header, unit.code), self.request.prompt)
            self._record(unit, static_check=StaticCheck(passed=checked.ok,
                                                        detail=checked.reason,
                                                        line=checked.line), ok=None)
            if not checked.ok:
                problems.append(f"{unit.label} ({unit.name}): {checked.reason} "
                                f"(line {checked.line}) in {path}")
        self.session.manifest.update(static_check={"passed": not problems,
                                                   "detail": "; ".join(problems) or None,
                                                   "line": None})
        say(f"[film] verify           -> {'ok' if not problems else problems[0]}")
        self._step()
        if problems:
            raise FilmFailed("the generated scene failed the static check: "
                             + "; ".join(problems))
        return None

    def _keep(self, unit: SceneUnit, good: _Good, attempt: int, why: str) -> None:
        """A repair that could not help: the scene keeps its last good video and code; the
        manifest records the finding and the failed repair; one warning line names the scene."""
        self._write_scene(unit, good.code, good.version)
        failed = {"attempt": attempt, "finding": _last_line(good.finding)[:500],
                  "error": " ".join(why.split())[:500], "kept": good.version}
        self._record(unit, ok=True, video=good.video, duration=good.duration,
                     layout=good.findings, failed_repair=failed)
        line = (f"{unit.label} ({unit.name}) keeps its rendered video ({good.version}): "
                f"repair-{attempt} could not help ({_last_line(why)[:200]})")
        with self.lock:
            self.session.manifest.append("warnings", line)
        say(f"[film] warning: {line}")

    def _scene(self, unit: SceneUnit) -> None:
        request, code, attempt = self.request, unit.code, 0
        layout_repaired = False
        version = "codegen"
        good: _Good | None = None  # the last rendered video, kept if a later repair fails
        while True:
            if self.stopping.is_set():
                if good is not None:
                    self._keep(unit, good, attempt, "the film was interrupted")
                    return
                raise SceneFailed(unit, f"{unit.label} ({unit.name}): stopped (the film was "
                                        "interrupted)", kind="interrupted")
            suffix = "" if attempt == 0 else f" (after repair-{attempt})"
            path = self._write_scene(unit, code, version)
            checked = steps.verify.with_options(task_run_name=f"verify-{unit.label}{suffix}")(
                scene_file_text(self.header, code), request.prompt)
            self._record(unit, static_check=StaticCheck(passed=checked.ok,
                                                        detail=checked.reason,
                                                        line=checked.line))
            failure = f"static check: {checked.reason} (line {checked.line})"
            if not checked.ok and good is not None:  # the repaired code fails verify
                self._keep(unit, good, attempt, failure)
                return
            if checked.ok:
                key = scene_cache_key(self.header, code, request.quality, unit.name)
                # no Prefect timeout here: a task in a worker thread cannot be interrupted;
                # render_scene kills the render's process group at its own deadline
                rendered = steps.render_scene_task.with_options(
                    task_run_name=f"render-{unit.label}{suffix}")(
                    str(path), unit.name, request.quality, self.timeout,
                    str(self.session.run_dir / "render" / unit.label), key,
                    not request.fresh)
                entry = RenderEntry(scene=unit.index, name=unit.name, attempt=attempt,
                                    ok=rendered.ok, kind=rendered.kind, cache=rendered.cache,
                                    returncode=rendered.returncode, seconds=rendered.seconds,
                                    message=rendered.message, video_path=rendered.video_path,
                                    isolation=rendered.isolation)
                self._append("renders", entry)
                with self.lock:
                    record = self.records[unit.index]
                    renders = [*record.renders, RenderEntry(**entry.model_dump(include={
                        "attempt", "ok", "kind", "cache", "seconds", "message"}))]
                    spent = record.render_seconds + rendered.seconds
                    attempts = record.attempts + (rendered.cache == "miss")
                self._record(unit, renders=renders, render_seconds=round(spent, 2),
                             attempts=attempts, cache=rendered.cache)
                say(f"[film] render-{unit.label}{suffix} -> "
                    f"{'cached ' if rendered.cache == 'hit' else ''}"
                    f"{rendered.video_path if rendered.ok else rendered.message}")
                self._step()
                findings = rendered.layout_findings
                if rendered.ok and findings is not None:
                    self._record(unit, layout=findings)
                    if findings:
                        say(f"[film] layout-{unit.label}{suffix} -> {len(findings)} finding(s): "
                            f"{findings[0]['kind']} {findings[0]['what']}")
                if rendered.ok and good is not None and good.findings is not None and \
                        len(findings or []) > len(good.findings):
                    self._keep(unit, good, attempt, f"the repaired scene has "
                               f"{len(findings or [])} layout finding(s), more than before")
                    return
                if rendered.ok:
                    video = self.dir / f"{unit.label}.mp4"
                    shutil.copyfile(rendered.video_path, video)
                    duration = round(duration_of(video), 3)
                    self._record(unit, ok=True, video=str(video), duration=duration)
                    good = _Good(code, version, str(video), duration, findings,
                                 format_findings([Finding(**f) for f in findings or []]))
                if (rendered.ok and findings and request.layout_repair and not layout_repaired
                        and attempt < request.max_repairs and request.backend != "offline"):
                    # one scoped repair with the layout findings as the error; the video
                    # just rendered stays the scene's video unless the repair does better
                    layout_repaired = True
                    rendered = rendered.model_copy(update={
                        "ok": False, "kind": "layout", "log_tail": good.finding})
                if rendered.ok:
                    return
                if good is not None and rendered.kind != "layout":  # the repair fails to render
                    self._keep(unit, good, attempt, rendered.message or rendered.log_tail)
                    return
                if rendered.kind in NO_REPAIR_KINDS:
                    with self.lock:
                        self.session.manifest.update(
                            render_timed_out=rendered.kind == "timeout",
                            render_problem=rendered.kind)
                    self._record(unit, ok=False, error=rendered.message)
                    raise SceneFailed(unit, f"{unit.label} ({unit.name}): {rendered.message} "
                                            f"({NO_REPAIR_KINDS[rendered.kind]}: no repair "
                                            "spent)", kind=rendered.kind)
                failure = rendered.log_tail or rendered.message
            if attempt >= request.max_repairs or request.backend == "offline":
                self._record(unit, ok=False, error=_last_line(failure)[:500])
                raise SceneFailed(unit, f"{unit.label} ({unit.name}) still fails after "
                                        f"{attempt} repair(s): {_last_line(failure)}; "
                                        f"scene file {path}")
            if self.stopping.is_set():
                raise SceneFailed(unit, f"{unit.label} ({unit.name}): stopped before "
                                        "its repair (the film was interrupted)",
                                  kind="interrupted")
            attempt += 1
            try:
                repaired = steps.repair.with_options(  # the backend enforces session.timeout
                    name="repair", task_run_name=f"repair-{unit.label}-{attempt}")(
                    quote(self.session), unit.index, unit.name, attempt, self.header, code,
                    failure)
            except Exception as exc:  # no usable repair: this scene fails, the others go on
                if good is not None:  # ... unless it has a rendered video to keep
                    self._keep(unit, good, attempt, f"{type(exc).__name__}: {exc}")
                    return
                self._record(unit, ok=False, error=f"repair-{attempt}: {exc}"[:500])
                raise SceneFailed(unit, f"{unit.label} ({unit.name}): repair-{attempt} gave no "
                                        f"usable scene ({_last_line(str(exc))}); scene file "
                                        f"{path}") from exc
            code, version = repaired.code, f"repair{attempt}"
            item = RepairEntry(scene=unit.index, name=unit.name, attempt=attempt,
                               seconds=repaired.seconds, model=repaired.model,
                               failure=_last_line(failure)[:500])
            self._append("repairs", item)
            with self.lock:
                repairs = [*self.records[unit.index].repairs, RepairEntry(**item.model_dump(
                    include={"attempt", "seconds", "model", "failure"}))]
                self.session.manifest.add_stage({
                    "stage": f"repair-{unit.label}-{attempt}",
                    "artifact": f"scenes/{unit.label}.py", "seconds": repaired.seconds,
                    "model": repaired.model})
            self._record(unit, repairs=repairs)
            say(f"[film] repair-{unit.label}-{attempt} -> scenes/{unit.label}.py (scene alone)")
            self._step(extra_total=2)

    def _fail(self, failures: list[SceneFailed]) -> None:
        failures.sort(key=lambda f: f.unit.index)
        kept = [self.records[u.index].video for u in self.units
                if self.records[u.index].ok]
        named = "; ".join(str(f) for f in failures)
        env = [f for f in failures if f.kind in NO_REPAIR_KINDS]
        with self.lock:
            self.session.manifest.update(failed_scenes=[
                FailedScene(scene=f.unit.index, name=f.unit.name, kind=f.kind, error=str(f))
                for f in failures], kept_scenes=kept)
        lead = env[0] if env else failures[0]
        raise FilmFailed(
            f"{len(failures)} of {len(self.units)} scene(s) failed: {named}"
            + (f" [{lead.kind}]" if env else "")
            + f"; {len(kept)} rendered scene(s) kept in {self.dir}; run dir "
              f"{self.session.run_dir}")


class _Good(NamedTuple):
    """A scene's last rendered video and the code it came from."""

    code: str
    version: str
    video: str
    duration: float
    findings: list[dict] | None
    finding: str  # the layout findings as the repair's error text ("" when clean)


def _render_timeout() -> float:
    from mythloop.settings import get_settings

    return get_settings().render_timeout


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "unknown failure"


def _link(path: str | None) -> str:
    """A markdown link to a run file: its preview address while `serve` runs, else its path."""
    if not path:
        return ""
    url = preview_url_for(Path(path))
    return f"[{Path(path).name}]({url})" if url else f"`{path}`"


def _watch_lines(data, video_url: str | None, poster_url: str | None) -> list[str]:
    """The poster (an inline image: Prefect's markdown shows data: images whatever serves
    the run files), links to the film and its subtitles, the layout findings per scene with
    their time, and any scene kept after a failed repair."""
    from mythloop.mythos.media.avmux import thumbnail_data_url

    lines: list[str] = []
    if data.video_path and data.poster and Path(data.poster).is_file():
        try:
            thumb = thumbnail_data_url(Path(data.poster))
        except Exception:  # noqa: BLE001 - a thumbnail is a courtesy
            thumb = None
        if thumb:
            lines += [f"[![poster]({thumb})]({video_url})" if video_url else
                      f"![poster]({thumb})", ""]
    if data.video_path:
        subtitles = data.subtitles
        lines += ["| film | subtitles (SRT) | subtitles (WebVTT) | poster |", "|---|---|---|---|",
                  f"| {_link(data.video_path)} | {_link(subtitles and subtitles.srt)} | "
                  f"{_link(subtitles and subtitles.vtt)} | {_link(data.poster)} |", ""]
    findings = [(s.label, f) for s in data.scenes for f in (s.layout or [])]
    if findings:
        lines += [f"**Layout check:** {len(findings)} finding(s)", "",
                  "| scene | kind | at (scene time) | what | detail |", "|---|---|---|---|---|"]
        lines += [f"| {label} | {f.get('kind')} | {float(f.get('t') or 0):.1f} s "
                  f"({f.get('at')}) | {str(f.get('what')).replace('|', '/')} | "
                  f"{str(f.get('detail')).replace('|', '/')} |" for label, f in findings[:40]]
        lines.append("")
    for scene in data.scenes:
        if scene.failed_repair:
            lines.append(f"**Kept after a failed repair:** {scene.label} "
                         f"(repair-{scene.failed_repair.get('attempt')}: "
                         f"{scene.failed_repair.get('error')})")
    return lines


def _publish_summary(session: FilmSession) -> None:
    """A markdown summary per film and a link to the video, for the Prefect UI."""
    with session.manifest.lock:
        data = session.manifest.record.model_copy(deep=True)  # scenes may still be updating

    def shown(value) -> object:
        return "" if value is None else value

    rows = ["| step | seconds | cached | retried | model |", "|---|---|---|---|---|"]
    for stage in data.stages:
        rows.append(f"| {stage.stage} | {shown(stage.seconds)} | "
                    f"{'yes' if stage.cached else ''} | "
                    f"{'yes' if stage.retried else ''} | {shown(stage.model)} |")
    check = data.static_check
    verified = ("not run" if check is None else "passed" if check.passed else check.detail)
    lines = [
        f"# Film: {data.prompt}",
        f"Backend **{data.backend}**"
        + (" (offline stand-ins, not a model)" if data.offline else "")
        + (" (replayed recordings, not a live model)" if data.replay else "")
        + f", model `{data.model}`, model calls: {data.model_calls}.",
        "", *rows, "",
        f"**Verify:** {verified}",
        f"**Renders:** {len(data.renders)}; **repairs:** {len(data.repairs)}",
        *([f"**Scenes:** {len(data.scenes)}", "",
           "| scene | class | ok | cache | render s | attempts | repairs |",
           "|---|---|---|---|---|---|---|"]
          + [f"| {s.label} | {s.name} | {s.ok} | {s.cache} | "
             f"{s.render_seconds} | {s.attempts} | {len(s.repairs)} |"
             for s in data.scenes] + [""] if data.scenes else []),
        f"**Video:** `{data.video_path}`" if data.video_path else
        f"**No video.** {(data.failed or {}).get('error', '')}",
        f"**Run dir:** `{session.run_dir}`",
    ]
    video_url = preview_url_for(Path(data.video_path)) if data.video_path else None
    poster_url = preview_url_for(Path(data.poster)) if data.poster else None
    if data.subtitles:
        lines.insert(-2, f"**Subtitles:** {data.subtitles.cues} cues "
                         f"({'burnt in' if data.subtitles.burnt else 'soft track'}); "
                         f"**voice:** {(data.voice and data.voice.engine) or 'none'}")
    lines[-2:-2] = _watch_lines(data, video_url, poster_url)
    try:
        create_markdown_artifact(markdown="\n".join(lines), description="Film summary")
        if poster_url:
            create_image_artifact(image_url=poster_url, description="The film's poster frame")
        if data.video_path:
            create_link_artifact(link=video_url or Path(data.video_path).as_uri(),
                                 link_text=Path(data.video_path).name,
                                 description="The rendered film" + (
                                     "" if video_url else " (a file on the machine that made "
                                     "it; `mythloop serve` serves it over HTTP)"))
    except Exception as exc:  # an artifact is a courtesy; never lose the film over it
        say(f"[film] could not publish the summary artifact: {exc}")
