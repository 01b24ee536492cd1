"""Fallback ladder: model-specific failures walk a list of models; the first that answers sticks."""

from __future__ import annotations

import logging

from mythloop.llm.base import DEFAULT_TIMEOUT, Backend, Completion
from mythloop.llm.errors import BackendError, ModelUnavailable, falls_back, first_line
from mythloop.settings import get_settings

__all__ = ["FallbackLadder"]

log = logging.getLogger(__name__)


class FallbackLadder:
    """Wraps a backend; `complete` walks `models` forward on model-specific failures.

    Auth errors propagate at once (a broken login is broken for every model), and so do
    retriable errors (the caller retries the same model). Each switch is recorded in
    `switches` as {"from", "to", "reason"} for the manifest.
    """

    def __init__(self, backend: Backend, models: list[str] | None = None) -> None:
        if models is None:
            models = get_settings().model_fallbacks
        ordered = [m for m in [backend.model, *models] if m]
        self.models = list(dict.fromkeys(ordered))  # unique, order kept
        if not self.models:
            raise ValueError("fallback ladder: no model to try (the backend has none and the list is empty)")
        self.backend = backend
        self.index = 0
        self.switches: list[dict[str, str]] = []

    @property
    def model(self) -> str:
        """The model that answers now (sticky after a switch)."""
        return self.models[self.index]

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def simulated(self) -> bool:
        return self.backend.simulated

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """Answer with the current model, walking forward past models that cannot answer."""
        if model is not None:  # an explicit model bypasses the ladder
            return self.backend.complete(prompt, system=system, model=model, timeout=timeout, key=key)
        failures: list[tuple[str, BackendError]] = []
        for index in range(self.index, len(self.models)):
            candidate = self.models[index]
            try:
                completion = self.backend.complete(
                    prompt, system=system, model=candidate, timeout=timeout, key=key
                )
            except BackendError as exc:
                if not falls_back(exc):
                    raise
                failures.append((candidate, exc))
                log.warning("model %r failed (%s); trying the next model", candidate, first_line(str(exc)))
                continue
            if failures:
                self._record_switch(candidate, failures)
                self.index = index
            completion.attempts = len(failures) + 1
            completion.fallbacks = list(self.switches)
            return completion
        tried = ", ".join(m for m, _ in failures)
        last = failures[-1][1]
        raise ModelUnavailable(
            f"{self.backend.name}: every model failed (tried, in order: {tried}); last error: {first_line(str(last))}"
        ) from last

    def _record_switch(self, to: str, failures: list[tuple[str, BackendError]]) -> None:
        frm, first_exc = failures[0]
        entry = {"from": frm, "to": to, "reason": first_line(str(first_exc))}
        if len(failures) > 1:
            entry["skipped"] = "; ".join(f"{m}: {first_line(str(e), 120)}" for m, e in failures[1:])
        self.switches.append(entry)
        log.warning("switched model %r -> %r for the rest of the run (%s)", frm, to, entry["reason"])
