"""TeX inside the render sandbox reads and writes only the render dir.

A scene builds `\\input{/etc/...}`, `\\openin` and `../` paths at run time (verify cannot see
a string made from character codes), and even unpins TeX's settings through os.environ; the
sandboxed render must refuse each, and no byte of the target file may reach the render's
files (log, TeX sources, dvi, svg, frames' video). A plain latex run outside the sandbox shows
the same check would catch a read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from mythloop.mythos.sandbox.render import render_scene
from mythloop.mythos.sandbox.tex_policy import TEX_FILE_ACCESS, tex_env

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("latex"), reason="latex not installed")]

TARGET = Path("/etc/machine-id")  # world-readable, in /etc (mounted in the sandbox), 32 hex


def _codes(text: str) -> str:
    return repr([ord(c) for c in text])


def _scene() -> str:
    absolute = "\\input{/etc/hostname}\\input{" + str(TARGET) + "}"
    parent = "\\input{" + "../" * 12 + str(TARGET).lstrip("/") + "}"
    openin = ("\\newread\\r\\openin\\r=" + str(TARGET) + " \\read\\r to\\x \\closein\\r "
              "\\texttt{\\x}")
    unpin = "openin_any_latex"
    return f'''from manim import *


def built(codes):
    return "".join(chr(c) for c in codes)


class TexReadStory(Scene):
    def construct(self):
        attempts = [("absolute", built({_codes(absolute)})),
                    ("parent", built({_codes(parent)})),
                    ("openin", built({_codes(openin)}))]
        for name, source in attempts:
            self.attempt(name, source)
        environ = getattr(__import__(built({_codes("os")})), built({_codes("environ")}))
        environ[built({_codes(unpin)})] = "a"  # kpathsea prefers VAR_progname to VAR
        self.attempt("unpinned", attempts[0][1])
        self.add(Text("done"))
        self.wait(0.2)

    def attempt(self, name, source):
        try:
            shown = Tex(source)
        except Exception as exc:
            print("TEXREAD-REFUSED", name, type(exc).__name__, str(exc)[:200], flush=True)
            return
        self.add(shown)
        print("TEXREAD-OK", name, flush=True)
'''


def _all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.skipif(not TARGET.is_file(), reason="no /etc/machine-id here")
def test_plain_latex_reads_the_file_and_the_pinned_env_refuses(tmp_path):
    """The control: without the pinned settings latex reads the file into its dvi."""
    content = TARGET.read_text().strip().encode()
    (tmp_path / "t.tex").write_text("\\documentclass{article}\\begin{document}"
                                    f"\\input{{{TARGET}}}\\end{{document}}\n")
    base = {k: v for k, v in os.environ.items() if k.split("_")[0] not in ("openin", "openout")}
    for env, read in ((base, True), ({**base, **tex_env(str(tmp_path))}, False)):
        for old in tmp_path.glob("t.*"):
            if old.suffix != ".tex":
                old.unlink()
        proc = subprocess.run(["latex", "-interaction=batchmode", "-halt-on-error", "t.tex"],
                              cwd=tmp_path, env=env, capture_output=True, timeout=120)
        assert (content in _all_bytes(tmp_path)) is read, proc.stderr
        if not read:
            assert b"openin_any = p" in proc.stderr


@pytest.mark.skipif(not TARGET.is_file(), reason="no /etc/machine-id here")
@pytest.mark.parametrize("formula_cache", ["on", "off"])
def test_a_scene_cannot_make_tex_read_outside_the_render_dir(tmp_path, monkeypatch,
                                                             formula_cache):
    """With the formula cache, the parent compiles each formula in a sandbox of its own under
    the pinned settings (the scene's os.environ never reaches that latex); without it, the
    scene's own latex runs under them and the audit hook guards the environment."""
    monkeypatch.setenv("MYTHLOOP_FORMULA_CACHE", "1" if formula_cache == "on" else "0")
    scene = tmp_path / "tex_read_story.py"
    scene.write_text(_scene(), encoding="utf-8")
    out = tmp_path / "out"
    result = render_scene(scene, out_dir=out, timeout=300)
    log = Path(result.log_path).read_text(encoding="utf-8", errors="replace")
    assert result.ok, result.message + log[-2000:]  # the scene went on after each refusal
    for name in ("absolute", "parent", "openin", "unpinned"):
        assert f"TEXREAD-REFUSED {name}" in log, log[-3000:]
    assert "TEXREAD-OK" not in log
    served = any("formula cache" in line for line in result.isolation)
    assert served is (formula_cache == "on"), result.isolation
    if served:  # refused by the parent before any latex ran, handed back to the scene
        assert "LaTeX compilation error: refused" in log, log[-3000:]
    else:
        assert "Not reading from /etc/hostname (openin_any = p)" in log
        assert "TeX's file access changed (openin_any_latex)" in log
    content = TARGET.read_text().strip().encode()
    assert content not in _all_bytes(out)  # log, tex, dvi, svg, the video


def test_the_pinned_settings_are_paranoid():
    assert TEX_FILE_ACCESS == {"openin_any": "p", "openout_any": "p", "shell_escape": "f"}
    assert tex_env("/tmp/mythloop-render")["TEXMFOUTPUT"] == "/tmp/mythloop-render"


@pytest.mark.skipif(not TARGET.is_file(), reason="no /etc/machine-id here")
def test_the_formula_compile_sandbox_refuses_file_reads_on_its_own(tmp_path):
    """Under the parent's screen (above): the compile itself, handed a formula that reads a
    file, runs latex with TeX's paranoid file access and reads nothing."""
    from mythloop.mythos.sandbox import formula_cache as fc

    service = fc.FormulaService(tmp_path, {"PATH": os.environ.get("PATH", "")},
                                cache=tmp_path / "cache")
    try:
        tex = ("\\documentclass[preview]{standalone}\n\\begin{document}\n"
               f"\\input{{{TARGET}}}\n\\end{{document}}\n")
        assert "refused" in service.answer({"tex": tex, "compiler": "latex",
                                            "format": ".dvi"})["log"]
        svg, log = service._compile(tex)
    finally:
        service.close()
    assert svg is None
    assert "openin_any = p" in log or "not reading" in log.lower() or "!" in log, log
    assert TARGET.read_text().strip() not in log
