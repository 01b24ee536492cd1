"""Benchmark: the replay film as a user runs it vs plain `manim -ql` of the same file.
How it measures: docs/performance.md, "bench/film.py"."""

import contextlib
import io
import json
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from unittest.mock import patch

import common
import psutil

from mythloop import procs

MODES = ("temporary_server", "server_up")  # no server running / `mythloop server` already up
PROMPT = "the heat equation"


def _film(runs_dir: Path, prompt: str, render: bool = True, **options) -> dict:
    """One film flow run in this process; wall seconds, whether it completed, its manifest."""
    from mythloop.mythos.plan.request import FilmRequest
    from mythloop_flows.film import film

    request = FilmRequest(prompt=prompt, backend="replay", render=render, quality="l",
                          runs_dir=runs_dir, **options)
    t0 = time.perf_counter()
    state = film(request, return_state=True)
    return {"wall_s": time.perf_counter() - t0, "ok": state.is_completed(),
            "manifest": _manifest(runs_dir)}


def _manifest(runs_dir: Path) -> dict:
    """The manifest of the latest film run under RUNS_DIR."""
    run_dir = max((runs_dir / "mythos").iterdir(), key=lambda p: p.stat().st_mtime)
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


def plain_manim(scene_file: Path, scene: str, workdir: Path,
                meter: common.CpuMeter | None = None, extra: tuple[str, ...] = ()) -> dict:
    """`python -m manim -ql [EXTRA]` of SCENE_FILE (SCENE, or `-a`) from a fresh temp dir."""
    with tempfile.TemporaryDirectory(prefix="plain-manim-", dir=workdir) as tmp:
        shutil.copy(scene_file, Path(tmp) / "scene.py")
        result = common.run_child([sys.executable, "-m", "manim", "-ql", *extra, "scene.py",
                                   scene], cwd=Path(tmp), timeout=900, meter=meter,
                                  log=workdir / "plain-manim.log")
        if result["returncode"] != 0:
            raise RuntimeError(f"plain manim failed: {result['tail'][-600:]}")
        videos = [v for v in Path(tmp).rglob("*.mp4") if "partial_movie_files" not in v.parts
                  and (scene == "-a" or v.stem == scene)]
        durations = [_duration(v) for v in videos]
        known = bool(videos) and None not in durations
        result.update(videos=len(videos), duration_s=sum(durations) if known else None)
    return result


def _duration(video: Path) -> float | None:
    with contextlib.suppress(OSError, ValueError, subprocess.TimeoutExpired):
        return float(subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration",
                                     "-of", "csv=p=0", str(video)], capture_output=True,
                                    text=True, timeout=60).stdout.strip())
    return None


def _renders(manifest: dict) -> list[dict]:
    keys = ("scene", "attempt", "ok", "kind", "cache", "seconds")
    return [{k: r.get(k) for k in keys} for r in manifest.get("renders", [])]


def rerun_after_failure(workdir: Path, prompt: str) -> dict:
    """A film whose scene 1 fails (no repairs allowed), then the same film with one repair."""
    runs = workdir / "rerun-runs"
    first = _film(runs, prompt, max_repairs=0, fresh=True)
    again = _film(runs, prompt, max_repairs=1)

    def summary(film: dict) -> dict:
        manifest = film["manifest"]
        rendered = [r["scene"] for r in _renders(manifest) if r["cache"] == "miss"]
        return {"ok": film["ok"], "model_calls": manifest.get("model_calls"),
                "wall_s": film["wall_s"], "renders": len(rendered),
                "rendered_scenes": sorted(set(rendered)),
                "cached_scenes": sorted({r["scene"] for r in _renders(manifest)
                                         if r["cache"] == "hit"}),
                "failed_scenes": [f["scene"] for f in manifest.get("failed_scenes", [])]}

    return {"first": summary(first), "rerun": summary(again),
            "scenes": len(again["manifest"].get("scenes", []))}


TINY_SCENE = ("from manim import *\n\nclass Tiny(Scene):\n    def construct(self):\n"
              "        self.play(FadeIn(Square()), run_time=0.1)\n")
FORMULA_SCENE = ("from manim import *\n\nclass Formula(Scene):\n    def construct(self):\n"
                 "        self.play(FadeIn(MathTex(r'u_t = \\alpha\\, u_{xx} + %s')),"
                 " run_time=0.1)\n")


def startup_and_latex(workdir: Path, repeats: int = 2) -> dict:
    """Per-scene start-up and LaTeX cost, cold and warm, alternating (tiny and formula scenes)."""
    from mythloop.mythos.sandbox import render, render_pool

    tiny = workdir / "tiny_startup.py"
    tiny.write_text(TINY_SCENE)
    rows: dict[str, list[float]] = {k: [] for k in (
        "cold_tiny_s", "cold_formula_s", "warm_tiny_s", "warm_formula_hit_s")}

    def timed_render(path: Path, out: str, **env: str) -> float:
        with patch.dict(os.environ, **env):
            t0 = time.perf_counter()
            result = render.render_scene(path, out_dir=workdir / out, timeout=300)
            if not result.ok:
                raise RuntimeError(f"startup probe failed: {result.message}")
            return time.perf_counter() - t0

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
    return {**{k: common.stats(v) for k, v in rows.items()},
            "startup_before_s": med["cold_tiny_s"], "startup_after_s": med["warm_tiny_s"],
            "latex_before_s": med["cold_formula_s"] - med["cold_tiny_s"],
            "latex_after_s": med["warm_formula_hit_s"] - med["warm_tiny_s"]}


class _Server:
    """`mythloop server` for a state folder, in a CPU meter of its own (the server-up mode)."""

    def __init__(self, state: Path, log: Path) -> None:
        self.meter = common.CpuMeter("server")
        t0 = time.perf_counter()
        with open(log, "w", encoding="utf-8") as out:
            self.proc = procs.start_session(self.meter.wrap([*common.mythloop_cmd(), "server"]),
                                            env=common.bench_env(state), stdout=out,
                                            stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 240
        while "Prefect server ready." not in log.read_text(encoding="utf-8", errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"`mythloop server` did not start: {log.read_text()[-800:]}")
            time.sleep(0.2)
        self.startup_s = time.perf_counter() - t0
        kids = psutil.Process(self.proc.pid).children(recursive=True)
        self.pid = next((k.pid for k in kids if "prefect" in " ".join(k.cmdline())),
                        self.proc.pid)

    def stop(self) -> None:
        procs.stop_group(self.proc, first=signal.SIGINT, grace=30)
        self.meter.close()


def _film_run(server: _Server | None, prompt: str, state: Path, runs_dir: Path,
              meter: common.CpuMeter, log: Path, render: bool = True) -> dict:
    """`mythloop film PROMPT --backend replay [--render] -q l --fresh`, with a server's CPU"""
    before = server.meter.seconds() if server else None
    args = ["film", prompt, "--backend", "replay", *(["--render"] if render else []), "-q", "l",
            "--fresh", "--runs-dir", str(runs_dir)]
    run = common.mythloop_child(args, env=common.bench_env(state), timeout=900, log=log,
                                meter=meter)
    run["manifest"] = _manifest(runs_dir)
    if server:
        common.wait_until_idle(server.pid, quiet_s=1.0, limit_s=60)
        after = server.meter.seconds()
        run["server_cpu_s"] = None if after is None or before is None else after - before
    return run


def _utc(text: str | None) -> float | None:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() if text else None


def timeline(db: Path, flow_run_id: str) -> dict:
    """The flow run's and its task runs' start and end (epoch s), from the Prefect database."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        flow = con.execute("SELECT start_time, end_time FROM flow_run WHERE id = ?",
                           (flow_run_id,)).fetchone()
        tasks = con.execute("SELECT name, start_time, end_time FROM task_run WHERE "
                            "flow_run_id = ? ORDER BY start_time", (flow_run_id,)).fetchall()
    finally:
        con.close()
    if flow is None:
        return {}
    return {"start": _utc(flow[0]), "end": _utc(flow[1]),
            "tasks": [{"name": n, "start": _utc(a), "end": _utc(b)}
                      for n, a, b in tasks if a and b]}


def breakdown(run: dict, times: dict) -> dict:
    """Where the film's wall went, stage by stage (docs/performance.md, "bench/film.py")."""
    if not times or times.get("start") is None:
        return {}
    tasks = times["tasks"]
    for t in tasks:
        t["s"] = t["end"] - t["start"]

    def total(prefix: str) -> float:
        return sum(t["s"] for t in tasks if t["name"].startswith(prefix))

    stage_names = ("intent", "cartographer", "curriculum", "math-director", "cinematographer",
                   "scene-composer", "codegen")
    codegen_end = max((t["end"] for t in tasks if t["name"] in stage_names),
                      default=times["start"])
    scenes = [t for t in tasks if re.fullmatch(r"scene-\d+", t["name"])]
    renders = [t for t in tasks if t["name"].startswith("render-")]
    failed = {(r["scene"], r["attempt"]) for r in run["manifest"].get("renders", [])
              if not r.get("ok")}
    failed_render = [t for t in renders if "(after repair" not in t["name"]
                     and (int(t["name"].split("-")[2].split()[0]), 0) in failed]
    last_task_end = max(t["end"] for t in tasks) if tasks else times["end"]
    waits = sorted(max(0.0, t["start"] - codegen_end) for t in scenes)
    phase = max(t["end"] for t in scenes) - min(t["start"] for t in scenes) if scenes else 0.0
    end = times.get("end")
    return {"before_flow_s": times["start"] - run["started_at"],
            "stages_and_codegen_s": codegen_end - times["start"],
            "scene_phase_s": phase,
            "renders": [{"task": t["name"], "seconds": round(t["s"], 2)} for t in renders],
            "render_sum_s": total("render-"),
            "overlap": total("render-") / phase if phase else None,
            "failed_render_s": sum(t["s"] for t in failed_render),
            "repair_s": total("repair-"),
            "after_repair_render_s": sum(t["s"] for t in renders if "(after repair" in t["name"]),
            "verify_s": total("verify-"),
            "worker_wait_s": sum(waits), "worker_waits_s": [round(w, 2) for w in waits],
            "stitch_s": total("stitch"),
            "subtitles_and_voice_s": total("subtitles-and-voice"),
            "flow_end_s": end - last_task_end if end else None,
            "after_flow_s": run["started_at"] + run["wall_s"] - end if end else None}


def render_split(scene_file: Path, scenes: list[str], workdir: Path, repeats: int = 2) -> dict:
    """The final scenes one at a time in one warm worker, with the layout probe and without."""
    from mythloop.mythos.sandbox import render, render_pool

    def one_pass(tag: str, layout: bool) -> tuple[float, float]:
        cpu = wall = 0.0
        for name in scenes:
            result = render.render_scene(scene_file, scene=name, layout=layout, timeout=300,
                                         out_dir=workdir / f"split-{tag}-{name}")
            if not result.ok or result.cpu_s is None:
                raise RuntimeError(f"render of {name} failed or was not measured (warm "
                                   f"workers off?): {result.message}")
            cpu += result.cpu_s
            wall += result.seconds
        return cpu, wall

    render_pool.shutdown()
    with patch.dict(os.environ, MYTHLOOP_WARM_WORKERS="1"):  # one render at a time
        one_pass("warmup", True)  # the worker started, every formula in the cache
        rows: dict[str, list[float]] = {"with_probe_cpu_s": [], "without_probe_cpu_s": [],
                                        "with_probe_s": [], "without_probe_s": []}
        for i in range(repeats):
            for key, layout in (("with_probe", True), ("without_probe", False)):
                cpu, wall = one_pass(f"{key}-{i}", layout)
                rows[f"{key}_cpu_s"].append(cpu)
                rows[f"{key}_s"].append(wall)
    render_pool.shutdown()
    return {**{k: common.stats(v) for k, v in rows.items()}, "scenes": scenes, "repeats": repeats,
            "probe_cpu_s": round(statistics.median(rows["with_probe_cpu_s"])
                                 - statistics.median(rows["without_probe_cpu_s"]), 2)}


def _render_cpu(films: list[dict]) -> dict:
    """From the manifests: the renders' CPU (ok and failed apart) and the workers' start-up."""
    def summed(film: dict, ok: bool) -> float:
        return sum(r.get("cpu_s") or 0.0 for r in film["manifest"].get("renders", [])
                   if bool(r.get("ok")) is ok and r.get("cache") == "miss")

    return {"ok_renders_cpu_s": common.stats([summed(f, True) for f in films]),
            "failed_renders_cpu_s": common.stats([summed(f, False) for f in films]),
            "worker_startup_cpu_s": common.stats([(f["manifest"].get("warm_workers") or {})
                                                  .get("startup_cpu_s") or 0.0 for f in films]),
            "workers_started": [(f["manifest"].get("warm_workers") or {}).get("started")
                                for f in films]}


def _cpu_split(mode: dict, split: dict | None) -> dict | None:
    """The renders' CPU beyond the floor, split by cause (docs/performance.md, "bench/film.py")."""
    floor, cpu = mode.get("floor") or {}, mode.get("render_cpu") or {}
    extra = floor.get("render_side_extra_cpu_s")
    imports = (floor.get("import_manim_cpu_s") or {}).get("median")
    plain = (mode.get("plain_cpu_s") or {}).get("median")
    if extra is None or imports is None or plain is None or not cpu:
        return None
    ok = cpu["ok_renders_cpu_s"]["median"]
    out = {"renders_extra_cpu_s": extra,
           "failed_render_cpu_s": cpu["failed_renders_cpu_s"]["median"],
           "worker_startup_beyond_two_imports_cpu_s": round(
               cpu["worker_startup_cpu_s"]["median"] - 2 * imports, 2),
           "film_ok_renders_cpu_s": ok, "plain_scenes_cpu_s": round(plain - imports, 2)}
    if split:
        one_at_a_time = split["with_probe_cpu_s"]["median"]
        out.update(one_at_a_time_cpu_s=one_at_a_time,
                   per_render_beyond_plain_cpu_s=round(one_at_a_time - (plain - imports), 2),
                   probe_cpu_s=split["probe_cpu_s"],
                   two_at_once_cpu_s=round(ok - one_at_a_time, 2))
        parts = ("failed_render_cpu_s", "worker_startup_beyond_two_imports_cpu_s",
                 "per_render_beyond_plain_cpu_s", "two_at_once_cpu_s")
        out["rest_cpu_s"] = round(extra - sum(out[k] for k in parts), 2)
    return out


def _film_cpu(film: dict) -> float:  # with the server's share when a server was up
    return film["cpu_s"] + (film.get("server_cpu_s") or 0.0)


def _columns(pairs: list[tuple[dict, dict]]) -> tuple[list[float], ...]:
    """Of (film, plain) pairs: film walls, plain walls, film CPU (server's share too), plain CPU."""
    return ([f["wall_s"] for f, _ in pairs], [p["wall_s"] for _, p in pairs],
            [_film_cpu(f) for f, _ in pairs], [p["cpu_s"] for _, p in pairs])


def _mode_pairs(mode: str, repeats: int, prompt: str, workdir: Path, quiet_load: float,
                quiet_wait_s: float, uncached: bool = True) -> dict:
    """REPEATS alternating film / plain (/ plain --disable_caching) runs in MODE, each quiet."""
    state = workdir / f"state-{mode}"
    (state / "prefect").mkdir(parents=True, exist_ok=True)
    server = _Server(state, workdir / f"server-{mode}.log") if mode == "server_up" else None
    runs: dict[str, list[dict]] = {"film": [], "plain": [], "plain_uncached": []}
    try:
        for i in range(repeats):
            for kind in list(runs)[:3 if uncached else 2]:
                quiet = common.wait_for_quiet(quiet_load, quiet_wait_s)
                common.note("film", f"{mode} pair {i + 1}/{repeats}: {kind} "
                            f"(load {quiet['load1']}{'' if quiet['quiet'] else ', NOT quiet'})")
                with common.CpuMeter(kind) as meter:
                    if kind == "film":
                        run = _film_run(server, prompt, state, workdir / f"runs-{mode}-{i}",
                                        meter, workdir / f"film-{mode}-{i}.log")
                        run["breakdown"] = breakdown(run, timeline(
                            state / "prefect" / "prefect.db",
                            run["manifest"].get("prefect_flow_run_id") or ""))
                    else:
                        scene_file = Path(runs["film"][-1]["manifest"]["scene_file"])
                        extra = ("--disable_caching",) if kind == "plain_uncached" else ()
                        run = plain_manim(scene_file, "-a", workdir, meter, extra)
                run["quiet"] = quiet
                runs[kind].append(run)
        floor = _floor(mode, prompt, state, workdir, server, quiet_load, quiet_wait_s)
    finally:
        if server:
            server.stop()
    films, plains, uncached_runs = runs.values()
    quiet_pairs = [(f, p) for f, p in zip(films, plains, strict=True)
                   if f["quiet"]["quiet"] and p["quiet"]["quiet"]]
    used = quiet_pairs or list(zip(films, plains, strict=True))
    film_s, plain_s, film_cpu, plain_cpu = _columns(used)
    # the reference: the same pairs' plain manim with --disable_caching (all three quiet,
    # unless no pair was)
    triples = [(f, u) for f, p, u in zip(films, plains, uncached_runs, strict=False)
               if not quiet_pairs or all(r["quiet"]["quiet"] for r in (f, p, u))]
    film_u, uncached_s, film_u_cpu, uncached_cpu = _columns(triples)
    reference = None if not triples else {
        "pairs": len(triples), "plain_uncached_s": common.stats(uncached_s),
        "plain_uncached_cpu_s": common.stats(uncached_cpu),
        "film_over_plain_uncached": common.ratio_stats(film_u, uncached_s),
        "cpu_over_plain_uncached": common.ratio_stats(film_u_cpu, uncached_cpu)}
    return {"mode": mode, "pairs": len(films), "quiet_pairs": len(quiet_pairs),
            "ratio_from": "quiet pairs" if quiet_pairs else "all pairs (no quiet pair: see load)",
            "server_startup_s": server.startup_s if server else None,
            "film_s": common.stats(film_s), "plain_manim_s": common.stats(plain_s),
            "film_over_plain": common.ratio_stats(film_s, plain_s),
            "film_cpu_s": common.stats(film_cpu), "plain_cpu_s": common.stats(plain_cpu),
            "server_cpu_s": common.stats([f["server_cpu_s"] for f, _ in used
                                          if f.get("server_cpu_s") is not None]),
            "cpu_over_plain": common.ratio_stats(film_cpu, plain_cpu),
            "cpu_method": films[-1]["cpu_method"] if films else None,
            "render_cpu": _render_cpu([f for f, _ in used]),
            "floor": _floor_figures(floor, statistics.median(plain_cpu) if plain_cpu else None,
                                    statistics.median(film_cpu) if film_cpu else None),
            "uncached_reference": reference,
            "breakdowns": [f["breakdown"] for f in films],
            "films": films, "plains": plains}


def _floor(mode: str, prompt: str, state: Path, workdir: Path, server: _Server | None,
           quiet_load: float, quiet_wait_s: float, repeats: int = 2) -> dict:
    """The floor, each run quiet: the film without --render and imports (docs/performance.md)."""
    runs: dict[str, list[float]] = {"no_render_film_cpu_s": [], "import_manim_cpu_s": [],
                                    "no_render_film_s": [], "import_prefect_server_cpu_s": []}
    for i in range(repeats):
        common.wait_for_quiet(quiet_load, quiet_wait_s)
        common.note("film", f"{mode}: the film without --render ({i + 1}/{repeats})")
        with common.CpuMeter("no-render") as meter:
            run = _film_run(server, prompt, state, workdir / f"runs-{mode}-norender-{i}", meter,
                            workdir / f"film-{mode}-norender-{i}.log", render=False)
        runs["no_render_film_cpu_s"].append(_film_cpu(run))
        runs["no_render_film_s"].append(run["wall_s"])
        common.wait_for_quiet(quiet_load, quiet_wait_s)
        runs["import_manim_cpu_s"].append(_import_cpu_s("manim"))
        if server is None:
            common.wait_for_quiet(quiet_load, quiet_wait_s)
            runs["import_prefect_server_cpu_s"].append(
                _import_cpu_s("prefect.server.api.server", common.bench_env(state)))
    return runs


def _import_cpu_s(module: str, env: dict[str, str] | None = None) -> float:
    """CPU seconds of `python -c "import MODULE"` in a process of its own."""
    with common.CpuMeter("import-" + module.replace(".", "-")) as meter:
        return common.run_child([sys.executable, "-c", f"import {module}"], env=env, timeout=300,
                                meter=meter)["cpu_s"]


def _floor_figures(floor: dict, plain_cpu: float | None, film_cpu: float | None) -> dict:
    """The floor's figures, and the least CPU the film can cost and its ratio to plain's."""
    out = {k: common.stats(v) for k, v in floor.items() if v}
    if plain_cpu and {"no_render_film_cpu_s", "import_manim_cpu_s"} <= out.keys():
        least = (plain_cpu + out["no_render_film_cpu_s"]["median"]
                 + out["import_manim_cpu_s"]["median"])
        out["least_film_cpu_s"] = round(least, 2)
        out["least_cpu_ratio"] = round(least / plain_cpu, 3)
        if film_cpu is not None:  # what the renders cost beyond plain manim's, and the rest
            out["render_side_extra_cpu_s"] = round(film_cpu - least, 2)
    return out


def _median_breakdown(breakdowns: list[dict]) -> dict:
    keys = [k for k, v in (breakdowns[0] if breakdowns else {}).items()
            if isinstance(v, int | float) or v is None]
    values = {k: [b[k] for b in breakdowns if b.get(k) is not None] for k in keys}
    return {k: statistics.median(v) if v else None for k, v in values.items()}


def run(repeats: int = 3, rerun: bool = True, prompt: str = PROMPT, start_server: bool = True,
        workdir: Path | None = None, modes: tuple[str, ...] = MODES,
        quiet_load: float | None = None, quiet_wait_s: float = 300.0,
        probe: bool = True, uncached: bool = True) -> dict:
    """All film figures: per mode REPEATS film / plain pairs; ratios over the quiet pairs."""
    common.repo_on_path()
    from sweep import prefect_server

    from mythloop.mythos.sandbox import formula_cache

    cores = os.cpu_count() or 1
    quiet_load = quiet_load if quiet_load is not None else cores / 2
    results: dict[str, dict] = {}
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-film-")))
        for mode in modes:
            results[mode] = _mode_pairs(mode, repeats, prompt, workdir, quiet_load,
                                        quiet_wait_s, uncached=uncached)
        first = results[modes[0]]
        manifest = first["films"][-1]["manifest"]
        split = rerun_result = startup = formulas = None
        if probe:
            common.note("film", "the final scenes one at a time, with and without the layout "
                        "probe (what each render costs beyond plain manim)")
            split = render_split(Path(manifest["scene_file"]),
                                 [s["name"] for s in manifest["scenes"]], workdir)
        for r in results.values():
            r["cpu_split"] = _cpu_split(r, split)
        if rerun:
            common.note("film", "the rerun after a failed scene; start-up and LaTeX per render")
            stack.enter_context(prefect_server(start_server))
            with contextlib.redirect_stdout(io.StringIO()):
                rerun_result = rerun_after_failure(workdir, prompt)
                formulas = formula_cache.stats()
                startup = startup_and_latex(workdir)
    renders = [_renders(f["manifest"]) for f in first["films"]]
    result = {"prompt": prompt, "quality": "l", "repeats": repeats, "cores": cores,
              "render_workers": manifest.get("render_workers"),
              "scenes": len(manifest.get("scenes", [])),
              "quiet_load_below": quiet_load, "quiet_wait_s": quiet_wait_s,
              "modes": {m: {k: v for k, v in r.items() if k not in ("films", "plains")}
                        for m, r in results.items()},
              "breakdown_median": {m: _median_breakdown(r["breakdowns"])
                                   for m, r in results.items()},
              "renders": renders,
              "failed_render_s": common.stats([sum(r["seconds"] or 0 for r in rs if not r["ok"])
                                               for rs in renders]),
              "scene_render_sum_s": common.stats([sum(r["seconds"] or 0 for r in rs)
                                                  for rs in renders]),
              "per_scene_render_s": [{"scene": s["label"], "render_s": s["render_seconds"],
                                      "duration_s": s["duration"], "attempts": s["attempts"]}
                                     for s in manifest.get("scenes", [])],
              "repairs": [len(f["manifest"].get("repairs", [])) for f in first["films"]],
              "repaired_scenes": [[r["scene"] for r in f["manifest"].get("repairs", [])]
                                  for f in first["films"]],
              "video_duration_s": (manifest.get("film") or {}).get("duration"),
              "plain_video_duration_s": results[modes[0]]["plains"][-1].get("duration_s"),
              "plain_peak_rss_mb": max(p["peak_tree_rss_mb"] for r in results.values()
                                       for p in r["plains"]),
              "render_split": split, "rerun": rerun_result, "formula_cache": formulas,
              "startup_and_latex": startup}
    if rerun_result:  # its target is on the results page (bench/report.py)
        again, failed = rerun_result["rerun"], rerun_result["first"]["failed_scenes"]
        result["targets"] = {"rerun after a failed scene renders only that scene": (
            again["ok"] and again["rendered_scenes"] == failed)}
    return result


if __name__ == "__main__":  # the harness runs it: python bench/film.py [--set KEY=VALUE]
    common.part_main("film")
