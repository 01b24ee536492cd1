"""The one interface every backend implements, and the answer it returns."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["Completion", "Backend", "DEFAULT_TIMEOUT"]

DEFAULT_TIMEOUT = 300.0


@dataclass
class Completion:
    """One model answer: the text, who produced it, how long it took, and the raw output."""

    text: str
    model: str
    elapsed_s: float
    raw: str
    backend: str
    simulated: bool = False
    stderr: str = ""
    attempts: int = 1
    fallbacks: list[dict[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict (for manifests and turn rows)."""
        return asdict(self)


class Backend(ABC):
    """A way to reach a model: `complete(prompt, ...) -> Completion`."""

    name: str = "backend"
    simulated: bool = False
    default_model: str = ""

    def __init__(self, model: str | None = None) -> None:
        self.model = model or self.default_model

    @abstractmethod
    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """Answer `prompt` (with optional `system` text) using `model` or the backend's default."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r})"
