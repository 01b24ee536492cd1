"""A film as a list of scenes: split the generated file, cache scene videos, stitch the film.

Codegen answers one Python file: a shared header (imports, palette, helpers, base
classes) followed by N Scene classes, one per beat or group of beats, in plan order.
`split_film` cuts it into the header and the scene classes; each scene is then
verified and rendered alone from `header + its class`. A scene video is cached under
`<state>/scene-cache/<key>.mp4`, keyed on the scene's code, the header, the quality and
the Manim version, so a rerun renders only the scenes that failed or changed.
`concat_videos` stitches the scene videos with ffmpeg's concat demuxer (`-c copy`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from mythloop.mythos.code.extract import base_class_name
from mythloop.mythos.code.safe_ast import parse

__all__ = ["SceneUnit", "SplitFilm", "split_film", "scene_narration", "scene_file_text", "join_film",
           "scene_from_reply", "scene_cache_key", "manim_version", "module_source",
"FilmSplitError"]


class FilmSplitError(ValueError):
    """The generated file holds no renderable Scene class."""


@dataclass(frozen=True)
class SceneUnit:
    """One scene of the film: its 1-based place in the plan, class name and class source."""

    index: int
    name: str
    code: str
    narration: str = ""  # the scene's NARRATION: what a teacher says over it

    @property
    def label(self) -> str:
        return f"scene-{self.index:02d}"


@dataclass(frozen=True)
class SplitFilm:
    header: str
    scenes: list[SceneUnit]


def _leaf_scenes(tree: ast.Module) -> list[ast.ClassDef]:
    """Top-level classes that are Scenes (directly or through each other) and not extended."""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    scenes: set[str] = set()
    for _ in range(len(classes)):
        for cls in classes:
            if any(base_class_name(b).endswith("Scene") or base_class_name(b) in scenes for b in cls.bases):
                scenes.add(cls.name)
    parents = {base_class_name(b) for c in classes if c.name in scenes for b in c.bases}
    return [c for c in classes if c.name in scenes and c.name not in parents]


def _narration_of(cls: ast.ClassDef) -> str:
    for stmt in cls.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NARRATION"
                                                for t in stmt.targets):
            value = stmt.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return " ".join(value.value.split())
    return ""


def scene_narration(class_code: str) -> str:
    """The `NARRATION` string of the (first) class in CLASS_CODE, whitespace folded; "" if none.

    Codegen writes each scene's narration into its class: the words a teacher says to the
    viewer over exactly what that scene shows (subtitles and voice-over speak it there)."""
    try:
        tree = parse(class_code)
    except SyntaxError:
        return ""
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    return _narration_of(classes[0]) if classes else ""


def split_film(code: str) -> SplitFilm:
    """Cut CODE into the shared header and its leaf Scene classes, in definition order."""
    try:
        tree = parse(code)
    except SyntaxError as exc:
        raise FilmSplitError(f"the generated film does not parse (line {exc.lineno}: "
                             f"{exc.msg})") from exc
    leaves = _leaf_scenes(tree)
    if not leaves:
        raise FilmSplitError("the generated film defines no Scene class; "
                             "define `class X(ThreeDScene)` per scene")
    lines = code.splitlines()
    cut: set[int] = set()
    scenes: list[SceneUnit] = []
    for number, cls in enumerate(leaves, start=1):
        first = min([cls.lineno, *(d.lineno for d in cls.decorator_list)])
        last = cls.end_lineno or cls.lineno
        cut.update(range(first - 1, last))
        scenes.append(SceneUnit(number, cls.name, "\n".join(lines[first - 1:last]) + "\n",
                                _narration_of(cls)))
    kept = [line for i, line in enumerate(lines) if i not in cut]
    header = "\n".join(kept).rstrip() + "\n"
    while "\n\n\n\n" in header:
        header = header.replace("\n\n\n\n", "\n\n\n")
    return SplitFilm(header=header, scenes=scenes)


def scene_file_text(header: str, scene_code: str) -> str:
    """The file one scene renders from: the shared header, then its own class."""
    return header.rstrip("\n") + "\n\n\n" + scene_code.strip("\n") + "\n"


def join_film(header: str, scene_codes: list[str]) -> str:
    """The whole film as one file (header + every scene class, in plan order)."""
    return header.rstrip("\n") + "\n\n\n" + "\n\n\n".join(c.strip("\n") for c in scene_codes) + "\n"


def scene_from_reply(code: str, name: str) -> str:
    """The class NAME from a repair's answer (else its only class); anything else is ignored.

    A scoped repair answers the scene class alone, whose base class lives in the
    read-only header, so the class is found by name, not by its bases.
    """
    try:
        tree = parse(code)
    except SyntaxError as exc:
        raise FilmSplitError(f"the repaired scene does not parse (line {exc.lineno}: "
                             f"{exc.msg})") from exc
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    named = [c for c in classes if c.name == name]
    if not named and len(classes) == 1:
        named = classes
    if not named:
        raise FilmSplitError(f"the repair answered {len(classes)} class(es) "
                             f"({', '.join(c.name for c in classes) or 'none'}) and none is "
                             f"{name}")
    cls = named[0]
    lines = code.splitlines()
    first = min([cls.lineno, *(d.lineno for d in cls.decorator_list)])
    return "\n".join(lines[first - 1:cls.end_lineno or cls.lineno]) + "\n"


@functools.cache
def manim_version() -> str:
    try:
        return version("manim")
    except PackageNotFoundError:
        return "unknown"


def module_source(name: str) -> str:
    """The source of the project module NAME (`mythloop.scenekit`), read, not imported (a
    scene helper imports manim): for a scene's cache key, and for the render worker, which
    installs the scene helpers itself (sandbox.render.scene_helper_sources)."""
    package_root = Path(__file__).resolve().parents[2]  # the `mythloop` package
    top, _, rest = name.partition(".")
    if top != package_root.name or not rest:
        raise ValueError(f"{name} is not a module of {package_root.name}")
    return (package_root / (rest.replace(".", "/") + ".py")).read_text(encoding="utf-8")


def scene_cache_key(header: str, scene_code: str, quality: str, scene_name: str) -> str:
    """What a scene video depends on: its code, the shared header, quality, Manim version,
    and the layout helpers (mythloop.scenekit) when the scene imports them."""
    digest = hashlib.sha256()
    parts = [header, scene_code, quality, scene_name, manim_version()]
    if "mythloop.scenekit" in header + scene_code:
        parts.append(module_source("mythloop.scenekit"))
    for part in parts:
        digest.update(part.encode("utf-8") + b"\x00")
    return digest.hexdigest()
