"""The seed's deterministic stand-ins (`mythloop.mythos.offline`) behind the backend interface."""

from __future__ import annotations

import time

from mythloop.llm.base import DEFAULT_TIMEOUT, Backend, Completion
from mythloop.llm.errors import BackendError, EmptyOutput

__all__ = ["OfflineBackend"]


class OfflineBackend(Backend):
    """Answers each film step with fixed text; needs no login, no network."""

    name = "offline"
    default_model = "offline-stand-in"

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """The stand-in for step `key` ('intent', ..., 'codegen', 'repair-scene-NN-K')."""
        if not key:
            raise BackendError("offline: complete() needs key= (the step name, e.g. 'intent')")
        # Imported here: the mythos package is built separately and is not needed otherwise.
        from mythloop.mythos.offline import offline_response

        started = time.monotonic()
        text = offline_response(key, prompt)
        if not text or not text.strip():
            raise EmptyOutput(f"offline: no stand-in text for key {key!r}")
        return Completion(
            text=text,
            model=self.default_model,
            elapsed_s=time.monotonic() - started,
            raw=text,
            backend=self.name,
            simulated=False,
        )
