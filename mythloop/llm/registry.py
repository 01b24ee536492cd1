"""The model backends by name: each backend class registers itself with `@register_backend`.

    @register_backend("gemini")
    class GeminiBackend(CLIBackend): ...

    get_backend("gemini", model="flash")      # the class called "gemini", built with its options
    backend_names()                           # every registered name, in registration order

The modules that define backends are imported on first lookup (so `import mythloop.llm` stays
cheap), and only as far as needed to find the name asked for: first `mythloop.llm`'s own, in the
order of `BACKEND_MODULES`, then those declared in the `mythloop.backends` entry-point group
(ENTRY_POINT_GROUP), where a backend that lives outside `mythloop.llm` is found, the film's
offline stand-in included. An entry point's name is the backend's name and its value the class
(`offline = "package.module:OfflineBackend"`): loading it imports the module, and the class is
registered under that name if its module did not do it already. So `mythloop.llm` names no
package above it, `get_backend("simulated")` loads no entry point, and a third-party package
adds a backend by declaring one in its own metadata:

    [project.entry-points."mythloop.backends"]
    mine = "my_package.backend:MyBackend"

Entry points are read from installed metadata: a checkout must be installed (`pip install -e .`)
for the offline stand-in to be found.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable
from importlib.metadata import EntryPoint, entry_points
from typing import TypeVar

from mythloop.llm.base import Backend

__all__ = ["BACKEND_MODULES", "ENTRY_POINT_GROUP", "register_backend", "get_backend", "backend_names",
           "backend_class"]

BACKEND_MODULES: tuple[str, ...] = (
    "mythloop.llm.cli_backends",     # gemini, claude, codex
    "mythloop.llm.openai_backend",   # openai
    "mythloop.llm.simulated",        # simulated, oracle
    "mythloop.llm.replay",           # replay
)
"""mythloop.llm's modules whose import registers backends, imported lazily in this order."""

ENTRY_POINT_GROUP = "mythloop.backends"
"""The entry-point group naming every other backend (name = backend name, value = its class)."""

B = TypeVar("B", bound=type[Backend])

_BACKENDS: dict[str, type[Backend]] = {}
_loaded: set[str] = set()
_lock = threading.RLock()


def _normal(name: str) -> str:
    return (name or "").strip().lower()


def register_backend(name: str) -> Callable[[B], B]:
    """Class decorator: make the Backend subclass available as `get_backend(name)`.

    The class's `name` attribute (what each Completion reports) is set to `name` when the class
    does not define its own, and must equal it when it does. A second class under a name
    already taken is refused (re-registering the same class, e.g. on a module reload, is not).
    """
    key = _normal(name)
    if not key or key != name:
        raise ValueError(f"backend name {name!r} must be non-empty, lower-case, without spaces")

    def decorate(cls: B) -> B:
        if not (isinstance(cls, type) and issubclass(cls, Backend)):
            raise TypeError(f"@register_backend({name!r}) needs a Backend subclass, not {cls!r}")
        if "name" not in vars(cls):
            cls.name = key
        elif cls.name != key:
            raise ValueError(f"@register_backend({name!r}) on {cls.__qualname__}, whose name is "
                             f"{cls.name!r}: use one name for both")
        old = _BACKENDS.get(key)
        if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
            raise ValueError(f"backend name {key!r} is already taken by "
                             f"{old.__module__}.{old.__qualname__}")
        _BACKENDS[key] = cls
        return cls

    return decorate


def _entry_points() -> list[EntryPoint]:
    """The group's entry points, one per name (the first found on sys.path wins), mythloop's
    own first, then other distributions' in sys.path order."""
    seen: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        seen.setdefault(_normal(ep.name), ep)
    return sorted(seen.values(), key=lambda ep: getattr(ep.dist, "name", None) != "mythloop")


def _load_entry_point(ep: EntryPoint) -> None:
    """Import an entry point's module and register its class under the entry point's name."""
    key = f"{ENTRY_POINT_GROUP}:{ep.name}={ep.value}"
    if key in _loaded:
        return
    with _lock:
        if key in _loaded:
            return
        loaded = ep.load()
        if isinstance(loaded, type):
            register_backend(_normal(ep.name))(loaded)
        elif _normal(ep.name) not in _BACKENDS:
            raise ValueError(f"entry point {ep.name} = {ep.value!r} (group {ENTRY_POINT_GROUP}) "
                             f"names no Backend class")
        _loaded.add(key)


def _load(until: str | None = None) -> None:
    """Import the backend modules in order, then the entry points' (only the one named `until`
    when given), stopping once `until` is registered (None: all)."""
    for module in BACKEND_MODULES:
        if until is not None and until in _BACKENDS:
            return
        if module in _loaded:
            continue
        with _lock:
            if module not in _loaded:
                importlib.import_module(module)
                _loaded.add(module)
    if until is not None and until in _BACKENDS:
        return
    for ep in _entry_points():
        if until is None or _normal(ep.name) == until:
            _load_entry_point(ep)


def backend_class(name: str) -> type[Backend]:
    """The class registered as `name`; ValueError naming every registered backend if none is."""
    key = _normal(name)
    if key:
        _load(until=key)
    cls = _BACKENDS.get(key)
    if cls is None:
        own = [ep for ep in _entry_points() if getattr(ep.dist, "name", None) == "mythloop"]
        hint = "" if own else (
            f" (mythloop's metadata declares no {ENTRY_POINT_GROUP} entry points, so the offline "
            f"stand-in is missing: reinstall mythloop, e.g. `pip install -e .` in a checkout)")
        raise ValueError(f"unknown model backend {name!r}; choose one of: "
                         f"{', '.join(backend_names())}{hint}")
    return cls


def backend_names() -> tuple[str, ...]:
    """Every registered backend name (all backend modules are imported first).

    `mythloop.llm`'s in `BACKEND_MODULES` order, then the entry points' (mythloop's own first),
    then classes registered from elsewhere, each in registration order.
    """
    _load()
    rank = {module: i for i, module in enumerate(BACKEND_MODULES)}
    named = {_normal(ep.name): i for i, ep in enumerate(_entry_points())}

    def order(name: str) -> tuple[int, int]:
        module = _BACKENDS[name].__module__
        if module in rank:
            return (0, rank[module])
        return (1, named[name]) if name in named else (2, 0)

    return tuple(sorted(_BACKENDS, key=order))


def get_backend(name: str, **options) -> Backend:
    """Build the backend called `name` with `options` (e.g. model=, command=, topic=, tiers=)."""
    cls = backend_class(name)
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        raise ValueError(f"backend {name!r}: bad options {sorted(options)} ({exc})") from None
    return cls(**options)
