"""The six Mythos reasoning stages: artifact models, stage order, validation and charter loading."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mythloop.data import agents_dir
from mythloop.mythos.code.extract import extract_json_object

__all__ = [
    "STAGES",
    "StageSpec",
    "IntentArtifact",
    "KnowledgeMap",
    "Curriculum",
    "MathDossier",
    "ShotList",
    "SceneSpec",
    "validate_artifact",
    "stage_by_slug",
    "load_charter",
    "extract_json_object",
]

# Models differ in how they spell numbers ("90", 90, 90.0) and small lists; accept all of them.
Number = int | float | str


class _Artifact(BaseModel):
    """Base: extra keys are welcome, the reference keys must be present."""

    model_config = ConfigDict(extra="allow")


class Scope(_Artifact):
    in_: Any = Field(alias="in")
    out: Any


class IntentArtifact(_Artifact):
    core_claim: str
    audience: str | dict | list
    emotional_arc: list[Any] = Field(min_length=1)
    scope: Scope | dict | str
    duration_seconds: Number | list[Number] | dict
    title_options: list[str] = Field(min_length=1)
    the_big_zoom: str | dict


class KnowledgeNode(_Artifact):
    id: str | int
    name: str
    why_needed: str = ""
    depth: Number = 0
    assumed: bool | str = False
    visual_seed: str | dict | list = ""


class KnowledgeMap(_Artifact):
    target: str | dict
    nodes: list[KnowledgeNode] = Field(min_length=1)
    edges: list[list[Any] | dict]
    spine: list[Any] | str


class Act(_Artifact):
    act_number: Number
    title: str
    opening_question: str = ""
    teaches: str | list[str] = ""
    narrative: str = ""
    headline: str
    payoff: str = ""
    estimated_seconds: Number = 0


class Curriculum(_Artifact):
    acts: list[Act] = Field(min_length=1)
    through_line: str | dict | list


class TermGloss(_Artifact):
    part_index: Number
    plain_words: str
    identity: str = ""
    zoom_worthy: bool | str = False


class Formula(_Artifact):
    id: str | int
    act_number: Number
    latex_parts: list[str] = Field(min_length=1)
    term_glossary: list[TermGloss]
    derivation_or_motivation: str = ""
    common_misreading: str = ""


class MathDossier(_Artifact):
    formulas: list[Formula]
    color_identity: dict | list
    numbers: list[Any] | dict


class ShotParams(_Artifact):
    zoom: Number | None = None
    phi: Number | None = None
    theta: Number | None = None
    run_time: Number | None = None
    position: Any = None


class Shot(_Artifact):
    beat: Number | str
    act_number: Number
    verb: str
    target: Any = None
    params: ShotParams | dict = Field(default_factory=dict)
    caption_text: str | None = None
    formula_id: str | int | None = None
    part_index: Number | None = None
    seconds: Number | None = None


class ShotList(_Artifact):
    shots: list[Shot]
    camera_score: str | dict | list


class SceneObject(_Artifact):
    id: str | int
    kind: str
    spec: Any = None


class SceneSpec(_Artifact):
    scene_name: str
    scene_class: str
    palette: dict | list
    objects: list[SceneObject]
    timeline: list[Any] | dict | str
    constraints: list[Any] | dict | str
    acceptance: list[Any] = Field(min_length=1)


class StageSpec(NamedTuple):
    """One reasoning stage: its slug, charter file, artifact file name and artifact model."""

    slug: str
    charter_file: str
    artifact_name: str
    model: type[BaseModel]


STAGES: tuple[StageSpec, ...] = (
    StageSpec("intent", "intent.md", "01_intent.json", IntentArtifact),
    StageSpec("cartographer", "cartographer.md", "02_knowledge_map.json", KnowledgeMap),
    StageSpec("curriculum", "curriculum.md", "03_curriculum.json", Curriculum),
    StageSpec("math-director", "math-director.md", "04_math_dossier.json", MathDossier),
    StageSpec("cinematographer", "cinematographer.md", "05_shot_list.json", ShotList),
    StageSpec("scene-composer", "scene-composer.md", "06_scene_spec.json", SceneSpec),
)

_MIN_SHOTS = 8
_BIG_ARTIFACT_BYTES = 500  # math dossier and shot list
_SMALL_ARTIFACT_BYTES = 200  # every other stage


def stage_by_slug(slug: str) -> StageSpec:
    """The StageSpec for `slug`; a clear error naming the known slugs otherwise."""
    for spec in STAGES:
        if spec.slug == slug:
            return spec
    known = ", ".join(spec.slug for spec in STAGES)
    raise KeyError(f"unknown Mythos stage {slug!r}; known stages: {known}")


def _summarise(exc: ValidationError) -> str:
    """One line: the first few failing fields and why."""
    parts = []
    for error in exc.errors()[:4]:
        where = ".".join(str(loc) for loc in error["loc"]) or "artifact"
        parts.append(f"{where}: {error['msg']}")
    more = exc.error_count() - len(parts)
    suffix = f" (+{more} more)" if more > 0 else ""
    return "; ".join(parts) + suffix


def _degeneracy(slug: str, artifact: dict) -> str | None:
    """The seed's degeneracy rules: empty formulas, too few shots, tiny artifacts."""
    size = len(json.dumps(artifact))
    if slug == "math-director":
        if not artifact.get("formulas"):
            return "math dossier has an empty 'formulas' list"
        if size < _BIG_ARTIFACT_BYTES:
            return f"math dossier is only {size} bytes"
    elif slug == "cinematographer":
        shots = artifact.get("shots") or []
        if len(shots) < _MIN_SHOTS:
            return f"shot list has only {len(shots)} beats (need at least {_MIN_SHOTS})"
        if size < _BIG_ARTIFACT_BYTES:
            return f"shot list is only {size} bytes"
    elif size < _SMALL_ARTIFACT_BYTES:
        return f"artifact is only {size} bytes"
    return None


def validate_artifact(slug: str, obj: object) -> str | None:
    """Why the artifact for `slug` is unusable (one line), or None when it is healthy."""
    spec = stage_by_slug(slug)
    if not isinstance(obj, dict) or not obj:
        return "artifact is not a non-empty JSON object"
    # Degeneracy first: an empty dossier is the failure that matters, not its missing keys.
    problem = _degeneracy(slug, obj)
    if problem is not None:
        return problem
    try:
        spec.model.model_validate(obj)
    except ValidationError as exc:
        return f"{spec.artifact_name} does not match the {slug} schema: {_summarise(exc)}"
    return None


def _strip_frontmatter(text: str) -> str:
    """Drop a leading YAML frontmatter block (--- ... ---)."""
    if text.startswith("---"):
        end = text.find("\n---", 3)
        if end != -1:
            text = text[end + 4 :]
    return text.strip()


def load_charter(slug_or_file: str) -> str:
    """Charter text for a stage slug or an agents/ file name, frontmatter removed."""
    name = slug_or_file if slug_or_file.endswith(".md") else None
    if name is None:
        known = {spec.slug: spec.charter_file for spec in STAGES}
        name = known.get(slug_or_file, f"{slug_or_file}.md")
    path = agents_dir() / name
    if not path.is_file():
        raise FileNotFoundError(f"charter {name!r} not found in {agents_dir()}; restore it from the checkout")
    return _strip_frontmatter(path.read_text(encoding="utf-8"))
