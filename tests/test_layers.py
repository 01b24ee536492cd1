"""The layer boundary: the import contracts in pyproject.toml hold, and they catch a breach.

`lint-imports` (import-linter, also run by `make lint`) checks:
mythloop_app > mythloop_flows > mythloop_tasks > mythloop, the library free of Prefect and typer,
no import cycles between the library's packages, mythos's parts, the flows, the tasks or the
app's modules, the layers inside mythloop.mythos, and that the files run inside the render
sandbox import only the standard library (+ manim, numpy; a contract type of our own in
tools/import_contracts.py). The breach tests copy the source packages to a temporary folder
under their installed names (flows/ as mythloop_flows, tasks/ as mythloop_tasks), add one bad
import and expect the check to fail naming it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# folder in the checkout -> the package it installs as (setup.py)
PACKAGES = {"mythloop": "mythloop", "mythloop_app": "mythloop_app", "flows": "mythloop_flows",
            "tasks": "mythloop_tasks"}


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run([str(lint), "--config", str(root / "pyproject.toml"), "--no-cache"],
                          cwd=root, env=env, capture_output=True, text=True, timeout=300)


def _copy_sources(repo_root: Path, dest: Path) -> Path:
    for folder, package in PACKAGES.items():
        shutil.copytree(repo_root / folder, dest / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(repo_root / "tools", dest / "tools",  # the contract types of our own
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(repo_root / "pyproject.toml", dest / "pyproject.toml")
    return dest


def test_the_import_contracts_hold(repo_root):
    result = _lint_imports(repo_root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line", "broken"), [
    ("mythloop/router/ranker.py", "import prefect  # breach", "imports neither Prefect"),
    ("mythloop/sweep/condition.py", "import typer  # breach", "imports neither Prefect"),
    ("mythloop/mythos/code/scenes.py", "import mythloop_tasks.film  # breach", "Layers"),
    ("mythloop_tasks/sweep.py", "import mythloop_flows.feedback_loop  # breach", "Layers"),
    ("mythloop_flows/film.py", "import mythloop_app.cli  # breach", "Layers"),
    ("mythloop/skills/catalog.py", "import mythloop.sweep  # breach", "No import cycles"),
    ("mythloop/mythos/media/avmux.py", "import mythloop.mythos.sandbox.render  # breach",
     "never import the sandbox"),
    ("mythloop/mythos/sandbox/verify.py", "import mythloop.mythos.plan.stages  # breach",
     "mythos layers"),
    ("mythloop/mythos/code/extract.py", "import mythloop.mythos.plan.stages  # breach",
     "mythos layers"),
    ("mythloop/mythos/sandbox/sandbox_init.py", "import mythloop.procs  # breach",
     "only the standard library"),
    ("mythloop/mythos/sandbox/layout_probe.py", "import pydantic  # breach",
     "only the standard library"),
])
def test_a_breach_breaks_a_contract(repo_root, tmp_path, module, line, broken):
    root = _copy_sources(repo_root, tmp_path)
    target = root / module
    text = target.read_text(encoding="utf-8")
    head, sep, rest = text.partition("from __future__ import annotations\n")
    target.write_text(head + sep + line + "\n" + rest if sep else line + "\n" + text,
                      encoding="utf-8")
    result = _lint_imports(root)
    assert result.returncode != 0, result.stdout[-3000:]
    broken_part = result.stdout.split("Broken contracts", 1)[-1]
    assert broken in broken_part, result.stdout[-3000:]
    dotted = module.removesuffix(".py").replace("/", ".")
    top = dotted.split(".")[1] if dotted.startswith("mythloop.") else dotted
    assert top in broken_part, result.stdout[-3000:]
