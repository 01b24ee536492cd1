"""A Mythos film on Prefect: six reasoning stages -> codegen -> verify -> render -> repair.

Every step is its own task run, named after the step (`intent` ... `scene-composer`,
`codegen`, `verify`, `render`, `repair-1` ...), with its own retries and timeout, so
the Prefect UI shows each stage, retry and timeout by name.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_progress_artifact,
    update_progress_artifact,
)
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from flows.common import say
from mythloop.mythos.pipeline import SCENE_FILE, FilmSession, cache_basis, open_session
from mythloop.mythos.request import FilmRequest
from mythloop.mythos.rundir import slugify, utc_now
from mythloop.mythos.stages import STAGES
from tasks import film as steps

NO_REPAIR_KINDS = {"timeout": "a render timeout is a budget problem, not a code problem",
                   "missing_tool": "a missing LaTeX/ffmpeg/dvisvgm is an environment problem"}


class FilmFailed(RuntimeError):
    """The film could not be finished; the message says why and where the run dir is."""


def _run_name() -> str:
    request = flow_run.parameters.get("request") or {}
    prompt = request.get("prompt") if isinstance(request, dict) else getattr(request, "prompt", "")
    return f"film-{slugify(prompt or 'film')}"


class _Progress:
    """A progress artifact updated after every step."""

    def __init__(self, total: int, run_dir: Path) -> None:
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
        outcome = state.result()  # a failed stage raises here, with its own message
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
    generated = state.result()
    task_run_id, cached = _state_meta(state)
    if cached:
        (session.run_dir / "07_codegen.raw.txt").write_text(generated["raw"], encoding="utf-8")
    code, scene_name = generated["code"], generated["scene_name"]
    scene_path = session.write_scene(code, "codegen")
    manifest.add_stage({"stage": "codegen", "artifact": SCENE_FILE,
                        "seconds": generated["seconds"], "cached": cached,
                        "model": generated["model"], "prefect_task_run_id": task_run_id})
    say(f"[film] codegen          -> {SCENE_FILE} ({scene_name or 'no scene class'})"
         f"{' (cached)' if cached else ''}")
    progress.step()

    checked = steps.verify.with_options(task_run_name="verify")(code, request.prompt)
    manifest.update(static_check={"passed": checked["ok"], "detail": checked["reason"],
                                  "line": checked["line"]})
    say(f"[film] verify           -> {'ok' if checked['ok'] else checked['reason']}")
    progress.step()

    video = _render_and_repair(session, request, progress, code, scene_name, scene_path,
                               checked)
    manifest.update(scene_file=str(session.run_dir / SCENE_FILE), scene_name=scene_name,
                    video_path=video, model=session.model_label,
                    model_calls=session.model_calls, completed_utc=utc_now())
    return {"run_dir": str(session.run_dir), "video_path": video,
            "scene_file": str(session.run_dir / SCENE_FILE),
            "repairs": len(manifest.data.get("repairs", [])),
            "model_calls": session.model_calls}


def _render_and_repair(session: FilmSession, request: FilmRequest, progress: _Progress,
                       code: str, scene_name: str, scene_path: Path, checked: dict) -> str | None:
    """Render; on a scene error feed the error tail to a repair, up to max_repairs."""
    manifest = session.manifest
    if not request.render:
        if not checked["ok"]:
            raise FilmFailed(f"the generated scene failed the static check: {checked['reason']} "
                             f"(line {checked['line']}); see {scene_path}")
        return None
    timeout = request.render_timeout or _render_timeout()
    ok, failure = checked["ok"], f"static check: {checked['reason']} (line {checked['line']})"
    attempt = 0
    while True:
        label = "" if attempt == 0 else f" (after repair-{attempt})"
        if ok:
            rendered = steps.render.with_options(
                task_run_name=f"render{label}", timeout_seconds=timeout + 120)(
                str(scene_path), scene_name, request.quality, timeout, str(session.run_dir))
            manifest.append("renders", {"attempt": attempt, "ok": rendered["ok"],
                                        "kind": rendered["kind"],
                                        "returncode": rendered["returncode"],
                                        "seconds": rendered["seconds"],
                                        "message": rendered["message"],
                                        "video_path": rendered["video_path"],
                                        "isolation": rendered.get("isolation", [])})
            say(f"[film] render{label:<11} -> "
                 f"{rendered['video_path'] if rendered['ok'] else rendered['message']}")
            progress.step()
            if rendered["ok"]:
                return rendered["video_path"]
            if rendered["kind"] in NO_REPAIR_KINDS:
                manifest.update(render_timed_out=rendered["kind"] == "timeout",
                                render_problem=rendered["kind"])
                raise FilmFailed(f"{rendered['message']} ({NO_REPAIR_KINDS[rendered['kind']]}: "
                                 f"no repair spent); run dir {session.run_dir}")
            failure = rendered["log_tail"] or rendered["message"]
        if attempt >= request.max_repairs or request.backend == "offline":
            raise FilmFailed(
                f"the scene still fails after {attempt} repair(s): "
                f"{_last_line(failure)}; scene {scene_path}, run dir {session.run_dir}")
        attempt += 1
        repaired = steps.repair.with_options(
            name=f"repair-{attempt}", task_run_name=f"repair-{attempt}",
            timeout_seconds=session.timeout + 60)(quote(session), attempt, code, failure)
        code, scene_name = repaired["code"], repaired["scene_name"] or scene_name
        scene_path = session.write_scene(code, f"repair{attempt}")
        manifest.append("repairs", {"attempt": attempt, "seconds": repaired["seconds"],
                                    "model": repaired["model"],
                                    "failure": _last_line(failure)[:500]})
        manifest.add_stage({"stage": f"repair-{attempt}", "artifact": SCENE_FILE,
                            "seconds": repaired["seconds"], "model": repaired["model"]})
        say(f"[film] repair-{attempt}         -> {SCENE_FILE}")
        checked = steps.verify.with_options(task_run_name=f"verify (after repair-{attempt})")(
            code, request.prompt)
        manifest.update(static_check={"passed": checked["ok"], "detail": checked["reason"],
                                      "line": checked["line"]})
        ok, failure = checked["ok"], f"static check: {checked['reason']} (line {checked['line']})"
        progress.step(extra_total=2)


def _render_timeout() -> float:
    from mythloop.settings import get_settings

    return get_settings().render_timeout


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "unknown failure"


def _publish_summary(session: FilmSession) -> None:
    """A markdown summary per film and a link to the video, for the Prefect UI."""
    data = session.manifest.data
    rows = ["| step | seconds | cached | retried | model |", "|---|---|---|---|---|"]
    for stage in data.get("stages", []):
        rows.append(f"| {stage.get('stage')} | {stage.get('seconds', '')} | "
                    f"{'yes' if stage.get('cached') else ''} | "
                    f"{'yes' if stage.get('retried') else ''} | {stage.get('model', '')} |")
    check = data.get("static_check") or {}
    renders = data.get("renders", [])
    lines = [
        f"# Film: {data.get('prompt')}",
        f"Backend **{data.get('backend')}**"
        + (" (offline stand-ins, not a model)" if data.get("offline") else "")
        + (" (replayed recordings, not a live model)" if data.get("replay") else "")
        + f", model `{data.get('model')}`, model calls: {data.get('model_calls', 0)}.",
        "", *rows, "",
        f"**Verify:** {'passed' if check.get('passed') else check.get('detail', 'not run')}",
        f"**Renders:** {len(renders)}; **repairs:** {len(data.get('repairs', []))}",
        f"**Video:** `{data.get('video_path')}`" if data.get("video_path") else
        f"**No video.** {data.get('failed', {}).get('error', '')}",
        f"**Run dir:** `{session.run_dir}`",
    ]
    try:
        create_markdown_artifact(markdown="\n".join(lines), description="Film summary")
        if data.get("video_path"):
            create_link_artifact(link=Path(data["video_path"]).as_uri(),
                                 link_text=Path(data["video_path"]).name,
                                 description="The rendered film")
    except Exception as exc:  # an artifact is a courtesy; never lose the film over it
        say(f"[film] could not publish the summary artifact: {exc}")
