"""Benchmark: the replay film as scenes rendered in parallel vs plain `manim -ql` of the same file.

- Film: `flows/film.py: film(FilmRequest(prompt, backend="replay", render=True,
  quality="l", fresh=True))` under a temporary Prefect server started once. The recorded
  codegen is a shared header + 5 scene classes; scene 1 carries a real Manim error that the
  recorded scoped repair fixes. Scenes render concurrently (render_workers = cores), each in
  the sandbox, and are stitched with ffmpeg's concat demuxer. `fresh=True` also bypasses
  the scene cache, so every scene really renders.
- Plain: `python -m manim -ql mythos_scene.py -a` of the film's final single file (the
  same header and scene classes, repaired), from a fresh temporary directory, one process:
  what rendering the same content as one file costs. Film and plain alternate, so both see
  the same machine load.
- Rerun after a failed scene: the film with max_repairs=0 (fresh) fails at scene 1 and keeps
  the others; the same film again with one repair allowed must render only scene 1 (count
  of renders that missed the scene cache, and of model calls).

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
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, loadavg, ratio_stats, repo_on_path, run_alone, run_child, stats  # noqa: E402

TARGET_RATIO = 0.75  # film wall <= 0.75 x plain manim of the single file, on 2 cores
PROMPT = "the heat equation"


class _RenderClock:
    """Wraps `render_scene` to note when each render starts (seconds since `reset`)."""

    def __init__(self) -> None:
        import mythloop.mythos.sandbox.render as render_module

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
    from mythloop.mythos.plan.request import FilmRequest
    from mythloop_flows.film import film

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
    """`python -m manim -ql` of SCENE_FILE (SCENE, or `-a` for all) from a fresh temp dir."""
    with tempfile.TemporaryDirectory(prefix="plain-manim-", dir=workdir) as tmp:
        shutil.copy(scene_file, Path(tmp) / "scene.py")
        result = run_child([sys.executable, "-m", "manim", "-ql",
                            "scene.py", scene], cwd=Path(tmp), env=dict(os.environ),
                           timeout=900, log=workdir / "plain-manim.log")
        if result["returncode"] != 0:
            raise RuntimeError(f"plain manim failed: {result['tail'][-600:]}")
        videos = [v for v in Path(tmp).rglob("*.mp4") if "partial_movie_files" not in v.parts
                  and (scene == "-a" or v.stem == scene)]
        durations = [_duration(v) for v in videos]
        result["videos"] = len(videos)
        result["duration_s"] = (sum(durations) if videos and None not in durations else None)
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
    return [{"scene": r.get("scene"), "attempt": r.get("attempt"), "ok": r.get("ok"),
             "kind": r.get("kind"), "cache": r.get("cache"), "seconds": r.get("seconds")}
            for r in manifest.get("renders", [])]


def rerun_after_failure(workdir: Path, clock: _RenderClock, prompt: str) -> dict:
    """A film whose scene 1 fails (no repairs allowed), then the same film with one repair."""
    runs = workdir / "rerun-runs"
    first = _film(runs, clock, prompt, max_repairs=0, fresh=True)
    again = _film(runs, clock, prompt, max_repairs=1)

    def summary(film: dict) -> dict:
        renders = _renders(film["manifest"])
        return {"ok": film["ok"], "model_calls": film["manifest"].get("model_calls"),
                "wall_s": film["wall_s"],
                "renders": len([r for r in renders if r["cache"] == "miss"]),
                "rendered_scenes": sorted({r["scene"] for r in renders
                                           if r["cache"] == "miss"}),
                "cached_scenes": sorted({r["scene"] for r in renders if r["cache"] == "hit"}),
                "failed_scenes": [f["scene"] for f in
                                  film["manifest"].get("failed_scenes", [])]}

    return {"first": summary(first), "rerun": summary(again),
            "scenes": len(again["manifest"].get("scenes", []))}


TINY_SCENE = ("from manim import *\n\nclass Tiny(Scene):\n    def construct(self):\n"
              "        self.play(FadeIn(Square()), run_time=0.1)\n")
FORMULA_SCENE = ("from manim import *\n\nclass Formula(Scene):\n    def construct(self):\n"
                 "        self.play(FadeIn(MathTex(r'u_t = \\alpha\\, u_{xx} + %s')),"
                 " run_time=0.1)\n")


def startup_and_latex(workdir: Path, repeats: int = 2) -> dict:
    """Per-scene start-up and LaTeX cost, before (cold sandbox, LaTeX compiled in the scene)
    and after (warm worker, formula-cache hit), side by side in one run: a tiny scene and
    a one-formula scene each rendered both ways, alternating."""
    import mythloop.mythos.sandbox.render as render_module
    from mythloop.mythos.sandbox import render_pool

    tiny = workdir / "tiny_startup.py"
    tiny.write_text(TINY_SCENE)
    rows: dict[str, list[float]] = {k: [] for k in (
        "cold_tiny_s", "cold_formula_s", "warm_tiny_s", "warm_formula_hit_s")}

    def timed_render(path: Path, out: str, **env: str) -> float:
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            t0 = time.perf_counter()
            result = render_module.render_scene(path, out_dir=workdir / out, timeout=300)
            if not result.ok:
                raise RuntimeError(f"startup probe failed: {result.message}")
            return time.perf_counter() - t0
        finally:
            for k, v in saved.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)

    warm_formula = workdir / "formula_warm.py"
    warm_formula.write_text(FORMULA_SCENE % "1")
    timed_render(tiny, "warmup-tiny")  # starts the warm worker
    timed_render(warm_formula, "warmup-formula")  # puts the formula in the cache
    for i in range(repeats):
        cold_formula = workdir / f"formula_cold_{i}.py"  # a new formula each time: no reuse
        cold_formula.write_text(FORMULA_SCENE % f"{i + 2}")
        off = {"MYTHLOOP_WARM_WORKERS": "0", "MYTHLOOP_FORMULA_CACHE": "0"}
        rows["cold_tiny_s"].append(timed_render(tiny, f"cold-tiny-{i}", **off))
        rows["warm_tiny_s"].append(timed_render(tiny, f"warm-tiny-{i}"))
        rows["cold_formula_s"].append(timed_render(cold_formula, f"cold-formula-{i}", **off))
        rows["warm_formula_hit_s"].append(timed_render(warm_formula, f"warm-formula-{i}"))
    render_pool.shutdown()
    med = {k: statistics.median(v) for k, v in rows.items()}
    return {**{k: stats(v) for k, v in rows.items()},
            "startup_before_s": med["cold_tiny_s"], "startup_after_s": med["warm_tiny_s"],
            "latex_before_s": med["cold_formula_s"] - med["cold_tiny_s"],
            "latex_after_s": med["warm_formula_hit_s"] - med["warm_tiny_s"]}


def run(repeats: int = 3, rerun: bool = True, prompt: str = PROMPT, start_server: bool = True,
        workdir: Path | None = None) -> dict:
    """All film figures as a dict (for `bench/run_all.py`)."""
    repo_on_path()
    from sweep import prefect_server

    from mythloop.mythos.sandbox import formula_cache

    load_before = loadavg()
    films, plain = [], []
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-film-")))
        server = stack.enter_context(prefect_server(start_server))
        clock = stack.enter_context(_RenderClock())
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        for i in range(repeats):  # side by side: film, plain, film, plain
            film = _film(workdir / f"runs-{i}", clock, prompt, fresh=True)
            if not film["ok"]:
                raise RuntimeError(f"the replay film failed; see {film['run_dir']}")
            films.append(film)
            plain.append(plain_manim(Path(film["manifest"]["scene_file"]), "-a", workdir))
        rerun_result = rerun_after_failure(workdir, clock, prompt) if rerun else None
        formulas = formula_cache.stats()
        breakdown = startup_and_latex(workdir)
    film_s = [f["wall_s"] for f in films]
    plain_s = [p["wall_s"] for p in plain]
    renders = [_renders(f["manifest"]) for f in films]
    failed_render_s = [sum(r["seconds"] or 0 for r in rs if not r["ok"]) for rs in renders]
    scene_render_sum = [sum(r["seconds"] or 0 for r in rs) for rs in renders]
    last = films[-1]["manifest"]
    result = {
        "prompt": prompt, "quality": "l", "repeats": repeats,
        "cores": os.cpu_count(), "render_workers": last.get("render_workers"),
        "scenes": len(last.get("scenes", [])),
        "film_s": stats(film_s), "plain_manim_s": stats(plain_s),
        "film_over_plain": ratio_stats(film_s, plain_s),
        "target_ratio": TARGET_RATIO,
        "renders": renders,
        "failed_render_s": stats(failed_render_s),
        "scene_render_sum_s": stats(scene_render_sum),
        "per_scene_render_s": [{"scene": s["label"], "render_s": s["render_seconds"],
                                "duration_s": s["duration"], "attempts": s["attempts"]}
                               for s in last.get("scenes", [])],
        "to_first_render_s": stats([(f["render_starts_s"] or [0])[0] for f in films]),
        "repairs": [len(f["manifest"].get("repairs", [])) for f in films],
        "repaired_scenes": [[r["scene"] for r in f["manifest"].get("repairs", [])]
                            for f in films],
        "video_duration_s": (last.get("film") or {}).get("duration"),
        "plain_video_duration_s": plain[-1].get("duration_s"),
        "plain_peak_rss_mb": max(p["peak_tree_rss_mb"] for p in plain),
        "rerun": rerun_result,
        "prefect_startup_s": server["startup_s"],
        "load_before": load_before, "load_after": loadavg(),
        "formula_cache": formulas,
        "startup_and_latex": breakdown,
    }
    result["targets"] = {
        f"film wall <= {TARGET_RATIO}x plain manim -ql of the single file":
            result["film_over_plain"]["median"] <= TARGET_RATIO,
    }
    if rerun_result:
        result["targets"]["rerun after a failed scene renders only that scene"] = (
            rerun_result["rerun"]["ok"] and rerun_result["rerun"]["rendered_scenes"]
            == rerun_result["first"]["failed_scenes"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
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
