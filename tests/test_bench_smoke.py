"""Smoke runs of each benchmark's core at minimal sizes: they run and agree; no timing asserted."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import common  # noqa: E402
import film as film_bench  # noqa: E402
import report  # noqa: E402


def test_stats_and_ratio():
    st = common.stats([3.0, 1.0, 2.0, 10.0])
    assert (st["min"], st["median"], st["max"], st["n"]) == (1.0, 2.5, 10.0, 4)
    assert common.stats([])["n"] == 0
    r = common.ratio_stats([4.0, 6.0], [2.0, 3.0])
    assert r["median"] == pytest.approx(2.0)
    assert r["min"] == pytest.approx(4.0 / 3.0) and r["max"] == pytest.approx(3.0)


def test_run_child_reports_exit_code_and_tree_memory(tmp_path):
    code = "import subprocess, sys; b = bytearray(80 << 20); " \
           "subprocess.run([sys.executable, '-c', 'x = bytearray(60 << 20)']); sys.exit(3)"
    result = common.run_child([sys.executable, "-c", code], log=tmp_path / "log.txt")
    assert result["returncode"] == 3 and not result["timed_out"]
    assert result["child_max_rss_mb"] >= 80
    assert result["peak_tree_rss_mb"] > 0


BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}: pass\n"


def test_cpu_meter_counts_a_grandchild_nobody_reaped(tmp_path):
    """The film's CPU is measured over its whole tree: a process that left its parent's
    session and was never waited for (like a render in a PID namespace whose parent was
    killed) still counts, where the reaped-tree usage of wait4 misses it."""
    meter = common.CpuMeter("test")
    if meter.path is None:
        pytest.skip("no cgroup can be made here (not root, or no cgroupfs)")

    def code(marker: Path) -> str:
        # the grandchild burns 0.6 s of CPU, says so, then lingers; the child leaves it
        # behind unreaped (run_child stops it afterwards, as a leftover)
        grandchild = (BURN.format(s=0.6) + f"open({str(marker)!r}, 'w').close()\n"
                      "time.sleep(60)\n")
        return ("import os, subprocess, sys, time\n"
                f"subprocess.Popen([sys.executable, '-c', {grandchild!r}], "
                "start_new_session=True)\n"
                f"while not os.path.exists({str(marker)!r}): time.sleep(0.05)\n")

    try:
        result = common.run_child([sys.executable, "-c", code(tmp_path / "a")], meter=meter,
                                  timeout=120)
        reaped_only = common.run_child([sys.executable, "-c", code(tmp_path / "b")],
                                       timeout=120)
        assert result["returncode"] == 0 and "cgroup" in result["cpu_method"]
        assert result["cpu_s"] >= 0.6  # the grandchild's CPU, though nobody reaped it
        assert reaped_only["cpu_s"] < 0.6  # what wait4 alone sees: the child, not its orphan
    finally:
        meter.close()


def test_wait_for_quiet_says_when_the_machine_was_not_quiet():
    assert common.wait_for_quiet(threshold=1e9, limit_s=5)["quiet"] is True
    busy = common.wait_for_quiet(threshold=-1.0, limit_s=0.3, poll_s=0.1)
    assert busy["quiet"] is False and busy["waited_s"] >= 0.3


def test_run_child_kills_at_timeout(tmp_path):
    result = common.run_child([sys.executable, "-c", "import time; time.sleep(30)"],
                              timeout=1, log=tmp_path / "log.txt")
    assert result["timed_out"] and result["returncode"] != 0


def test_run_child_stops_what_escaped_its_process_group(tmp_path):
    pidfile = tmp_path / "pid"
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(60)'], start_new_session=True); "
            f"open({str(pidfile)!r}, 'w').write(str(p.pid))")
    result = common.run_child([sys.executable, "-c", code], log=tmp_path / "log.txt")
    assert result["returncode"] == 0 and result["left_running"] == 0
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]


def test_machine_info_has_the_reported_fields():
    info = common.machine_info()
    assert info["cores"] >= 1 and info["python"].count(".") == 2
    assert len(info["loadavg"]) == 3 and "prefect" in info["packages"]


def test_router_core_small_pool_matches_the_loop():
    import router

    result = router.run(sizes=(80,), n_reasons=200, embed=False)
    row = result["sizes"][0]
    assert row["skills"] == 80 and row["vectorised"]["n"] > 0
    assert result["targets"]["same_scores"]


@pytest.mark.slow  # a sweep flow and the plain loop
def test_sweep_flow_and_plain_loop_agree(prefect_harness, tmp_path):
    import sweep

    result = sweep.run(repeats=1, rounds=1, cli_repeats=0, workdir=tmp_path, latency_rounds=0)
    assert result["same_metrics"], "the flow and the plain loop diverged"
    assert result["failed_turns"] == {"plain": 0, "flow": 0}
    assert result["prefect_startup_s"] is None  # the harness's API was used, not a new server
    assert result["plain_s"]["n"] == 1 and result["flow_s"]["n"] == 1
    assert set(result["targets"]) == {"wall incl. start-up <= 60 s", "flow/plain <= 2x",
                                      "peak RSS <= 1.5 GB"}
    prompts = (tmp_path / "prompts-seed13.yaml").read_text()
    assert "heldout" not in prompts and "null_prompts" in prompts


def test_overhead_core_measures_each_variant(prefect_harness):
    import overhead

    result = overhead.run(n=3, repeats=1, breakdown_n=2)
    assert result["bare_ms"]["n"] == 1 and result["mythloop_ms"]["median"] > 0
    assert set(result["breakdown"]) == {"mythloop_llm_tag", "mythloop_no_persist",
                                        "bare_payload", "bare_payload_quoted"}


def test_film_rerun_without_render_calls_no_model(prefect_harness, tmp_path):
    import film

    with film._RenderClock() as clock:
        first = film._film(tmp_path / "runs", clock, "the heat equation", render=False,
                           fresh=True)
        again = film._film(tmp_path / "runs", clock, "the heat equation", render=False)
    assert first["ok"] and again["ok"]
    assert first["manifest"]["model_calls"] > 0
    assert again["manifest"]["model_calls"] == 0
    assert clock.starts == []  # no render requested, none started


@pytest.mark.slow
def test_plain_manim_renders_a_tiny_scene(tmp_path):
    import film

    scene = tmp_path / "tiny.py"
    scene.write_text(textwrap.dedent("""
        from manim import Scene, Square, Create
        class Tiny(Scene):
            def construct(self):
                self.play(Create(Square()), run_time=1)
    """))
    result = film.plain_manim(scene, "Tiny", tmp_path)
    assert result["returncode"] == 0
    assert result["duration_s"] == pytest.approx(1.0, abs=0.3)


def test_results_page_flags_missed_targets_and_failed_parts():
    data = {
        "machine": {"date_utc": "d", "cpu": "c", "cores": 2, "cores_usable": 2, "memory_gb": 1.0,
                    "os": "o", "python": "3.11.0", "packages": {"prefect": "3"},
                    "loadavg": [5.0, 4.0, 3.0], "git": "abc"},
        "total_s": 60.0, "load_end": [1.0, 1.0, 1.0],
        "parts": {
            "sweep": {"figures": {
                "config": {"conditions": ["c0", "c3"], "rounds": 6, "replicates": 1,
                           "prompts": "13", "judge": "simulated", "repeats": 1},
                "plain_s": common.stats([5.0]), "flow_s": common.stats([20.0]),
                "flow_over_plain": common.ratio_stats([20.0], [5.0]),
                "prefect_startup_s": 9.0, "first_flow_s": 1.0,
                "cli": {"wall_s": common.stats([40.0]), "peak_tree_rss_mb": 900.0},
                "peak_rss_mb": {"bench_process_after_plain": 700.0,
                                "bench_process_after_flow": 750.0, "prefect_server": 200.0},
                "same_metrics": True, "failed_turns": {"plain": 0, "flow": 0},
                "warmup_plain_s": 3.0,
                "headline": {"wall_with_startup_s": 40.0, "peak_rss_mb": 900.0},
                "latency": {"delay_s": 2.0, "rounds": 1, "turns": 26, "levels": [1, 8],
                            "runs": {"1": {"wall_s": 70.0, "turns_s": 60.0, "failed_turns": 0},
                                     "8": {"wall_s": 18.0, "turns_s": 10.0, "failed_turns": 0}},
                            "turns_speedup": 6.0, "wall_speedup": 70.0 / 18.0,
                            "same_metrics": True}},
                "child_wall_s": 80.0, "load_before": [1, 1, 1], "load_after": [1, 1, 1]},
            "film": {"error": "exit code 1: boom", "child_wall_s": 3.0},
            "scale": {"from_file": "bench/scale.json", "from_run": "then", "figures": {
                "machine": {"date_utc": "then", "git": "abc", "loadavg": [0.5, 0.5, 0.5]},
                "sharded_sweep": {
                    "shape": "2 x 2 x 2", "speedup_2_over_1": 1.8, "warmup_wall_s": 9.0,
                    "workers_1": {"wall_s": 90.0, "shards_per_worker": {"w1": 4}},
                    "workers_2": {"wall_s": 50.0, "shards_per_worker": {"w1": 2, "w2": 2}}},
                "task_burst": {
                    "sqlite": {"tasks": 1000, "client_done_s": 20.0, "api_all_completed_s": 60.0,
                               "timed_out": False, "completed_seen": 1000},
                    "postgres": {"tasks": 1000, "client_done_s": 25.0,
                                 "api_all_completed_s": None, "timed_out": True,
                                 "completed_seen": 700}}}},
        },
    }
    page = report.render_results(data)
    assert "| sweep | Prefect flow <= 2x the plain loop (after start-up) | 4.00x | " \
           "**NOT met** |" in page
    assert "seed-sized sweep <= 60 s wall incl. Prefect start-up | 40.0 s | met" in page
    assert "**Failed**: exit code 1: boom" in page
    assert "the figures of its last run, from `bench/scale.json`: then" in page
    assert "| 2 | 50.0 s |" in page and "1.80x faster" in page
    assert "| postgres | 25.0 s | not within the limit (700 seen) |" in page
    assert "The machine was busy" in page
    assert "Sweep flow / plain loop misses 2x" in page
    assert ("turns >= 5x faster at --concurrency 8 than 1 | 6.00x | met |") in page
    assert "| 8 | 18.0 s | 10.0 s | 0 |" in page


def test_results_page_explains_a_missed_ratio_with_the_measured_cpu_split():
    data = {
        "machine": {"date_utc": "d", "cpu": "c", "cores": 2, "cores_usable": 2, "memory_gb": 1.0,
                    "os": "o", "python": "3.11.0", "packages": {}, "loadavg": [0.1, 0.1, 0.1],
                    "git": "abc"},
        "total_s": 60.0, "load_end": [0.1, 0.1, 0.1],
        "parts": {"sweep": {"figures": {
            "config": {"conditions": ["c0", "c3"], "rounds": 6, "replicates": 1,
                       "prompts": "13", "judge": "simulated", "repeats": 2},
            "plain_s": common.stats([3.0, 3.0]), "flow_s": common.stats([12.0, 12.0]),
            "flow_over_plain": common.ratio_stats([12.0, 12.0], [3.0, 3.0]),
            "prefect_startup_s": 9.0, "first_flow_s": 1.0, "task_runs": 169,
            "cpu_s": {"plain_client": common.stats([2.9]), "flow_client": common.stats([6.9]),
                      "flow_server": common.stats([7.0]), "flow_server_after": common.stats([1.0])},
            "cli": {"wall_s": common.stats([40.0]), "peak_tree_rss_mb": 900.0},
            "peak_rss_mb": {"bench_process_after_plain": 700.0,
                            "bench_process_after_flow": 750.0, "prefect_server": 200.0},
            "same_metrics": True, "failed_turns": {"plain": 0, "flow": 0},
            "warmup_plain_s": 3.0, "headline": {"wall_with_startup_s": 40.0, "peak_rss_mb": 900.0}},
            "child_wall_s": 80.0, "load_before": [1, 1, 1], "load_after": [1, 1, 1]}},
    }
    page = report.render_results(data)
    assert "| CPU, Prefect server while the flow ran | 7.00 s" in page
    assert "for 169 task runs, 53 ms per task run" in page
    # client: 6.9 - 2.9 = 4.0 s; server: 7.0 + 1.0 = 8.0 s, both per task run
    assert "the Prefect client adds 4.0 s (24 ms per task run)" in page
    assert "local Prefect server uses 8.0 s (47 ms per task run)" in page
    assert "The machine was busy" not in page


def test_wait_until_idle_returns_once_a_busy_process_settles():
    code = "import time\nwhile time.process_time() < 1.0: pass\ntime.sleep(30)"  # 1 CPU-second
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.2)
        used = common.wait_until_idle(proc.pid, quiet_s=0.3, limit_s=20)
        assert 0.3 < used < 2.0  # it saw the busy second, then stopped waiting
        assert proc.poll() is None  # and returned while the process still lives (sleeping)
    finally:
        proc.kill()
        proc.wait()
    assert common.process_cpu_s(proc.pid) is None


def test_metatool_section_shows_intervals_and_below_c0_reads_them():
    """The MetaTool part prints the report's intervals, and a learning condition counts as
    below C0 only when its paired interval lies wholly under 0 (means alone when a run
    recorded none)."""
    base = {"round": 0, "hit@1": 0.53, "hit@5": 0.78, "mrr": 0.64,
            "ci": {"hit@1": [0.48, 0.58], "hit@5": [0.74, 0.82], "mrr": [0.6, 0.68]}}
    c3 = {"round": 0, "hit@1": 0.50, "hit@5": 0.77, "mrr": 0.62,
          "ci": {"hit@1": [0.45, 0.55], "hit@5": [0.72, 0.81], "mrr": [0.58, 0.66]},
          "vs_c0": {"hit@1": {"mean": -0.03, "lo": -0.06, "hi": 0.01},
                    "hit@5": {"mean": -0.01, "lo": -0.03, "hi": 0.01}}}
    assert not report._below_c0(c3, base, "hit@1")  # the interval includes 0
    worse = {**c3, "vs_c0": {"hit@1": {"mean": -0.05, "lo": -0.08, "hi": -0.02}}}
    assert report._below_c0(worse, base, "hit@1")
    assert report._below_c0({"hit@1": 0.5}, base, "hit@1")  # no interval recorded: means
    figures = {"returncode": 0, "command": "sweep --conditions c0 c3 c4", "rounds": 1,
               "wall_s": 200.0, "peak_tree_rss_mb": 1000.0, "load_before": [1, 1, 1],
               "load_after": [1, 1, 1], "noise": 0.2, "heldout": {"c0": [base], "c3": [c3]},
               "round_times": {}, "bm25": {"hit@1": 0.4, "hit@5": 0.6, "mrr": 0.5}}
    text = "\n".join(report._metatool({"figures": figures}))
    assert "| c3 | 1 | 0.500 [0.450, 0.550] |" in text and "-0.030 [-0.060, +0.010]" in text


def test_results_page_states_each_film_mode_its_cpu_and_its_breakdown():
    def mode(film_s, plain_s, film_cpu, plain_cpu, quiet):
        return {"film_s": common.stats(film_s), "plain_manim_s": common.stats(plain_s),
                "film_over_plain": common.ratio_stats(film_s, plain_s),
                "film_cpu_s": common.stats(film_cpu), "plain_cpu_s": common.stats(plain_cpu),
                "cpu_over_plain": common.ratio_stats(film_cpu, plain_cpu), "pairs": 2,
                "quiet_pairs": quiet, "loads": [[0.5, 0.6], [0.4, 0.7]],
                "ratio_from": "quiet pairs" if quiet else "all pairs (no quiet pair: see load)"}

    figures = {
        "prompt": "the heat equation", "repeats": 2, "cores": 2, "quiet_load_below": 1.0,
        "quiet_wait_s": 300.0, "target_ratio": 0.75, "target_cpu_ratio": 1.1,
        "modes": {"temporary_server": mode([21.0, 23.0], [30.0, 30.0], [40.0], [38.0], 2),
                  "server_up": mode([27.0], [30.0], [52.0], [40.0], 0)},
        # server up: the film without --render costs 9 s of CPU, an import of manim 2.5 s
        "floor_input": film_bench._floor_figures(
            {"no_render_film": [{"cpu_s": 8.0, "wall_s": 3.0}, {"cpu_s": 10.0, "wall_s": 3.4}],
             "import_manim": [{"cpu_s": 2.5, "wall_s": 2.6}]}, 40.0, 52.0),
        "breakdown_median": {"temporary_server": {"before_flow_s": 4.5, "overlap": 1.8},
                             "server_up": {"before_flow_s": 2.0, "overlap": None}},
        "render_split": None, "rerun": None}
    data = {"machine": {"date_utc": "d", "cpu": "c", "cores": 2, "cores_usable": 2,
                        "memory_gb": 1.0, "os": "o", "python": "3.11.0", "packages": {},
                        "loadavg": [0.5, 0.5, 0.5], "git": "abc"},
            "total_s": 60.0, "load_end": [1.0, 1.0, 1.0],
            "parts": {"film": {"figures": figures, "child_wall_s": 600.0}}}
    figures["modes"]["server_up"]["floor"] = figures.pop("floor_input")
    # no server up: the floor also times one import of Prefect's server module
    figures["modes"]["temporary_server"]["floor"] = film_bench._floor_figures(
        {"no_render_film": [{"cpu_s": 12.0, "wall_s": 6.0}],
         "import_manim": [{"cpu_s": 2.5, "wall_s": 2.6}],
         "import_prefect_server": [{"cpu_s": 3.4, "wall_s": 3.5}]}, 38.0, 40.0)
    # the renders' extra (0.5 s), split: the films' good renders 30 s and failed ones 1.2 s of
    # CPU, the workers' start-up 5.4 s; the same scenes one at a time 29 s (28 without the
    # probe); plain 40 s less one import (2.5 s) = 37.5 s for its scenes
    figures["modes"]["server_up"]["render_cpu"] = film_bench._render_cpu([
        {"manifest": {"renders": [{"ok": False, "cache": "miss", "cpu_s": 1.2},
                                  {"ok": True, "cache": "miss", "cpu_s": 30.0},
                                  {"ok": True, "cache": "hit", "cpu_s": None}],
                      "warm_workers": {"started": 2, "startup_cpu_s": 5.4}}}])
    split = {"with_probe_cpu_s": common.stats([29.0]), "without_probe_cpu_s": common.stats([28.0]),
             "probe_cpu_s": 1.0}
    figures["modes"]["server_up"]["cpu_split"] = film_bench._cpu_split(
        figures["modes"]["server_up"], split)
    page = report.render_results(data)
    assert "| the failed render of scene 1 | 1.20 s |" in page
    assert "| the warm workers' start-up beyond two imports of manim | 0.40 s |" in page
    assert "| each render, one at a time, beyond plain manim's scenes (sandbox, formula " \
           "service, probe) | -8.50 s |" in page
    assert "| two renders at once on 2 cores (against one at a time) | 1.00 s |" in page
    # 0.5 - (1.2 + 0.4 - 8.5 + 1.0) = 6.4
    assert "| the rest: stitch, subtitles, voice, the flow around the renders | 6.40 s |" in page
    # plain 40 + 9 + 2.5 = 51.5 s of CPU at the least: 1.29x; the renders' own extra 0.5 s
    assert "| its ratio to plain manim's CPU | 1.38x | 1.29x |" in page
    assert re.search(r"\| of the film without --render: importing Prefect's server alone, "
                     r"CPU \| 3\.40 s[^|]*\| - \|", page)
    assert "| plain + those two (the least film CPU) | 52.50 s | 51.50 s |" in page
    assert "| the film's CPU beyond that (its renders' own extra) | -12.50 s | 0.50 s |" in page
    # 22/30 meets 0.75; 27/30 does not; CPU 40/38 meets 1.1; 52/40 does not
    assert "| film | film <= 0.75x plain manim -ql, no server running (a temporary one " \
           "starts) (2 cores) | 0.73x (22.0 s vs 30.0 s; quiet pairs) | met |" in page
    assert "0.90x (27.0 s vs 30.0 s; all pairs (no quiet pair: see load)) | **NOT met** |" \
        in page
    assert "| 1.05x (40.0 s vs 38.0 s) | met |" in page
    assert "| 1.30x (52.0 s vs 40.0 s) | **NOT met** |" in page
    assert "| before the flow: CLI start-up, server start or connect | 4.50 | 2.00 |" in page
    assert "| renders' overlap (summed renders / scene phase) | 1.80x | n/a |" in page


def test_c5_variants_reads_its_settings_and_refuses_bad_ones_in_one_line(tmp_path):
    import c5_variants  # noqa: PLC0415

    assert c5_variants.parse_variant("epochs=2, learning_rate=5e-5") == {
        "epochs": 2, "learning_rate": 5e-5}
    for bad in ("seed=3", "epochs", "epochs=two"):
        proc = subprocess.run([sys.executable, str(BENCH / "c5_variants.py"), "--pairs",
                               str(tmp_path / "none.jsonl"), "--variant", bad],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0
        assert proc.stderr.strip().count("\n") == 0 and "--variant" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, str(BENCH / "c5_variants.py"), "--pairs",
                           str(tmp_path / "none.jsonl")], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and proc.stderr.strip() == (
        f"c5_variants: no pairs file at {tmp_path / 'none.jsonl'}")
