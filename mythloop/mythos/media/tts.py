"""Text-to-speech for a film's voice-over, behind one small interface.

An engine turns one narration line into a WAV clip and says how long it is. The only
engine today is espeak-ng (offline, a Debian package that `make setup` installs); another
engine registers itself with `@register_engine` and is then usable as `--voice NAME` and
reported by `mythloop doctor`.
"""

from __future__ import annotations

import os
import shutil
import wave
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from mythloop import procs
from mythloop.fileio import replacing

__all__ = ["TTSEngine", "TTSError", "EspeakEngine", "register_engine", "get_engine",
           "engine_names", "engine_status", "wav_duration"]


class TTSError(RuntimeError):
    """Speech could not be made; the message says what to install or fix."""


class TTSEngine(ABC):
    """One way to speak text into a WAV file."""

    name: ClassVar[str] = ""
    install_hint: ClassVar[str] = ""

    @abstractmethod
    def available(self) -> bool:
        """Whether the engine can run on this machine."""

    def version(self) -> str:
        return ""

    @abstractmethod
    def synthesize(self, text: str, out: Path, *, timeout: float = 120.0) -> float:
        """Speak `text` into the WAV file `out`; returns its duration in seconds."""


_ENGINES: dict[str, Callable[[], TTSEngine]] = {}


def register_engine(cls: type[TTSEngine]) -> type[TTSEngine]:
    """Class decorator: make an engine known by its `name`."""
    _ENGINES[cls.name] = cls
    return cls


def engine_names() -> list[str]:
    return list(_ENGINES)


def get_engine(name: str) -> TTSEngine:
    """The engine called `name`, checked to be usable here; TTSError names the fix."""
    if name not in _ENGINES:
        raise TTSError(f"unknown voice engine {name!r}; choose one of {', '.join(_ENGINES)}")
    engine = _ENGINES[name]()
    if not engine.available():
        raise TTSError(f"voice engine {name} is not installed; fix: {engine.install_hint}")
    return engine


def engine_status() -> list[tuple[str, bool, str]]:
    """(name, present, version or install hint) for every registered engine (for doctor)."""
    rows = []
    for name, factory in _ENGINES.items():
        engine = factory()
        present = engine.available()
        rows.append((name, present, engine.version() if present else engine.install_hint))
    return rows


def wav_duration(path: Path) -> float:
    with wave.open(str(path), "rb") as clip:
        return clip.getnframes() / float(clip.getframerate())


@register_engine
class EspeakEngine(TTSEngine):
    """espeak-ng: robotic but offline, fast and free of model weights."""

    name = "espeak"
    install_hint = "apt-get install espeak-ng (make setup installs it)"

    def __init__(self, voice: str = "en-us", words_per_minute: int = 150) -> None:
        self.voice = voice
        self.words_per_minute = words_per_minute

    def _exe(self) -> str | None:
        return shutil.which("espeak-ng")

    def available(self) -> bool:
        return self._exe() is not None

    def version(self) -> str:
        exe = self._exe()
        if not exe:
            return ""
        out = procs.run([exe, "--version"], timeout=10)
        return " ".join(out.stdout.split()[:4])

    def synthesize(self, text: str, out: Path, *, timeout: float = 120.0) -> float:
        exe = self._exe()
        if not exe:
            raise TTSError(f"espeak-ng not found; fix: {self.install_hint}")
        with replacing(out) as tmp:
            # Text on stdin: a narration line starting with '-' is never read as an option.
            proc = procs.run(
                [exe, "-v", self.voice, "-s", str(self.words_per_minute), "-w", str(tmp),
                 "--stdin"],
                input=" ".join(text.split()), timeout=timeout,
                env={**os.environ, "LC_ALL": "C.UTF-8"})
            if proc.returncode != 0 or not tmp.exists():
                detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                raise TTSError(f"espeak-ng exited with code {proc.returncode}: {detail[0]}")
        return wav_duration(out)
