"""What an install lays out (setup.py), and where mythloop.data finds its folders.

The built tree comes from setuptools' own build_py (what a wheel holds, without the zip), so
these run in seconds; tests/test_wheel.py builds and installs the real wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DATA_FOLDERS = ("agents", "fixtures", "deployments")
CODE_FOLDERS = {"mythloop": "mythloop", "mythloop_app": "mythloop_app",
                "flows": "mythloop_flows", "tasks": "mythloop_tasks"}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}


@pytest.fixture(scope="module")
def built(repo_root, tmp_path_factory) -> Path:
    """The checkout as a wheel lays it out: `setup.py build_py` into a temporary folder."""
    out = tmp_path_factory.mktemp("build") / "lib"
    result = subprocess.run(
        [sys.executable, "setup.py", "-q", "egg_info", "--egg-base", str(out.parent),
         "build_py", "--build-lib", str(out)],
        cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return out


def test_only_mythloop_names_are_installed(built):
    tops = sorted(p.name for p in built.iterdir())
    assert tops == ["mythloop", "mythloop_app", "mythloop_flows", "mythloop_tasks"], tops


def test_every_code_folder_installs_under_its_mythloop_name(repo_root, built):
    for folder, package in CODE_FOLDERS.items():
        source = {f for f in _files(repo_root / folder) if f.endswith(".py")}
        assert source and source <= _files(built / package), (folder, source - _files(built / package))


def test_the_data_folders_travel_whole_as_package_data(repo_root, built):
    for folder in DATA_FOLDERS:
        assert _files(built / "mythloop" / "_data" / folder) == _files(repo_root / folder), folder


def _python(code: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "MYTHLOOP_DATA_ROOT"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env={**full_env, **env},
                          capture_output=True, text=True, timeout=300)


LOAD = """
import json
from mythloop.data import agents_dir, data_origin, data_path, data_root
from mythloop.mythos.plan.stages import load_charter
from mythloop.skills import load_catalog
catalog = load_catalog(data_path("fixtures", "pool"))
print(json.dumps({"root": str(data_root()), "origin": data_origin(),
                  "skills": len(catalog.skills), "issues": len(catalog.issues),
                  "intent": len(load_charter("intent")), "agents": str(agents_dir())}))
"""


def test_the_built_package_reads_its_own_data(built, tmp_path):
    result = _python(LOAD, tmp_path, PYTHONPATH=str(built))
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert Path(found["root"]) == built / "mythloop" / "_data"
    assert found["origin"] == "packaged"
    assert found["skills"] >= 80 and found["issues"] == 0 and found["intent"] > 0


def test_the_data_root_override_wins_over_the_packaged_copy(built, repo_root, tmp_path):
    copy = tmp_path / "copy"
    for folder in DATA_FOLDERS:
        shutil.copytree(repo_root / folder, copy / folder)
    (copy / "agents" / "intent.md").write_text("---\nname: intent\n---\nA replaced charter.\n",
                                               encoding="utf-8")
    result = _python(LOAD, tmp_path, PYTHONPATH=str(built), MYTHLOOP_DATA_ROOT=str(copy))
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert (Path(found["root"]), found["origin"]) == (copy.resolve(), "MYTHLOOP_DATA_ROOT")
    assert found["intent"] == len("A replaced charter.")


def test_a_checkout_reads_the_folders_beside_the_package(repo_root, tmp_path):
    result = _python(LOAD, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    found = json.loads(result.stdout)
    assert (Path(found["root"]), found["origin"]) == (repo_root, "source checkout")
    assert Path(found["agents"]) == repo_root / "agents"


def test_a_package_without_its_data_says_what_to_do(built, tmp_path):
    bare = tmp_path / "site"
    shutil.copytree(built / "mythloop", bare / "mythloop",
                    ignore=shutil.ignore_patterns("_data"))
    result = _python("from mythloop.data import data_path; data_path('fixtures')", tmp_path,
                     PYTHONPATH=str(bare))
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "not found under" in last and "MYTHLOOP_DATA_ROOT" in last
