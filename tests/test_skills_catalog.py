"""Catalog loader: valid pools load with tiers; every invalid case is reported with file and reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from mythloop.skills import load_catalog

POOL_SMALL = Path(__file__).parent / "data" / "pool_small"


def write_skill(root: Path, folder: str, frontmatter: str, body: str = "# Body\n") -> Path:
    path = root / folder / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{frontmatter}\n---\n{body}", encoding="utf-8")
    return path


def test_small_pool_loads_sorted_with_tiers():
    catalog = load_catalog(POOL_SMALL)
    assert catalog.issues == []
    assert catalog.names() == sorted(catalog.names())
    tiers = {s.name: s.tier for s in catalog.skills}
    assert tiers["regex-debugger"] == "real"
    assert tiers["naive-regex-matcher"] == "poisoned"
    assert tiers["docker-compose-basics"] == "noise"
    skill = catalog.get("regex-debugger")
    assert skill.description.startswith("Diagnose slow")
    assert skill.frontmatter["metadata"] == {"author": "mythloop-tests"}
    assert "nested quantifiers" in skill.body


def test_untiered_pool_has_no_tier(tmp_path):
    write_skill(tmp_path, "plain-skill", "name: plain-skill\ndescription: Does a plain thing.")
    catalog = load_catalog(tmp_path)
    assert [(s.name, s.tier) for s in catalog.skills] == [("plain-skill", None)]


INVALID = {
    "name-differs": ("other-folder", "name: name-differs\ndescription: ok", "differs from its folder"),
    "upper": ("Upper", "name: Upper\ndescription: ok", "a-z, 0-9"),
    "lead": ("-lead", "name: -lead\ndescription: ok", "leading, trailing or double hyphen"),
    "trail": ("trail-", "name: trail-\ndescription: ok", "leading, trailing or double hyphen"),
    "double": ("dou--ble", "name: dou--ble\ndescription: ok", "double hyphen"),
    "underscore": ("snake_case", "name: snake_case\ndescription: ok", "a-z, 0-9"),
    "missing-name": ("no-name", "description: ok", "missing or empty 'name'"),
    "missing-desc": ("no-desc", "name: no-desc", "missing or empty 'description'"),
    "empty-desc": ("empty-desc", "name: empty-desc\ndescription: '  '", "missing or empty 'description'"),
    "long-name": ("a" * 65, f"name: {'a' * 65}\ndescription: ok", "at most 64"),
    "unknown-field": ("extra", "name: extra\ndescription: ok\nversion: 2", "unexpected frontmatter field"),
    "metadata-list": ("meta", "name: meta\ndescription: ok\nmetadata: [1, 2]", "'metadata' must be a map"),
    "bad-yaml": ("bad-yaml", "name: bad-yaml\ndescription: [unclosed", "not valid YAML"),
    "not-a-map": ("list-fm", "- name\n- description", "must be a YAML map"),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_skill_is_reported_with_file_and_reason(tmp_path, case):
    folder, frontmatter, expected = INVALID[case]
    write_skill(tmp_path, "good-one", "name: good-one\ndescription: A valid neighbour.")
    bad = write_skill(tmp_path, folder, frontmatter)
    catalog = load_catalog(tmp_path)
    assert catalog.names() == ["good-one"]
    assert len(catalog.issues) == 1
    issue = catalog.issues[0]
    assert issue.path == bad
    assert expected in issue.reason


def test_missing_frontmatter_and_unclosed_frontmatter(tmp_path):
    (tmp_path / "no-fm").mkdir()
    (tmp_path / "no-fm" / "SKILL.md").write_text("# just markdown\n")
    (tmp_path / "open-fm").mkdir()
    (tmp_path / "open-fm" / "SKILL.md").write_text("---\nname: open-fm\ndescription: x\n")
    reasons = {i.path.parent.name: i.reason for i in load_catalog(tmp_path).issues}
    assert "no YAML frontmatter" in reasons["no-fm"]
    assert "not closed" in reasons["open-fm"]


def test_long_body_and_description_are_kept_with_a_warning(tmp_path):
    long_body = write_skill(tmp_path, "long-body", "name: long-body\ndescription: ok",
                            "line\n" * 501)
    long_desc = write_skill(tmp_path, "long-desc",
                            "name: long-desc\ndescription: " + "word " * 220)
    write_skill(tmp_path, "short", "name: short\ndescription: fine", "line\n" * 500)
    catalog = load_catalog(tmp_path)
    assert catalog.names() == ["long-body", "long-desc", "short"]
    assert catalog.issues == []
    warned = {w.path: w.reason for w in catalog.warnings}
    assert set(warned) == {long_body, long_desc}
    assert "body is 501 lines" in warned[long_body]
    assert "'description' is 1099 characters" in warned[long_desc]
    assert all("\n" not in str(w) for w in catalog.warnings)


def test_duplicate_names(tmp_path):
    write_skill(tmp_path / "real", "twin", "name: twin\ndescription: first")
    write_skill(tmp_path / "noise", "twin", "name: twin\ndescription: second")
    catalog = load_catalog(tmp_path)
    assert catalog.names() == ["twin"]
    reasons = sorted(i.reason for i in catalog.issues)
    assert any("duplicate skill name 'twin'" in r for r in reasons)


REAL_SKILLS = Path("/work/shared/benchmarks/real-skills")


@pytest.mark.skipif(not REAL_SKILLS.is_dir(), reason="shared benchmark folder not present")
def test_real_skill_files_all_load():
    catalog = load_catalog(REAL_SKILLS)
    folders = sorted(p.parent.name for p in REAL_SKILLS.glob("*/SKILL.md"))
    assert catalog.names() == folders
    assert catalog.issues == []
    assert {w.path.parent.name for w in catalog.warnings} == {"claude-api", "writing-skills"}


def test_missing_pool_folder_raises_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="--pool"):
        load_catalog(tmp_path / "absent")
