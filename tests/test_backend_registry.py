"""The backend registry: decorator registration, its errors, the closed vocabularies, no llm -> mythos import,
backends found through the `mythloop.backends` entry-point group (the offline stand-in, a third party's)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import entry_points
from pathlib import Path
from typing import get_args

import pytest

import mythloop.llm as llm
from mythloop.llm import Backend, Completion, backend_names, get_backend, register_backend, registry
from mythloop.vocab import (
    FILM_BACKENDS,
    JUDGES,
    QUALITIES,
    SIMULATED_JUDGES,
    FilmBackend,
    Judge,
    Quality,
)

ROOT = Path(__file__).resolve().parents[1]
BUILT_IN = ("gemini", "claude", "codex", "openai", "simulated", "oracle", "replay", "offline")


class _Echo(Backend):
    """A test backend that answers with its prompt."""

    default_model = "echo-1"

    def __init__(self, model: str | None = None, suffix: str = "") -> None:
        super().__init__(model)
        self.suffix = suffix

    def complete(self, prompt, *, system=None, model=None, timeout=1.0, key=None) -> Completion:
        return Completion(text=prompt + self.suffix, model=self.model, elapsed_s=0.0, raw=prompt,
                          backend=self.name, simulated=True)


@pytest.fixture
def echo_registered():
    register_backend("test-echo")(_Echo)
    try:
        yield _Echo
    finally:
        registry._BACKENDS.pop("test-echo", None)


def test_decorator_registers_a_backend_under_its_name(echo_registered):
    assert _Echo.name == "test-echo"  # the class had no name of its own: it gets the registered one
    backend = get_backend("test-echo", suffix="!")
    assert isinstance(backend, _Echo)
    reply = backend.complete("hello")
    assert (reply.text, reply.backend, reply.model) == ("hello!", "test-echo", "echo-1")
    assert get_backend("  Test-Echo ").suffix == ""  # names are matched trimmed and lower-cased
    names = backend_names()
    assert "test-echo" in names and names[: len(BUILT_IN)] == BUILT_IN  # outside registrations last


def test_registration_refuses_clashes_and_non_backends(echo_registered):
    class Other(_Echo):
        pass

    with pytest.raises(ValueError, match="already taken"):
        register_backend("test-echo")(Other)
    register_backend("test-echo")(_Echo)  # the same class again (a module reload) is accepted

    class Named(_Echo):
        name = "something-else"

    with pytest.raises(ValueError, match="one name for both"):
        register_backend("test-named")(Named)
    with pytest.raises(TypeError, match="Backend subclass"):
        register_backend("test-plain")(object)
    with pytest.raises(ValueError, match="lower-case"):
        register_backend("Bad Name")
    assert "test-named" not in registry._BACKENDS and "test-plain" not in registry._BACKENDS


def test_unknown_name_lists_every_registered_backend(echo_registered):
    with pytest.raises(ValueError) as info:
        get_backend("gpt-nine")
    message = str(info.value)
    assert message.startswith("unknown model backend 'gpt-nine'; choose one of: ")
    listed = message.split("choose one of: ", 1)[1].split(", ")
    assert listed == list(backend_names())
    assert set(BUILT_IN) | {"test-echo"} == set(listed)
    with pytest.raises(ValueError, match="unknown model backend ''"):
        get_backend("")


def test_bad_options_are_a_value_error_naming_the_backend():
    with pytest.raises(ValueError, match=r"backend 'simulated': bad options \['colour'\]"):
        get_backend("simulated", colour="red")
    with pytest.raises(ValueError, match=r"backend 'replay': bad options \[\]"):
        get_backend("replay")  # topic= is required


def test_built_in_backends_and_backend_names():
    assert backend_names() == BUILT_IN
    assert llm.BACKEND_NAMES == BUILT_IN
    for name in BUILT_IN:
        assert registry.backend_class(name).name == name


def test_judges_and_film_backends_are_registered_backends():
    names = set(backend_names())
    assert set(JUDGES) <= names, set(JUDGES) - names
    assert set(FILM_BACKENDS) <= names, set(FILM_BACKENDS) - names
    for judge in JUDGES:  # a judge counts as simulated exactly when its backend labels itself so
        assert registry.backend_class(judge).simulated == (judge in SIMULATED_JUDGES), judge
    assert SIMULATED_JUDGES <= set(JUDGES)


def test_vocabularies_are_defined_once_and_used_by_cli_config_and_forms(tmp_path):
    from mythloop.mythos.plan import request
    from mythloop.mythos.sandbox import render
    from mythloop.sweep import config

    assert JUDGES == get_args(Judge) and FILM_BACKENDS == get_args(FilmBackend)
    assert QUALITIES == get_args(Quality) == ("l", "m", "h", "p", "k")
    assert render.QUALITIES is QUALITIES and request.QUALITIES is QUALITIES
    assert request.FILM_BACKENDS is FILM_BACKENDS and config.JUDGES is JUDGES
    # The UI's run forms come from these JSON schemas: their choice lists are the vocabularies.
    film = request.FilmRequest.model_json_schema()["properties"]
    assert film["quality"]["enum"] == list(QUALITIES)
    assert film["backend"]["enum"] == list(FILM_BACKENDS)
    assert config.SweepConfig.model_json_schema()["properties"]["judge"]["enum"] == list(JUDGES)
    scene = tmp_path / "scene.py"
    scene.write_text("from manim import *\n", encoding="utf-8")
    with pytest.raises(ValueError, match="quality must be one of l, m, h, p, k, not 'x'"):
        render.render_scene(scene, quality="x", out_dir=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_importing_llm_is_cheap_and_never_imports_mythos():
    code = textwrap.dedent("""
        import sys
        import mythloop.llm
        from mythloop.llm import get_backend
        loaded = [m for m in sys.modules if m.startswith(("mythloop.llm.", "mythloop.mythos", "httpx"))]
        assert sorted(loaded) == ["mythloop.llm.base", "mythloop.llm.errors", "mythloop.llm.ladder",
                                  "mythloop.llm.registry"], loaded
        get_backend('simulated')
        assert 'mythloop.mythos' not in sys.modules, sorted(sys.modules)
        get_backend('replay', topic='the heat equation')
        assert 'mythloop.mythos' not in sys.modules
        reply = get_backend('offline').complete('a film about waves', key='intent')
        assert 'mythloop.mythos.standins.offline' in sys.modules
        assert (reply.backend, reply.model, reply.simulated) == ('offline', 'offline-stand-in', False)
        assert '"offline": true' in reply.text
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_no_llm_module_imports_mythos():
    offenders = []
    for path in sorted((ROOT / "mythloop" / "llm").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any(n == "mythloop.mythos" or n.startswith("mythloop.mythos.") for n in names):
                offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def _docstrings(tree: ast.Module) -> set[int]:
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)))]
    return {id(n.body[0].value) for n in nodes
            if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def test_no_llm_module_names_a_mythos_module_either():
    """Not even as a string to import by name (the hidden llm -> mythos circle): a backend
    outside mythloop.llm is found through the entry-point group."""
    offenders = []
    for path in sorted((ROOT / "mythloop" / "llm").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstrings(tree)
        offenders += [f"{path.name}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and isinstance(node.value, str)
                      and id(node) not in docs and "mythloop.mythos" in node.value]
    assert offenders == []


def test_the_project_declares_the_offline_stand_in_in_the_entry_point_group():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    group = declared["project"]["entry-points"][registry.ENTRY_POINT_GROUP]
    assert group == {"offline": "mythloop.mythos.standins.offline:OfflineBackend"}
    installed = {ep.name: ep.value for ep in entry_points(group=registry.ENTRY_POINT_GROUP)}
    assert installed.get("offline") == group["offline"], (
        "the installed metadata lacks the entry point: reinstall (pip install -e .)")
    assert registry.backend_class("offline").__module__ == "mythloop.mythos.standins.offline"


_THIRD_PARTY = '''
from mythloop.llm import Backend, Completion, register_backend


class ThirdPartyEcho(Backend):
    """Declared by class in the entry point: the registry registers it under the entry's name."""

    default_model = "third-1"

    def complete(self, prompt, *, system=None, model=None, timeout=1.0, key=None):
        return Completion(text=prompt[::-1], model=self.model, elapsed_s=0.0, raw=prompt,
                          backend=self.name, simulated=True)


@register_backend("third-self")
class SelfRegistered(ThirdPartyEcho):
    """Declared by module: importing it registers the class itself."""
'''


def _install_fake_distribution(site: Path, entries: dict[str, str]) -> None:
    """A package and its dist-info (METADATA, entry_points.txt), as pip would leave them."""
    (site / "third_party_backend.py").write_text(_THIRD_PARTY, encoding="utf-8")
    info = site / "third_party_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: third-party-backend\n"
                                   "Version: 0.1\n", encoding="utf-8")
    lines = [f"[{registry.ENTRY_POINT_GROUP}]", *(f"{k} = {v}" for k, v in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    _install_fake_distribution(tmp_path, {
        "third-echo": "third_party_backend:ThirdPartyEcho",
        "third-self": "third_party_backend",
        "third-nothing": "json",
    })
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        yield
    finally:
        for name in ("third-echo", "third-self"):
            registry._BACKENDS.pop(name, None)
        registry._loaded.difference_update(
            {k for k in registry._loaded if k.startswith(registry.ENTRY_POINT_GROUP)})
        sys.modules.pop("third_party_backend", None)


def test_a_third_party_backend_is_found_through_the_entry_point_group(third_party):
    assert "third_party_backend" not in sys.modules  # found by its metadata, not imported first
    backend = get_backend("third-echo", model="third-2")
    reply = backend.complete("abc")
    assert (type(backend).__module__, reply.text, reply.backend, reply.model) == (
        "third_party_backend", "cba", "third-echo", "third-2")
    assert get_backend("third-self").complete("xy").backend == "third-self"
    with pytest.raises(ValueError, match="names no Backend class"):
        get_backend("third-nothing")  # a module that registers nothing under that name


def test_entry_point_backends_come_after_the_built_in_ones(tmp_path, monkeypatch):
    _install_fake_distribution(tmp_path, {"third-echo": "third_party_backend:ThirdPartyEcho"})
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        names = backend_names()
        assert names[: len(BUILT_IN)] == BUILT_IN and "third-echo" in names[len(BUILT_IN):]
    finally:
        registry._BACKENDS.pop("third-echo", None)
        registry._loaded.difference_update(
            {k for k in registry._loaded if "third_party_backend" in k})
        sys.modules.pop("third_party_backend", None)
