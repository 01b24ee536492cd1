"""Smoke runs of each benchmark's core at minimal sizes: they run and agree; no timing asserted."""

from __future__ import annotations

import json
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


def test_stats_and_ratio():
    st = common.stats([3.0, 1.0, 2.0, 10.0])
    assert (st["min"], st["median"], st["max"], st["n"]) == (1.0, 2.5, 10.0, 4)
    assert st["values"] == [3.0, 1.0, 2.0, 10.0]  # every repeated value goes to the record
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
    assert result["headline"]["wall_with_startup_s"] > 0  # the targets' figures (report.py)
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

    first = film._film(tmp_path / "runs", "the heat equation", render=False, fresh=True)
    again = film._film(tmp_path / "runs", "the heat equation", render=False)
    assert first["ok"] and again["ok"]
    assert first["manifest"]["model_calls"] > 0
    assert again["manifest"]["model_calls"] == 0
    assert first["manifest"].get("renders", []) == []  # no render requested, none ran


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


def test_c5_variants_reads_its_settings_and_refuses_bad_ones_in_one_line(tmp_path):
    import c5_variants  # noqa: PLC0415

    assert c5_variants.parse_variant("epochs=2, learning_rate=5e-5") == {
        "epochs": 2, "learning_rate": 5e-5}
    missing = tmp_path / "none.jsonl"
    for bad in ("seed=3", "epochs", "epochs=two"):
        proc = subprocess.run([sys.executable, str(BENCH / "c5_variants.py"), "--set",
                               f"pairs={missing}", "--set", f"variants={json.dumps([bad])}",
                               "--records", str(tmp_path / "r")],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and proc.stdout == ""
        assert proc.stderr.strip().count("\n") == 0 and "variant" in proc.stderr, proc.stderr
    proc = subprocess.run([sys.executable, str(BENCH / "c5_variants.py"), "--set",
                           f"pairs={missing}", "--records", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and proc.stderr.strip() == (
        f"c5_variants: no pairs file at {missing}: pass --set pairs=STATE/models/ft-*/pairs.jsonl")
    proc = subprocess.run([sys.executable, str(BENCH / "c5_variants.py"), "--set", "pair=x",
                           "--records", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and proc.stderr.strip().startswith(
        "run_all: c5_variants takes no 'pair'; --set takes one of: pairs, sweep_json")
    assert not (tmp_path / "r").exists()  # refused before anything was written


def test_c5_scale_makes_a_pool_of_distinct_skills_and_refuses_too_few_rounds(tmp_path):
    import c5_scale  # noqa: PLC0415

    from mythloop.router.ranker import full_text  # noqa: PLC0415
    from mythloop.skills import load_catalog  # noqa: PLC0415

    if not (common.METATOOL / "pool").is_dir():
        pytest.skip("no MetaTool data here")
    pool, prompts = c5_scale.make_pool(tmp_path, 450, per_tool=1)
    skills = load_catalog(pool).skills
    assert len(skills) == 450 and len({full_text(s) for s in skills}) == 450
    learned = json.loads(prompts.read_text())
    assert learned and all(sum(r["expected"] == e for r in learned) == 1
                           for e in {r["expected"] for r in learned})
    proc = subprocess.run([sys.executable, str(BENCH / "c5_scale.py"), "--set", "rounds=1",
                           "--records", str(tmp_path / "r")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and proc.stderr.strip().count("\n") == 0
    assert "rounds >= 2" in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()
