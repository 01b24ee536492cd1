"""Parse and validate every SKILL.md under a pool folder.

Rules follow the Agent Skills specification: YAML frontmatter with `name`
(1-64 chars of a-z, 0-9 and single inner hyphens, equal to the folder name) and
`description` (1-1024 chars); optional `license`, `compatibility`, `metadata`
(a map) and `allowed-tools`; nothing else. An invalid skill becomes a
CatalogIssue with its file and the reason, and is left out of the catalog --
never dropped silently (the published run lost every verdict of a skill whose
folder name differed from its `name`). Only an unreadable file, broken
frontmatter or a bad/missing name or description drops a skill: a description
over 1,024 characters or a body over 500 lines (both common in public skill
libraries) is a warning (Catalog.warnings, one line naming the file) and the
skill is kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["TIERS", "Catalog", "CatalogIssue", "Skill", "load_catalog", "load_skill",
           "size_warnings"]

TIERS = ("real", "poisoned", "competing", "noise")
NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
ALLOWED_FIELDS = frozenset(
    {"name", "description", "license", "compatibility", "metadata", "allowed-tools"}
)
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_BODY_LINES = 500


@dataclass(frozen=True)
class Skill:
    """One valid skill: its frontmatter fields, body and where it came from."""

    name: str
    description: str
    body: str
    path: Path
    tier: str | None
    frontmatter: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class CatalogIssue:
    """A SKILL.md that was left out, and why."""

    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass
class Catalog:
    """The valid skills of a pool (sorted by name) and the issues found."""

    skills: list[Skill]
    issues: list[CatalogIssue] = field(default_factory=list)
    warnings: list[CatalogIssue] = field(default_factory=list)
    """Kept skills that break a size rule of the spec (long description or body)."""

    def __len__(self) -> int:
        return len(self.skills)

    def names(self) -> list[str]:
        """Skill names in catalog order."""
        return [s.name for s in self.skills]

    def get(self, name: str) -> Skill | None:
        """The skill called `name`, or None."""
        return next((s for s in self.skills if s.name == name), None)


class _Invalid(ValueError):
    """Raised inside the loader; becomes a CatalogIssue."""


def _split_frontmatter(text: str) -> tuple[str, str]:
    """Return (yaml_text, body) of a SKILL.md, or raise _Invalid."""
    text = text.lstrip("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise _Invalid("no YAML frontmatter: the file must start with a '---' line")
    for i in range(1, len(lines)):
        if lines[i].strip() == "---":
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise _Invalid("frontmatter is not closed by a '---' line")


def _check_name(name: Any, folder: str) -> str:
    """Validate the `name` field against the spec and the folder name."""
    if not isinstance(name, str) or not name:
        raise _Invalid("missing or empty 'name'")
    if len(name) > MAX_NAME:
        raise _Invalid(f"'name' is {len(name)} characters; at most {MAX_NAME} allowed")
    if not NAME_RE.match(name):
        raise _Invalid(
            f"'name' {name!r} must use only a-z, 0-9 and single inner hyphens "
            "(no leading, trailing or double hyphen)"
        )
    if name != folder:
        raise _Invalid(f"'name' {name!r} differs from its folder name {folder!r}; rename one")
    return name


def _check_optional(meta: Mapping[str, Any]) -> None:
    """Validate the optional fields' types and sizes."""
    unknown = sorted(set(meta) - ALLOWED_FIELDS)
    if unknown:
        raise _Invalid(f"unexpected frontmatter field(s) {unknown}; allowed: {sorted(ALLOWED_FIELDS)}")
    if "license" in meta and not isinstance(meta["license"], str):
        raise _Invalid("'license' must be a string")
    compat = meta.get("compatibility")
    if compat is not None and (not isinstance(compat, str) or len(compat) > MAX_COMPATIBILITY):
        raise _Invalid(f"'compatibility' must be a string of at most {MAX_COMPATIBILITY} characters")
    if "metadata" in meta and not isinstance(meta["metadata"], Mapping):
        raise _Invalid("'metadata' must be a map of keys to values")
    tools = meta.get("allowed-tools")
    if tools is not None and not (
        isinstance(tools, str) or (isinstance(tools, list) and all(isinstance(t, str) for t in tools))
    ):
        raise _Invalid("'allowed-tools' must be a string (or a list of strings)")


def size_warnings(skill: Skill) -> list[str]:
    """The spec's size rules a loaded skill breaks (kept anyway): one line each."""
    out = []
    if len(skill.description) > MAX_DESCRIPTION:
        out.append(f"'description' is {len(skill.description)} characters; the spec allows "
                   f"{MAX_DESCRIPTION} (kept)")
    n_lines = len(skill.body.splitlines())
    if n_lines > MAX_BODY_LINES:
        out.append(f"body is {n_lines} lines; the spec asks for under {MAX_BODY_LINES} "
                   "(kept; move detail to references/)")
    return out


def load_skill(skill_md: Path, tier: str | None = None) -> Skill:
    """Parse and validate one SKILL.md; raise ValueError naming the problem.

    Size rules (description length, body lines) do not raise: see size_warnings."""
    try:
        text = skill_md.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _Invalid(f"not UTF-8 text ({exc.reason})") from None
    yaml_text, body = _split_frontmatter(text)
    try:
        meta = yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise _Invalid(f"frontmatter is not valid YAML ({first})") from None
    if not isinstance(meta, Mapping):
        raise _Invalid("frontmatter must be a YAML map of fields")
    name = _check_name(meta.get("name"), skill_md.parent.name)
    desc = meta.get("description")
    if not isinstance(desc, str) or not desc.strip():
        raise _Invalid("missing or empty 'description'")
    _check_optional(meta)
    return Skill(name, desc.strip(), body, skill_md, tier, dict(meta))


def _tier_of(skill_md: Path) -> str | None:
    """The tier is the skill folder's parent folder when it names one."""
    parent = skill_md.parent.parent.name
    return parent if parent in TIERS else None


def load_catalog(pool_dir: Path | str) -> Catalog:
    """Load every SKILL.md under `pool_dir`; invalid ones become issues."""
    root = Path(pool_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"skill pool {root} is not a folder: pass --pool DIR holding <name>/SKILL.md folders"
        )
    skills: dict[str, Skill] = {}
    issues: list[CatalogIssue] = []
    warnings: list[CatalogIssue] = []
    for skill_md in sorted(root.rglob("SKILL.md")):
        try:
            skill = load_skill(skill_md, _tier_of(skill_md))
        except (_Invalid, OSError) as exc:
            issues.append(CatalogIssue(skill_md, str(exc)))
            continue
        if skill.name in skills:
            other = skills[skill.name].path
            issues.append(CatalogIssue(skill_md, f"duplicate skill name {skill.name!r}, also at {other}"))
            continue
        skills[skill.name] = skill
        warnings.extend(CatalogIssue(skill_md, w) for w in size_warnings(skill))
    return Catalog(sorted(skills.values(), key=lambda s: s.name), issues, warnings)
