"""The model backends by name: each backend class registers itself with `@register_backend`.

    @register_backend("gemini")
    class GeminiBackend(CLIBackend): ...

    get_backend("gemini", model="flash")      # the class called "gemini", built with its options
    backend_names()                           # every registered name, in registration order

The modules that define backends are imported on first lookup (so `import mythloop.llm` stays
cheap), in the order of `BACKEND_MODULES`, and only as far as needed to find the name asked for:
`get_backend("simulated")` never imports `mythloop.mythos`. Backends that live outside
`mythloop.llm` (the film's offline stand-ins in `mythloop.mythos.standins.offline`) register themselves
from their own package; `mythloop.llm` names their module here and never imports it directly.
"""

from __future__ import annotations

import importlib
import inspect
import threading
from collections.abc import Callable
from typing import TypeVar

from mythloop.llm.base import Backend

__all__ = ["BACKEND_MODULES", "register_backend", "get_backend", "backend_names", "backend_class"]

BACKEND_MODULES: tuple[str, ...] = (
    "mythloop.llm.cli_backends",     # gemini, claude, codex
    "mythloop.llm.openai_backend",   # openai
    "mythloop.llm.simulated",        # simulated, oracle
    "mythloop.llm.replay",           # replay
    "mythloop.mythos.standins.offline",       # offline (registered from mythos; imported by name only)
)
"""Modules whose import registers backends, imported lazily in this order."""

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


def _load(until: str | None = None) -> None:
    """Import the backend modules in order, stopping once `until` is registered (None: all)."""
    for module in BACKEND_MODULES:
        if until is not None and until in _BACKENDS:
            return
        if module in _loaded:
            continue
        with _lock:
            if module not in _loaded:
                importlib.import_module(module)
                _loaded.add(module)


def backend_class(name: str) -> type[Backend]:
    """The class registered as `name`; ValueError naming every registered backend if none is."""
    key = _normal(name)
    if key:
        _load(until=key)
    cls = _BACKENDS.get(key)
    if cls is None:
        raise ValueError(f"unknown model backend {name!r}; choose one of: {', '.join(backend_names())}")
    return cls


def backend_names() -> tuple[str, ...]:
    """Every registered backend name (all backend modules are imported first).

    In `BACKEND_MODULES` order, then registration order; classes registered from elsewhere last.
    """
    _load()
    rank = {module: i for i, module in enumerate(BACKEND_MODULES)}
    return tuple(sorted(_BACKENDS, key=lambda n: rank.get(_BACKENDS[n].__module__, len(rank))))


def get_backend(name: str, **options) -> Backend:
    """Build the backend called `name` with `options` (e.g. model=, command=, topic=, tiers=)."""
    cls = backend_class(name)
    try:
        inspect.signature(cls).bind(**options)
    except TypeError as exc:
        raise ValueError(f"backend {name!r}: bad options {sorted(options)} ({exc})") from None
    return cls(**options)
