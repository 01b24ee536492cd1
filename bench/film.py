"""Benchmark: the replay film at -ql end to end vs a plain `manim -ql` of the same final scene.

- End to end: `flows/film.py: film(FilmRequest(prompt, backend="replay", render=True,
  quality="l", fresh=True))` under a temporary Prefect server started once. The replay
  film renders twice: the recorded codegen fails in its first act, the recorded repair
  renders; the manifest gives what the failed render cost.
- Plain: `python -m manim -ql mythos_scene.py <Scene>` of the repaired scene, from a fresh
  temporary directory (no partial-movie or TeX cache), same interpreter.
- Rerun after a failed render: the film with max_repairs=0 (fresh) fails at its render;
  running it again must reach the render with 0 model calls (stages and codegen cached).
  "Seconds to reach the render" is clocked at the entry of `render_scene`.

    python bench/film.py                  # about 5 minutes on 2 quiet cores, 10+ on busy ones
    python bench/film.py --repeats 1 --no-rerun
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, loadavg, ratio_stats, repo_on_path, run_alone, run_child, stats  # noqa: E402

TARGET_RATIO = 1.15
TARGET_SLACK_S = 15.0
PROMPT = "the heat equation"


class _RenderClock:
    """Wraps `render_scene` to note when each render starts (seconds since `reset`)."""

    def __init__(self) -> None:
        import mythloop.mythos.render as render_module

        self.module, self.original = render_module, render_module.render_scene
        self.t0, self.starts = time.perf_counter(), []

    def reset(self) -> None:
        self.t0, self.starts = time.perf_counter(), []

    def __enter__(self) -> _RenderClock:
        def clocked(*args, **kwargs):
            self.starts.append(time.perf_counter() - self.t0)
            return self.original(*args, **kwargs)

        self.module.render_scene = clocked
        return self

    def __exit__(self, *exc: object) -> None:
        self.module.render_scene = self.original


def _film(runs_dir: Path, clock: _RenderClock, prompt: str, render: bool = True,
          **options) -> dict:
    """One film flow run; wall seconds, the manifest, and when its renders started."""
    from flows.film import film
    from mythloop.mythos.request import FilmRequest

    request = FilmRequest(prompt=prompt, backend="replay", render=render, quality="l",
                          runs_dir=runs_dir, **options)
    clock.reset()
    t0 = time.perf_counter()
    state = film(request, return_state=True)
    wall = time.perf_counter() - t0
    run_dir = max((runs_dir / "mythos").iterdir(), key=lambda p: p.stat().st_mtime)
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    return {"wall_s": wall, "ok": state.is_completed(), "run_dir": str(run_dir),
            "manifest": manifest, "render_starts_s": list(clock.starts)}


def plain_manim(scene_file: Path, scene: str, workdir: Path) -> dict:
    """`python -m manim -ql` of SCENE_FILE from a fresh temp dir; wall seconds and peak RSS."""
    with tempfile.TemporaryDirectory(prefix="plain-manim-", dir=workdir) as tmp:
        shutil.copy(scene_file, Path(tmp) / "scene.py")
        result = run_child([sys.executable, "-m", "manim", "-ql",
                            "scene.py", scene], cwd=Path(tmp), env=dict(os.environ),
                           timeout=900, log=workdir / "plain-manim.log")
        if result["returncode"] != 0:
            raise RuntimeError(f"plain manim failed: {result['tail'][-600:]}")
        videos = list(Path(tmp).rglob(f"{scene}.mp4"))
        result["duration_s"] = _duration(videos[0]) if videos else None
    return result


def _duration(video: Path) -> float | None:
    try:
        out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration",
                              "-of", "csv=p=0", str(video)], capture_output=True, text=True,
                             timeout=60)
        return float(out.stdout.strip())
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return None


def _renders(manifest: dict) -> list[dict]:
    return [{"attempt": r.get("attempt"), "ok": r.get("ok"), "kind": r.get("kind"),
             "seconds": r.get("seconds")} for r in manifest.get("renders", [])]


def rerun_after_failure(workdir: Path, clock: _RenderClock, prompt: str) -> dict:
    """A film whose render fails (no repairs allowed), then the same film again."""
    runs = workdir / "rerun-runs"
    first = _film(runs, clock, prompt, max_repairs=0, fresh=True)
    again = _film(runs, clock, prompt, max_repairs=0)
    stages = again["manifest"].get("stages", [])
    return {
        "first": {"ok": first["ok"], "model_calls": first["manifest"].get("model_calls"),
                  "to_render_s": (first["render_starts_s"] or [None])[0],
                  "wall_s": first["wall_s"]},
        "rerun": {"ok": again["ok"], "model_calls": again["manifest"].get("model_calls"),
                  "to_render_s": (again["render_starts_s"] or [None])[0],
                  "wall_s": again["wall_s"],
                  "cached_steps": [s["stage"] for s in stages if s.get("cached")],
                  "uncached_steps": [s["stage"] for s in stages if not s.get("cached")]},
    }


def run(repeats: int = 2, rerun: bool = True, prompt: str = PROMPT, start_server: bool = True,
        workdir: Path | None = None) -> dict:
    """All film figures as a dict (for `bench/run_all.py`)."""
    repo_on_path()
    from sweep import prefect_server

    load_before = loadavg()
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-film-")))
        server = stack.enter_context(prefect_server(start_server))
        clock = stack.enter_context(_RenderClock())
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        films = [_film(workdir / f"runs-{i}", clock, prompt, fresh=True) for i in range(repeats)]
        done = films[-1]
        if not done["ok"]:
            raise RuntimeError(f"the replay film failed; see {done['run_dir']}")
        manifest = done["manifest"]
        scene_file, scene = Path(manifest["scene_file"]), manifest["scene_name"]
        plain = [plain_manim(scene_file, scene, workdir) for _ in range(repeats)]
        rerun_result = rerun_after_failure(workdir, clock, prompt) if rerun else None
    film_s = [f["wall_s"] for f in films]
    plain_s = [p["wall_s"] for p in plain]
    renders = [_renders(f["manifest"]) for f in films]
    failed_render_s = [sum(r["seconds"] or 0 for r in rs if not r["ok"]) for rs in renders]
    ok_render_s = [sum(r["seconds"] or 0 for r in rs if r["ok"]) for rs in renders]
    without_failed = [w - f for w, f in zip(film_s, failed_render_s, strict=True)]
    median_plain = stats(plain_s)["median"]
    budget = TARGET_RATIO * median_plain + TARGET_SLACK_S
    result = {
        "prompt": prompt, "quality": "l", "repeats": repeats,
        "film_s": stats(film_s), "plain_manim_s": stats(plain_s),
        "film_over_plain": ratio_stats(film_s, plain_s),
        "budget_s": budget,
        "renders": renders,
        "failed_render_s": stats(failed_render_s), "ok_render_in_film_s": stats(ok_render_s),
        "film_without_failed_render_s": stats(without_failed),
        "film_without_failed_over_plain": ratio_stats(without_failed, plain_s),
        "to_first_render_s": stats([(f["render_starts_s"] or [0])[0] for f in films]),
        "repairs": [len(f["manifest"].get("repairs", [])) for f in films],
        "video_duration_s": plain[-1].get("duration_s"),
        "plain_peak_rss_mb": max(p["peak_tree_rss_mb"] for p in plain),
        "rerun": rerun_result,
        "prefect_startup_s": server["startup_s"],
        "load_before": load_before, "load_after": loadavg(),
    }
    result["targets"] = {
        f"film <= {TARGET_RATIO}x plain + {TARGET_SLACK_S:.0f} s":
            result["film_s"]["median"] <= budget,
    }
    if rerun_result:
        result["targets"]["rerun reaches the render with 0 model calls"] = (
            rerun_result["rerun"]["model_calls"] == 0
            and rerun_result["rerun"]["to_render_s"] is not None)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-rerun", action="store_true")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    with run_alone("bench-film-state-"):
        result = run(args.repeats, not args.no_rerun, args.prompt)
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
