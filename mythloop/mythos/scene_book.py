"""The scenes' bookkeeping of a film: scene files, scene records, renders, repairs, warnings.

Scenes finish on different threads; every write to the run's manifest goes through one lock
(the manifest's own). The film flow calls these after each step; what comes next is
decided in mythloop.mythos.scene_policy.
"""

from __future__ import annotations

import filecmp
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from mythloop.fileio import write_text_if_changed
from mythloop.mythos.code.scenes import SceneUnit, join_film, scene_file_text
from mythloop.mythos.media.avmux import duration_of
from mythloop.mythos.media.subtitles import Shot, caption_mismatch, caption_shots, lane_captions
from mythloop.mythos.pipeline import FilmSession
from mythloop.mythos.records import (
    FailedScene,
    RenderEntry,
    RepairEntry,
    RepairResult,
    SceneRecord,
    SceneRender,
    StaticCheck,
    VerifyResult,
)
from mythloop.mythos.sandbox.layout import Finding, scene_cuts
from mythloop.mythos.sandbox.scene_cache import SceneCache
from mythloop.mythos.scene_policy import (
    NO_REPAIR_KINDS,
    FilmFailed,
    Good,
    SceneFailed,
    Step,
    film_failure,
    good_from,
    last_line,
)
from mythloop.textsafe import clean_line

__all__ = ["SceneBook"]


class _Say(Protocol):
    def __call__(self, message: str) -> None: ...


def _print(message: str) -> None:
    print(clean_line(message, 8000), flush=True)  # (labels and errors come from the scene)


class SceneBook:
    """One film's scenes on record: `manifest.json`'s `scenes`, `renders`, `repairs`,
    `warnings`, `failed_scenes`, and the scene files under `<run dir>/scenes/`."""

    def __init__(self, session: FilmSession, header: str, units: list[SceneUnit],
                 say: _Say = _print) -> None:
        self.session, self.header, self.units, self.say = session, header, units, say
        self.lock = session.manifest.lock  # one lock for the manifest and the scene records
        self.dir = session.run_dir / "scenes"
        self.records: dict[int, SceneRecord] = {}
        self.code: dict[int, str] = {u.index: u.code for u in units}
        self.interrupted_scenes: set[int] = set()  # the scenes a stop cut short
        self.shots: dict[int, list[Shot]] = {}  # per scene, its accepted video's shots
        self.layouts: dict[int, dict | None] = {}  # per scene, its accepted render's record

    # -- records -----------------------------------------------------------------------
    def open(self, narration: list[list[str]], sources: list[str | None]) -> None:
        """Every scene's record, before any step runs."""
        for unit, lines, source in zip(self.units, narration, sources, strict=True):
            self.record(unit, index=unit.index, name=unit.name, label=unit.label,
                        file=str(self.dir / f"{unit.label}.py"), ok=None, attempts=0,
                        cache=None, render_seconds=0.0, renders=[], repairs=[],
                        narration=" ".join(lines) or None, narration_source=source)

    def record(self, unit: SceneUnit, **fields: Any) -> None:
        with self.lock:
            record = self.records.setdefault(unit.index, SceneRecord())
            for key, value in fields.items():  # each validated by SceneRecord
                setattr(record, key, value)
            scenes = [self.records[i] for i in sorted(self.records)]
            self.session.manifest.update(scenes=scenes)

    def write_scene(self, unit: SceneUnit, code: str, version: str) -> Path:
        """`scenes/scene-03.<version>.py` and `scenes/scene-03.py`; the whole film's current
        scene file follows."""
        text = scene_file_text(self.header, code)
        write_text_if_changed(self.dir / f"{unit.label}.{version}.py", text)
        path = self.dir / f"{unit.label}.py"
        write_text_if_changed(path, text)  # a resumed film leaves an unchanged scene as it was
        with self.lock:
            self.code[unit.index] = code
            self.session.write_scene(join_film(self.header, [self.code[u.index]
                                                             for u in self.units]), "current")
        return path

    def checked(self, unit: SceneUnit, checked: VerifyResult, **fields: Any) -> None:
        self.record(unit, static_check=StaticCheck(passed=checked.ok, detail=checked.reason,
                                                   line=checked.line), **fields)

    def rendered(self, unit: SceneUnit, attempt: int, rendered: SceneRender) -> None:
        """A render on record: the manifest's `renders` and the scene's own."""
        entry = RenderEntry(scene=unit.index, name=unit.name, attempt=attempt,
                            ok=rendered.ok, kind=rendered.kind, cache=rendered.cache,
                            returncode=rendered.returncode, seconds=rendered.seconds,
                            cpu_s=rendered.cpu_s, message=rendered.message, video_path=rendered.video_path,
                            isolation=rendered.isolation)
        with self.lock:
            self.session.manifest.append("renders", entry)
            record = self.records[unit.index]
            renders = [*record.renders, RenderEntry(**entry.model_dump(include={
                "attempt", "ok", "kind", "cache", "seconds", "message"}))]
            spent = record.render_seconds + rendered.seconds
            attempts = record.attempts + (rendered.cache == "miss")
        self.record(unit, renders=renders, render_seconds=round(spent, 2), attempts=attempts,
                    cache=rendered.cache)
        if rendered.ok and rendered.layout_findings is not None:
            self.record(unit, layout=rendered.layout_findings)

    def accept(self, unit: SceneUnit, code: str, version: str, rendered: SceneRender,
               cache_key: str | None = None) -> Good:
        """A rendered video becomes the scene's video (`scenes/scene-03.mp4`); its shots are
        read from the layout record the scene cache keeps under CACHE_KEY (for the
        subtitles of a film without a voice)."""
        assert rendered.video_path, "an accepted render has a video"
        video = self.dir / f"{unit.label}.mp4"
        if not (video.is_file() and filecmp.cmp(rendered.video_path, video, shallow=False)):
            shutil.copyfile(rendered.video_path, video)  # (a resumed film keeps its own)
        duration = round(duration_of(video), 3)
        record = SceneCache().layout_record(cache_key) if cache_key else None
        with self.lock:
            self.shots[unit.index] = caption_shots(record) if record else []
            self.layouts[unit.index] = record
        self.record(unit, ok=True, video=str(video), duration=duration)
        return good_from(code, version, str(video), duration, rendered.layout_findings)

    def keep(self, unit: SceneUnit, good: Good, attempt: int, why: str) -> None:
        """A repair that could not help: the scene keeps its last good video and code; the
        manifest records the finding and the failed repair; one warning line names the scene."""
        self.write_scene(unit, good.code, good.version)
        failed = {"attempt": attempt, "finding": last_line(good.finding)[:500],
                  "error": " ".join(why.split())[:500], "kept": good.version}
        self.record(unit, ok=True, video=good.video, duration=good.duration,
                    layout=good.findings, failed_repair=failed)
        line = (f"{unit.label} ({unit.name}) keeps its rendered video ({good.version}): "
                f"repair-{attempt} could not help ({last_line(why)[:200]})")
        with self.lock:
            self.session.manifest.append("warnings", line)
        self.say(f"[film] warning: {line}")

    def unrepaired(self, unit: SceneUnit, good: Good, reason: str) -> None:
        """Layout findings no model can repair (offline, or a replay without the recording):
        the scene keeps its video; the manifest's warnings and one line say why."""
        line = (f"{unit.label} ({unit.name}): {len(good.findings or [])} layout finding(s) not "
                f"repaired: {reason}; the scene keeps its video ({good.version})")
        with self.lock:
            self.session.manifest.append("warnings", line)
        self.say(f"[film] {line}")

    def give_up(self, unit: SceneUnit, step: Step, path: Path, error: str) -> SceneFailed:
        """The scene fails (`step` from the policy); its record says why. Returns the error
        to raise."""
        if step.kind in NO_REPAIR_KINDS:
            with self.lock:
                self.session.manifest.update(render_timed_out=step.kind == "timeout",
                                             render_problem=step.kind)
            self.record(unit, ok=False, error=error)
            return SceneFailed(unit, f"{unit.label} ({unit.name}): {step.why}", kind=step.kind)
        self.record(unit, ok=False, error=error[:500])
        return SceneFailed(unit, f"{unit.label} ({unit.name}) {step.why}; scene file {path}")

    def interrupted(self, unit: SceneUnit, good: Good | None, attempt: int,
                    before: str = "") -> SceneFailed | None:
        """The film stops: a scene with a video keeps it (None); else the error to raise."""
        with self.lock:
            self.interrupted_scenes.add(unit.index)
        if good is not None:
            self.keep(unit, good, attempt, "the film was interrupted")
            return None
        what = f"stopped before {before}" if before else "stopped"
        return SceneFailed(unit, f"{unit.label} ({unit.name}): {what} (the film was "
                                 "interrupted)", kind="interrupted")

    def repair_failed(self, unit: SceneUnit, attempt: int, exc: Exception,
                      path: Path) -> SceneFailed:
        self.record(unit, ok=False, error=f"repair-{attempt}: {exc}"[:500])
        return SceneFailed(unit, f"{unit.label} ({unit.name}): repair-{attempt} gave no usable "
                                 f"scene ({last_line(str(exc))}); scene file {path}")

    def repaired(self, unit: SceneUnit, attempt: int, repaired: RepairResult,
                 failure: str) -> None:
        """A repair on record: the manifest's `repairs` and `stages`, and the scene's own."""
        item = RepairEntry(scene=unit.index, name=unit.name, attempt=attempt,
                           seconds=repaired.seconds, model=repaired.model,
                           failure=last_line(failure)[:500], reused=repaired.reused)
        with self.lock:
            self.session.manifest.append("repairs", item)
            repairs = [*self.records[unit.index].repairs, RepairEntry(**item.model_dump(
                include={"attempt", "seconds", "model", "failure", "reused"}))]
            self.session.manifest.add_stage({
                "stage": f"repair-{unit.label}-{attempt}",
                "artifact": f"scenes/{unit.label}.py", "seconds": repaired.seconds,
                "model": repaired.model})
        self.record(unit, repairs=repairs)

    # -- the film ------------------------------------------------------------------------
    def static_checks(self) -> list[str]:
        """The film's `static_check` from its scenes'; the scenes that failed it."""
        checks = [self.records[u.index].static_check or StaticCheck() for u in self.units]
        bad = [f"{u.label}: {c.detail}" for u, c in zip(self.units, checks, strict=True)
               if not c.passed]
        self.session.manifest.update(static_check={"passed": not bad,
                                                   "detail": "; ".join(bad) or None,
                                                   "line": None})
        return bad

    def failed(self, failures: list[SceneFailed]) -> FilmFailed:
        """The scenes that failed on record, the others' videos kept; the error to raise."""
        failures = sorted(failures, key=lambda f: f.unit.index)
        kept = [str(self.records[u.index].video) for u in self.units
                if self.records[u.index].ok]
        with self.lock:
            self.session.manifest.update(failed_scenes=[
                FailedScene(scene=f.unit.index, name=f.unit.name, kind=f.kind, error=str(f))
                for f in failures], kept_scenes=kept)
        return FilmFailed(film_failure(failures, len(self.units), len(kept), str(self.dir),
                                       str(self.session.run_dir)))

    def scene_media(self) -> list[dict[str, Any]]:
        """The scenes as the subtitles-and-voice step reads them."""
        return [{"label": u.label, "video": self.records[u.index].video,
                 "duration": self.records[u.index].duration,
                 "shots": [[s.start, s.end, s.text] for s in self.shots.get(u.index, [])]}
                for u in self.units]

    def cuts(self) -> list[tuple[SceneUnit, Finding]]:
        """Hard cuts between consecutive scenes (`layout.scene_cuts` of their accepted
        renders' records), each added to the layout findings of the scene that ends."""
        units = {u.label: u for u in self.units}
        with self.lock:
            records = [(u.label, self.layouts.get(u.index)) for u in self.units]
        found = [(units[label], finding) for label, finding in scene_cuts(records)]
        for unit, finding in found:
            with self.lock:
                before = list(self.records[unit.index].layout or [])
            self.record(unit, layout=[*before, finding])
        return found

    def unquoted(self, narration: Sequence[Sequence[str]]) -> list[tuple[SceneUnit, str]]:
        """Scenes whose lane captions (in their accepted renders' layout records) are not
        their narration lines (`subtitles.caption_mismatch`): a viewer with subtitles on
        reads two sentences at once. One warning per scene in the manifest's `warnings`;
        returns (scene, why) for the lines to print."""
        found = []
        for unit, lines in zip(self.units, narration, strict=True):
            with self.lock:
                record = self.layouts.get(unit.index)
            why = caption_mismatch(lines, lane_captions(record)) if record else None
            if why:
                found.append((unit, why))
                line = f"{unit.label} ({unit.name}): captions are not its narration lines: {why}"
                with self.lock:  # (said once, also when a resumed film stitches again)
                    if line not in (self.session.manifest.record.warnings or []):
                        self.session.manifest.append("warnings", line)
        return found

    def videos(self) -> list[str]:
        return [str(self.records[u.index].video) for u in self.units]

    def duration_sum(self) -> float:
        return round(sum(self.records[u.index].duration or 0.0 for u in self.units), 3)
