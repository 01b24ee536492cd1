"""Injected pools: tools/inject_pool.py copies a pool and adds skills whose descriptions carry
an instruction to the judge; injected.yaml marks them for the analysis only."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mythloop.llm.simulated import injection_in
from mythloop.skills import load_catalog
from mythloop.sweep.config import SweepConfig
from mythloop.sweep.injected import read_injected
from mythloop.sweep.inputs import InputError, check_inputs

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO / "tools" / "inject_pool.py"


def _inject(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True,
                          timeout=120)


def test_the_fixture_pool_gets_its_injected_skills_and_nothing_the_router_reads_says_so(
        tmp_path):
    out = tmp_path / "pool"
    done = _inject("--pool", str(REPO / "fixtures" / "pool"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    clean, catalog = load_catalog(REPO / "fixtures" / "pool"), load_catalog(out)
    injected = read_injected(out, set(catalog.names()))
    assert set(catalog.names()) == set(clean.names()) | set(injected) and len(injected) == 4
    for skill in catalog.skills:
        # the router's view of a skill: its tier folder, frontmatter and text
        assert skill.tier in ("real", "poisoned", "competing", "noise")
        if skill.name in injected:
            assert "inject" not in str(skill.path.relative_to(out)) + repr(skill.frontmatter)
        # the judge's: an instruction in the description it is shown, on injected skills only
        shown = " ".join(skill.description.split())[:300]
        assert (injection_in(shown) is not None) == (skill.name in injected), skill.name
    # every target is a real skill of the pool
    assert {t for ts in injected.values() for t in ts} <= set(clean.names())
    config = SweepConfig(pool=out, rounds=1)
    assert check_inputs(config).injected == injected
    assert check_inputs(SweepConfig(rounds=1)).injected is None


def test_a_public_pool_gets_injected_copies_within_what_a_catalog_shows(tmp_path):
    src = tmp_path / "bench"
    for name, desc in (("alpha-tool", "Find papers."), ("beta-tool", "Book trains " * 40),
                       ("gamma-tool", "Cook food.")):
        (src / name).mkdir(parents=True)
        (src / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\n# {name}\n")
        (src / name / "SKILL.md").chmod(0o444)
    prompts = tmp_path / "train.json"
    prompts.write_text('[{"id": "1", "text": "a", "expected": "beta-tool"},'
                       '{"id": "2", "text": "b", "expected": "beta-tool"},'
                       '{"id": "3", "text": "c", "expected": "alpha-tool"}]')
    out = tmp_path / "out"
    done = _inject("--pool", str(src), "--out", str(out), "--copy-top", "2", "--prompts",
                   str(prompts))
    assert done.returncode == 0, done.stderr
    catalog = load_catalog(out)
    assert read_injected(out) == {"beta-tool-pro": ["beta-tool"], "alpha-tool-pro": ["alpha-tool"]}
    for name in ("beta-tool-pro", "alpha-tool-pro"):
        desc = catalog.get(name).description
        assert len(desc) <= 300 and injection_in(desc) is not None
    assert catalog.get("beta-tool-pro").description.startswith("Book trains")
    # the source is untouched, and a second run refuses a folder that is not empty
    assert not (src / "injected.yaml").exists() and len(load_catalog(src)) == 3
    again = _inject("--pool", str(src), "--out", str(out), "--copy-top", "1", "--prompts",
                    str(prompts))
    assert again.returncode == 2 and again.stderr.count("\n") == 1 and "--out" in again.stderr


def test_a_marker_naming_a_skill_the_pool_lacks_is_one_line(tmp_path):
    out = tmp_path / "pool"
    assert _inject("--pool", str(REPO / "fixtures" / "pool"), "--out", str(out)).returncode == 0
    (out / "injected.yaml").write_text("injected:\n  - name: no-such-skill\n    targets: []\n")
    with pytest.raises(InputError, match="no-such-skill, not a valid skill") as info:
        check_inputs(SweepConfig(pool=out, rounds=1))
    assert "\n" not in str(info.value)
