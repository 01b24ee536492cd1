"""What the render sandbox needs on the machine, and how a missing part is told (fast)."""

from __future__ import annotations

import os

import pytest

from mythloop.mythos.sandbox import render
from mythloop_app.commands import doctor


def test_doctor_names_the_fix_when_bubblewrap_is_missing(monkeypatch):
    monkeypatch.setattr(render, "_BWRAP_BIN", None)
    render._namespaces_work.cache_clear()
    try:
        check = doctor._render_sandbox()
    finally:
        render._namespaces_work.cache_clear()
    assert not check.ok and check.required
    assert "bubblewrap" in check.detail and "apt-get install" in check.fix
    assert "bubblewrap" in check.fix


@pytest.mark.skipif(os.geteuid() != 0, reason="as root a render needs bubblewrap")
def test_a_render_as_root_without_bubblewrap_is_missing_tool(monkeypatch, tmp_path):
    monkeypatch.setattr(render, "_BWRAP_BIN", None)
    scene = tmp_path / "tiny.py"
    scene.write_text("from manim import *\n\nclass T(Scene):\n    def construct(self):\n"
                     "        self.add(Square())\n")
    result = render.render_scene(scene, out_dir=tmp_path / "out")
    assert result.kind == "missing_tool" and "apt-get install bubblewrap" in result.message


def test_the_view_binds_no_caller_path(monkeypatch, tmp_path):
    """The allowlist comes from the interpreter, never from sys.path or the cwd."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    args = render.sandbox_view(render.sys.executable, [(str(tmp_path / "stage"), "/x")])
    binds = [args[i + 1] for i, a in enumerate(args) if a in ("--ro-bind", "--bind")]
    assert str(tmp_path) not in binds and str(tmp_path / "stage") in binds
    repo = str(render._HERE.parents[2])
    assert repo not in binds  # the checkout (an editable install's sys.path entry)
    assert not any(b in ("/", "/root", "/home", "/work", "/etc", "/var") for b in binds)
