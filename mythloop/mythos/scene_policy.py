"""What follows each step of a film scene: render, repair, keep the last good video, give up.

Pure decisions, no I/O and no Prefect: the film flow (flows/film.py) runs the steps in order
and asks these functions what comes next.

    after_verify(ok, failure, good)      -> Step: render, keep, or repair
    after_render(render, good, attempt, rules, layout_repaired)
                                         -> Step: accept, accept then a layout repair, keep,
                                            give up (an environment problem), or repair
    before_repair(failure, attempt, rules)  -> Step: repair, or give up (out of repairs)

A repair never costs a rendered scene: once a scene has a video (`Good`), a repair that
fails to verify, to render, or renders with more layout findings keeps that video.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from mythloop.mythos.code.scenes import SceneUnit
from mythloop.mythos.sandbox.layout import Finding, format_findings
from mythloop.textsafe import clean_line

__all__ = ["NO_REPAIR_KINDS", "FilmFailed", "SceneFailed", "Good", "RepairRules", "RenderView",
           "Step", "after_verify", "after_render", "before_repair", "last_line", "good_from",
           "film_failure"]

NO_REPAIR_KINDS = {"timeout": "a render timeout is a budget problem, not a code problem",
                   "missing_tool": "a missing LaTeX/ffmpeg/dvisvgm is an environment problem",
                   "interrupted": "Ctrl-C or SIGTERM stopped the render, not the scene"}


# A scene's or a film's error quotes scene and model text (a render's error line, a layout
# finding's label); it reaches the terminal, the Prefect log and the run's state message:
# cleaned of escapes and control characters (mythloop.textsafe) when the error is made.
ERROR_CHARS = 8000


class FilmFailed(RuntimeError):
    """The film could not be finished; the message says why and where the run dir is."""

    def __init__(self, message: str) -> None:
        super().__init__(clean_line(message, ERROR_CHARS))


class SceneFailed(RuntimeError):
    """One scene could not be rendered (after its repairs, or for an environment problem)."""

    def __init__(self, unit: SceneUnit, message: str, kind: str = "scene_error") -> None:
        super().__init__(clean_line(message, ERROR_CHARS))
        self.unit, self.kind = unit, kind


class Good(NamedTuple):
    """A scene's last rendered video and the code it came from."""

    code: str
    version: str
    video: str
    duration: float
    findings: list[Finding] | None
    finding: str  # the layout findings as the repair's error text ("" when clean)


@dataclass(frozen=True)
class RepairRules:
    """What the request allows: how many repairs, whether layout findings are repaired, and
    whether a model is there to repair at all (the offline stand-ins repair nothing)."""

    max_repairs: int
    layout_repair: bool = False
    offline: bool = False


@dataclass(frozen=True)
class RenderView:
    """The parts of a render (a SceneRender) the policy reads."""

    ok: bool
    kind: str
    message: str = ""
    log_tail: str = ""
    findings: list[Finding] | None = None


Action = Literal["render", "accept", "accept_then_repair", "keep", "repair", "give_up"]


@dataclass(frozen=True)
class Step:
    """What comes next. `why` is the reason to keep a video, the failure a repair is given,
    or the give-up message; `kind` is the failure kind (`layout` for a layout repair)."""

    action: Action
    why: str = ""
    kind: str = "scene_error"


def last_line(text: str | None) -> str:
    """The last non-blank line of an error text ("unknown failure" when there is none)."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "unknown failure"


def good_from(code: str, version: str, video: str, duration: float,
              findings: list[Finding] | None) -> Good:
    """A scene's newly rendered video, with its findings as the text a layout repair gets."""
    return Good(code, version, video, duration, findings,
                format_findings(findings or []))


def after_verify(ok: bool, failure: str, good: Good | None) -> Step:
    """The static check passed: render. It failed: a repaired scene keeps its last video;
    a scene without one goes to repair (`before_repair` decides whether one is left)."""
    if ok:
        return Step("render")
    if good is not None:
        return Step("keep", why=failure)
    return Step("repair", why=failure)


def after_render(render: RenderView, good: Good | None, attempt: int, rules: RepairRules,
                 layout_repaired: bool) -> Step:
    """What follows a render. `good` is the scene's video from before this render."""
    findings = render.findings or []
    if render.ok:
        if good is not None and good.findings is not None and len(findings) > len(good.findings):
            return Step("keep", why=f"the repaired scene has {len(findings)} layout "
                                    "finding(s), more than before")
        if (findings and rules.layout_repair and not layout_repaired
                and attempt < rules.max_repairs and not rules.offline):
            # one scoped repair with the findings as the error; the video just rendered
            # stays the scene's video unless the repair does better
            return Step("accept_then_repair", why="", kind="layout")
        return Step("accept")
    if good is not None:  # a repair that fails to render: the scene keeps its video
        return Step("keep", why=render.message or render.log_tail)
    if render.kind in NO_REPAIR_KINDS:
        return Step("give_up", kind=render.kind,
                    why=f"{render.message} ({NO_REPAIR_KINDS[render.kind]}: no repair spent)")
    return Step("repair", why=render.log_tail or render.message)


def before_repair(failure: str, attempt: int, rules: RepairRules) -> Step:
    """A repair when one is left (and a model is there to make it); else give up."""
    if attempt >= rules.max_repairs or rules.offline:
        return Step("give_up", why=f"still fails after {attempt} repair(s): "
                                   f"{last_line(failure)}")
    return Step("repair", why=failure)


def film_failure(failures: list[SceneFailed], scene_count: int, kept: int, scenes_dir: str,
                 run_dir: str) -> str:
    """The film's error when scenes failed: each failed scene named, an environment problem's
    kind in brackets, and where the kept scene videos and the run dir are."""
    failures = sorted(failures, key=lambda f: f.unit.index)
    env = [f for f in failures if f.kind in NO_REPAIR_KINDS]
    return (f"{len(failures)} of {scene_count} scene(s) failed: "
            + "; ".join(str(f) for f in failures)
            + (f" [{env[0].kind}]" if env else "")
            + f"; {kept} rendered scene(s) kept in {scenes_dir}; run dir {run_dir}")
