"""The installed wheel works on its own (`make wheel-check` runs just this module).

Built with `python -m build` (an sdist, then the wheel from it), checked with `twine check`,
installed into a fresh venv outside the checkout the way `make setup` installs (torch==2.13.0
first, then the project; pip's cache makes this a few minutes), and run from an empty folder
with no PYTHONPATH and no MYTHLOOP_DATA_ROOT: `mythloop sweep`, `mythloop film` (stages
only), `mythloop doctor`. Marked `wheel`: `pytest -m "not wheel"` leaves it out.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel

TORCH = "torch==2.13.0"  # as the Makefile's setup installs it: the CPU build, first


def _run(args: list[str], *, cwd: Path, env: dict | None = None,
         timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, (f"{result.args}\n" + result.stdout[-4000:]
                                    + result.stderr[-4000:])
    return result.stdout


@pytest.fixture(scope="module")
def dist(repo_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _ok(_run([sys.executable, "-m", "build", "--outdir", out, repo_root], cwd=out,
             timeout=900))
    return out


@pytest.fixture(scope="module")
def wheel(dist) -> Path:
    (found,) = dist.glob("mythloop-*.whl")
    return found


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv holding only the wheel and its dependencies; removed afterwards."""
    root = tmp_path_factory.mktemp("wheel-venv") / "venv"
    _ok(_run([sys.executable, "-m", "venv", root], cwd=root.parent))
    python = root / "bin" / "python"
    for spec in (TORCH, wheel):  # --no-compile: modules compile on first import (CI time)
        _ok(_run([python, "-m", "pip", "install", "-q", "--no-compile", spec], cwd=root.parent,
                 timeout=1800))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def empty(venv, tmp_path):
    """An empty working folder and the environment of a user with only the wheel."""
    folder = tmp_path / "empty"
    folder.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MYTHLOOP_", "PREFECT_", "PYTHON", "VIRTUAL_ENV"))}
    env.update(PATH=os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return folder, env


def test_sdist_and_wheel_pass_twine_check_with_licence_readme_and_command(dist, wheel):
    _ok(_run([sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir())],
             cwd=dist))
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA")).rsplit("/", 1)[0]
        metadata = zf.read(f"{info}/METADATA").decode()
        entry_points = zf.read(f"{info}/entry_points.txt").decode()
    assert f"{info}/licenses/LICENSE" in names
    assert "License-Expression: MIT" in metadata
    assert "Description-Content-Type: text/markdown" in metadata and "## Two commands" in metadata
    assert "mythloop = mythloop_app.cli:main" in entry_points


def test_the_wheel_installs_no_name_outside_mythloop(wheel, venv, tmp_path):
    with zipfile.ZipFile(wheel) as zf:
        tops = {n.split("/", 1)[0] for n in zf.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {
        "mythloop", "mythloop_app", "mythloop_flows", "mythloop_tasks"}
    code = ("import json, importlib.metadata as md, importlib.util as u; "
            "d = md.distribution('mythloop'); "
            "print(json.dumps({'record': sorted({f.parts[0] for f in d.files}), "
            "'top_level': d.read_text('top_level.txt').split(), "
            "'generic': [n for n in ('flows', 'tasks') if u.find_spec(n)]}))")
    found = json.loads(_ok(_run([venv / "bin" / "python", "-c", code], cwd=tmp_path,
                                env={"PATH": "/usr/bin:/bin"})))
    installed = [p for p in found["record"] if not p.endswith(".dist-info") and p != ".."]
    assert installed and all(p.startswith("mythloop") for p in installed), found["record"]
    assert all(name.startswith("mythloop") for name in found["top_level"]), found["top_level"]
    assert found["generic"] == []


def test_sweep_runs_from_an_empty_folder(empty, venv):
    folder, env = empty
    out = _ok(_run(["mythloop", "sweep", "--judge", "simulated", "--rounds", "1",
                    "--replicates", "1"], cwd=folder, env=env))
    report = Path(next(line.split(":", 1)[1].strip() for line in out.splitlines()
                       if line.startswith("report:")))
    assert report.is_file() and folder / ".mythloop" in report.parents
    sweep = json.loads((report.parent / "sweep.json").read_text(encoding="utf-8"))
    assert sweep["conditions"] == ["c0", "c3"] and sweep["catalog_issues"] == []
    for key in ("pool", "prompts_file"):  # the packaged copy, inside the venv
        assert Path(sweep[key]).is_relative_to(venv), sweep[key]
        assert "/mythloop/_data/fixtures/" in sweep[key]


def test_film_stages_run_from_an_empty_folder(empty):
    folder, env = empty
    out = _ok(_run(["mythloop", "film", "the heat equation", "--backend", "replay"],
                   cwd=folder, env=env))
    run_dir = Path(next(line.split(":", 1)[1].strip() for line in out.splitlines()
                        if line.startswith("run dir:")))
    assert folder / ".mythloop" in run_dir.parents
    assert (run_dir / "06_scene_spec.json").is_file() and (run_dir / "mythos_scene.py").is_file()
    assert "not rendered" in out
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["replay"] and manifest["static_check"]["passed"]
    assert [s["stage"] for s in manifest["stages"]][-1] == "codegen"  # charters + cassettes read


def test_doctor_passes_on_the_packaged_data(empty, venv):
    folder, env = empty
    out = _ok(_run(["mythloop", "doctor"], cwd=folder, env=env))
    data_line = next(line for line in out.splitlines() if " data folders " in line)
    assert data_line.startswith("ok") and "(packaged)" in data_line
    assert str(venv) in data_line  # inside the venv's site-packages, not the checkout
