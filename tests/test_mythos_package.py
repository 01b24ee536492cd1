"""mythloop.mythos's public names: each loads from its subpackage on first use, and importing
mythloop.mythos (or using all of them) never pulls in Prefect, Manim, torch or typer."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import mythloop.mythos as mythos

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_resolves_to_its_module():
    assert sorted(mythos.__all__) == sorted(mythos._EXPORTS)
    for name, module in mythos._EXPORTS.items():
        value = getattr(mythos, name)
        home = sys.modules[f"mythloop.mythos.{module}"]
        assert getattr(home, name) is value, name
    assert set(mythos.__all__) <= set(dir(mythos))


def test_an_unknown_name_is_an_attribute_error():
    try:
        mythos.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("no AttributeError")


def test_importing_mythos_is_light():
    code = textwrap.dedent("""
        import sys
        import mythloop.mythos as mythos
        heavy = ("manim", "torch", "prefect", "typer", "sentence_transformers")
        loaded = sorted(m for m in sys.modules if m.startswith("mythloop.mythos."))
        assert loaded == [], loaded
        for name in mythos.__all__:
            getattr(mythos, name)
        used = sorted(m for m in sys.modules if m.split(".")[0] in heavy)
        assert used == [], used
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_each_subpackage_says_what_it_holds():
    for sub in ("plan", "code", "sandbox", "media", "standins"):
        init = ROOT / "mythloop" / "mythos" / sub / "__init__.py"
        doc = init.read_text(encoding="utf-8")
        modules = sorted(p.name for p in init.parent.glob("*.py") if p.name != "__init__.py")
        missing = [m for m in modules if m not in doc]
        assert missing == [], f"{sub}/__init__.py does not name {missing}"
