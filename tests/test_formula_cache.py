"""The shared formula cache (mythloop/mythos/sandbox/formula_cache.py): a formula is compiled once and
reused by later renders; a scene cannot plant what another scene reads; TeX errors and a
missing LaTeX still reach the render's log and kind.

Real sandboxed manim renders and real latex/dvisvgm (slow).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mythloop.mythos.sandbox import formula_cache
from mythloop.mythos.sandbox.render import render_scene

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not shutil.which("latex") or not shutil.which("dvisvgm"),
                                 reason="LaTeX/dvisvgm not installed")]

FORMULA = r"e^{i\pi} + 1 = 0 \quad (\mathrm{cache\ test\ %s})"
PLAIN = ("from manim import *\n\nclass Plain(Scene):\n    def construct(self):\n"
         "        self.add(MathTex(r'%s'))\n")
# verify would refuse the import; rendered directly, the scene forges the SVG of a formula
# in its own media/Tex and also asks the cache for it over the socket with altered text
PLANT = ("from manim import *\nfrom manim.utils.tex_file_writing import generate_tex_file\n\n"
         "class Plant(Scene):\n    def construct(self):\n"
         "        tex = generate_tex_file(r'%s', 'align*', config['tex_template'])\n"
         "        tex.with_suffix('.svg').write_text('<svg xmlns=\"http://www.w3.org/2000/svg\">"
         "<!-- FORGED --><rect width=\"1\" height=\"1\"/></svg>')\n"
         "        self.add(MathTex(r'%s'))\n")


def _tag(path: Path, extra: str = "") -> str:
    """Letters and digits only (a TeX-safe tag that makes each test's formula new)."""
    return "".join(c for c in path.name + extra if c.isalnum())


def _svgs(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.svg") if p.is_file()]


def test_a_formula_is_compiled_once_and_reused(tmp_path):
    scene = tmp_path / "plain.py"
    scene.write_text(PLAIN % (FORMULA % _tag(tmp_path)))
    before = formula_cache.stats()
    first = render_scene(scene, out_dir=tmp_path / "a", timeout=300)
    assert first.ok, first.message + first.log_tail[-1500:]
    assert any("formula cache" in note for note in first.isolation)
    middle = formula_cache.stats()
    assert middle["compiles"] == before["compiles"] + 1
    again = render_scene(scene, out_dir=tmp_path / "b", timeout=300)
    assert again.ok, again.message
    after = formula_cache.stats()
    assert after["compiles"] == middle["compiles"] and after["hits"] == middle["hits"] + 1
    (svg_a,), (svg_b,) = _svgs(tmp_path / "a"), _svgs(tmp_path / "b")
    assert svg_a.read_text() == svg_b.read_text()
    assert svg_a.read_text() in [p.read_text() for p in _svgs(formula_cache.cache_dir())]


def test_a_scene_cannot_plant_a_formula_for_another(tmp_path):
    formula = FORMULA % _tag(tmp_path, "planted")
    planter = tmp_path / "plant.py"
    planter.write_text(PLANT % (formula, formula))
    render_scene(planter, out_dir=tmp_path / "plant", timeout=300)  # may fail: forged glyphs
    victim = tmp_path / "victim.py"
    victim.write_text(PLAIN % formula)
    result = render_scene(victim, out_dir=tmp_path / "victim", timeout=300)
    assert result.ok, result.message + result.log_tail[-1500:]
    (svg,) = _svgs(tmp_path / "victim")
    assert "FORGED" not in svg.read_text() and "<path" in svg.read_text()
    assert not any("FORGED" in p.read_text() for p in _svgs(formula_cache.cache_dir()))


def test_a_tex_error_reaches_the_log_and_is_not_cached(tmp_path):
    scene = tmp_path / "broken_tex.py"
    scene.write_text(PLAIN % (r"\frac{1}{ \undefinedmacro" + _tag(tmp_path)))
    entries = len(_svgs(formula_cache.cache_dir()))
    result = render_scene(scene, out_dir=tmp_path / "o", timeout=300)
    assert result.kind == "scene_error", result.message
    assert "latex error" in result.message.lower(), result.message
    assert "LaTeX compilation error: Undefined control" in Path(result.log_path).read_text()
    assert len(_svgs(formula_cache.cache_dir())) == entries
