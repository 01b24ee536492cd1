"""Backends that drive a model through its vendor CLI: gemini, claude, codex."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

from mythloop.fileio import write_json_atomic
from mythloop.llm.base import DEFAULT_TIMEOUT, Backend, Completion
from mythloop.llm.errors import (
    BackendError,
    BackendTimeout,
    EmptyOutput,
    ToolMissing,
    classify_failure,
)
from mythloop.llm.registry import register_backend
from mythloop.llm.runner import CLIResult, resolve_executable, run_cli
from mythloop.settings import get_settings

__all__ = [
    "CLIBackend",
    "GeminiBackend",
    "ClaudeBackend",
    "CodexBackend",
    "parse_stream_json",
    "prepare_workspace",
    "make_sandbox_home",
]

# Linux caps one argv string at 128 KiB (MAX_ARG_STRLEN); gemini takes the prompt on argv.
_MAX_ARGV_PROMPT = 120_000


class CLIBackend(Backend):
    """Shared plumbing: executable lookup, per-call env/cwd, timeout and failure classification."""

    binary = ""

    def __init__(
        self,
        model: str | None = None,
        *,
        command: str | None = None,
        cwd: str | Path | None = None,
        home: str | Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        settings = get_settings()
        super().__init__(model or settings.model)
        self.command = command or settings.command or self.binary
        self.cwd = Path(cwd) if cwd is not None else None
        self.home = Path(home) if home is not None else None
        self.env = dict(env or {})

    def _env(self) -> dict[str, str]:
        env = dict(self.env)
        if self.home is not None:
            env["HOME"] = str(self.home)
        return env

    def _run(self, argv: list[str], *, input_text: str | None, timeout: float, model: str) -> CLIResult:
        exe = resolve_executable(self.command, self.name)
        try:
            res = run_cli([exe, *argv], input_text=input_text, env=self._env(), cwd=self.cwd, timeout=timeout)
        except OSError as exc:  # not executable, bad interpreter line, cwd missing
            raise ToolMissing(f"{self.name}: cannot start {exe!r} ({exc.strerror or exc})") from exc
        if res.timed_out:
            raise BackendTimeout(
                f"{self.name} (model {model}): no answer within {timeout:g}s; "
                "the process group was killed"
            )
        return res

    def _done(self, text: str, res: CLIResult, model: str) -> Completion:
        if not text.strip():
            raise EmptyOutput(f"{self.name} (model {model}): exit 0 but the reply was empty")
        return Completion(
            text=text,
            model=model,
            elapsed_s=res.elapsed_s,
            raw=res.stdout,
            backend=self.name,
            simulated=False,
            stderr=res.stderr,
        )


# --------------------------------------------------------------------------- gemini


def parse_stream_json(stdout: str) -> tuple[str, list[dict]]:
    """Reply text (the assistant `delta` chunks, in order) and the parsed events of a stream-json stdout.

    The final non-delta assistant message repeats the deltas, so it is skipped;
    malformed lines are ignored.
    """
    chunks: list[str] = []
    events: list[dict] = []
    for line in (stdout or "").splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        events.append(obj)
        if obj.get("type") == "message" and obj.get("role") == "assistant" and obj.get("delta"):
            content = obj.get("content")
            if isinstance(content, str):
                chunks.append(content)
    return "".join(chunks), events


def _stream_errors(events: Iterable[dict]) -> str:
    """The error texts a stream carries (`error` events, `result` with status error)."""
    out = []
    for ev in events:
        if ev.get("type") == "error":
            out.append(str(ev.get("message", "")))
        elif ev.get("type") == "result" and ev.get("status") == "error":
            err = ev.get("error") or {}
            out.append(f"{err.get('type', '')}: {err.get('message', '')}" if isinstance(err, dict) else str(err))
    return "\n".join(o for o in out if o.strip())


def _copy_tree_atomic(src: Path, dst: Path) -> None:
    """Replace `dst` with a real copy of `src` (no symlinks: gemini rejects links leaving the workspace)."""
    tmp = dst.with_name(f".{dst.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(src, tmp, symlinks=False)
    if dst.is_symlink() or dst.is_file():
        dst.unlink()
    elif dst.exists():
        shutil.rmtree(dst)
    os.replace(tmp, dst)


def make_sandbox_home(home: Path) -> Path:
    """An empty HOME whose skill folders exist but hold nothing (blocks home-level skill discovery)."""
    for sub in (".gemini/skills", ".agents/skills"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    return home


def prepare_workspace(workspace: Path, skills: Iterable[str | Path] = ()) -> Path:
    """Materialise `skills` (skill folders) as copies under `<workspace>/.gemini/skills/`; trust the folder."""
    skills_dir = workspace / ".gemini" / "skills"
    skills_dir.mkdir(parents=True, exist_ok=True)
    for src in map(Path, skills):
        if not (src / "SKILL.md").is_file():
            raise BackendError(f"gemini: skill folder {src} has no SKILL.md; pass skill directories")
        _copy_tree_atomic(src.resolve(), skills_dir / src.name)
    gem = workspace / ".gemini"
    write_json_atomic(gem / "settings.json", {"hooks": {"BeforeAgent": [], "AfterAgent": []}})
    write_json_atomic(gem / "trustedFolders.json", {"trusted": True})
    return skills_dir


@register_backend("gemini")
class GeminiBackend(CLIBackend):
    """`gemini --prompt P --model M --approval-mode plan --output-format stream-json`."""

    name = "gemini"
    binary = "gemini"
    default_model = "gemini-3-flash-preview"

    def __init__(
        self,
        model: str | None = None,
        *,
        workspace: str | Path | None = None,
        skills: Iterable[str | Path] = (),
        home: str | Path | None = None,
        **kwargs,
    ) -> None:
        self.workspace = Path(workspace).resolve() if workspace is not None else None
        skills = list(skills)
        if skills and self.workspace is None:
            raise ValueError("gemini: `skills` needs a `workspace` to copy them into")
        if self.workspace is not None:
            self.workspace.mkdir(parents=True, exist_ok=True)
            prepare_workspace(self.workspace, skills)
            # A sandboxed workspace gets a sandboxed, empty HOME beside it, as in the seed.
            if home is None:
                home = self.workspace.parent / "fake_home"
        if home is not None:
            make_sandbox_home(Path(home))
        super().__init__(model, cwd=kwargs.pop("cwd", self.workspace), home=home, **kwargs)
        self.env.setdefault("GEMINI_CLI_TRUST_WORKSPACE", "true")

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """One gemini call; the reply is the concatenated assistant delta chunks."""
        model = model or self.model
        # gemini has no system-prompt flag: the system text leads the prompt.
        full = f"{system}\n\n---\n\n{prompt}" if system else prompt
        if len(full.encode("utf-8")) > _MAX_ARGV_PROMPT:
            raise BackendError(
                f"gemini: prompt is {len(full.encode())} bytes, over the {_MAX_ARGV_PROMPT}-byte "
                "argv limit; shorten it or use another backend"
            )
        argv = ["--prompt", full, "--model", model, "--approval-mode", "plan", "--output-format", "stream-json"]
        res = self._run(argv, input_text=None, timeout=timeout, model=model)
        text, events = parse_stream_json(res.stdout)
        errors = _stream_errors(events)
        if res.rc != 0 or (errors and not text.strip()):
            # Classify on stderr and error events only: stdout echoes the user prompt, whose
            # words ("401", "quota") must not decide the error class.
            raise classify_failure(self.name, res.rc, errors, res.stderr, model=model)
        if not text.strip() and res.stdout.strip() and not events:
            raise EmptyOutput(f"gemini (model {model}): stdout was not stream-json: {res.stdout[:120]!r}")
        return self._done(text, res, model)


# --------------------------------------------------------------------------- claude


@register_backend("claude")
class ClaudeBackend(CLIBackend):
    """`claude -p --output-format text --model M [--append-system-prompt S]`, prompt on stdin."""

    name = "claude"
    binary = "claude"
    default_model = "sonnet"

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """One claude call in print mode."""
        model = model or self.model
        argv = ["-p", "--output-format", "text", "--model", model]
        if system:
            argv += ["--append-system-prompt", system]
        res = self._run(argv, input_text=prompt, timeout=timeout, model=model)
        if res.rc != 0:
            raise classify_failure(self.name, res.rc, res.stdout, res.stderr, model=model)
        return self._done(res.stdout, res, model)


# --------------------------------------------------------------------------- codex


@register_backend("codex")
class CodexBackend(CLIBackend):
    """`codex exec --model M --output-last-message FILE -`, prompt on stdin, reply read from FILE."""

    name = "codex"
    binary = "codex"
    default_model = "gpt-5-codex"

    def complete(
        self,
        prompt: str,
        *,
        system: str | None = None,
        model: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        key: str | None = None,
    ) -> Completion:
        """One non-interactive codex run; its last message is the reply."""
        model = model or self.model
        full = f"{system}\n\n---\n\n{prompt}" if system else prompt
        with tempfile.TemporaryDirectory(prefix="mythloop-codex-") as tmp:
            last = Path(tmp) / "last-message.txt"
            argv = ["exec", "--model", model, "--output-last-message", str(last), "-"]
            res = self._run(argv, input_text=full, timeout=timeout, model=model)
            if res.rc != 0:
                raise classify_failure(self.name, res.rc, res.stdout, res.stderr, model=model)
            text = last.read_text(encoding="utf-8", errors="replace") if last.is_file() else ""
        completion = self._done(text, res, model)
        completion.raw = f"{res.stdout}\n--- last message ---\n{text}" if res.stdout else text
        return completion
