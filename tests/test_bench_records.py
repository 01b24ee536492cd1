"""bench/records.py, bench/report.py, bench/compare.py: the results page is the records'."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import common  # noqa: E402
import compare  # noqa: E402
import records  # noqa: E402
import report  # noqa: E402
import run_all  # noqa: E402


def test_the_page_is_given_back_byte_for_byte_by_its_records(tmp_path):
    page = tmp_path / "RESULTS.md"
    assert report.main(["--out", str(page)]) == 0
    assert page.read_bytes() == (BENCH / "RESULTS.md").read_bytes()
    assert report.main(["--check", "--out", str(BENCH / "RESULTS.md")]) == 0
    page.write_text(page.read_text() + "hand edit\n")
    assert report.main(["--check", "--out", str(page)]) == 1


def test_no_section_or_figure_of_the_page_is_missing_from_the_records():
    recs = records.load()
    page = (BENCH / "RESULTS.md").read_text()
    titles = {report.TITLES.get(p, p) for p in {r["part"] for r in recs}}
    sections = re.findall(r"^## (.+)$", page, flags=re.M)
    assert sections[:2] == ["Targets", "History of the headline figures"]
    assert set(sections[2:]) == titles and len(sections[2:]) == len(titles)
    # every figure row of a part's table is a record, at the commit the row names
    known = {(r["figure"], r.get("commit")) for r in recs}
    rows = re.findall(r"^\| `([^`]+)` \| [^|]* \| ([^|]+) \|", page, flags=re.M)
    assert len(rows) > 500
    for figure, commit in rows:
        assert (figure.replace("/", "|"), commit.strip()) in known or (
            figure, commit.strip()) in known, figure


def _rec(part, figure, values, commit="aaa", load=(0.5, 0.5, 0.5), **extra):
    return {"part": part, "figure": figure, "unit": "s", "values": values, "commit": commit,
            "date": f"2026-12-0{len(commit)} 10:00 UTC", "load_before": list(load),
            "load_after": list(load), "cores": 2, "run": f"{part} {commit}", "_at": commit,
            **extra}


def test_a_section_comes_and_goes_with_its_records_and_a_busy_figure_is_marked():
    quiet = _rec("bad_input", "worst_median_s", [0.8, 0.9, 1.2])
    busy = _rec("bad_input", "worst_median_s", [1.4, 1.5], commit="bbbb", load=(3.5, 3, 3))
    page = report.render([quiet])
    assert "## Bad input answers (bench/bad_input.py)" in page
    assert "| bad_input | each bad input answered in one line in < 1 s (median) | 0.9 s " \
           "(0.8 - 1.2, n=3) | met | aaa | 2026-12-03 10:00 UTC | 0.5 -> 0.5 | yes |" in page
    page = report.render([quiet, busy])  # the later record is the latest figure
    assert "| 1.45 s (1.4 - 1.5, n=2) | **NOT met** | bbbb | 2026-12-04 10:00 UTC | " \
           "3.5 -> 3.5 **busy** | no |" in page
    assert "| 0.9 s (0.8 - 1.2, n=3) | aaa |" in page  # still in the history
    page = report.render([_rec("router", "sizes.skills=80.vectorised", [0.2])])
    assert "Bad input answers" not in page
    assert "| bad_input | each bad input answered in one line in < 1 s (median) | " \
           "not measured |" in page


def test_flatten_keeps_every_repeated_value_and_names_units():
    figures = {"film_s": common.stats([21.0, 23.0, 22.0]), "same_metrics": True,
               "sizes": [{"skills": 80, "vectorised": {"p50_ms": 0.2, "min_ms": 0.1,
                                                       "max_ms": 0.3, "n": 5}}],
               "film_over_plain": common.ratio_stats([2.0], [4.0]), "peak_rss_mb": 300.0,
               "load_before": [1, 1, 1], "note": "x" * 500}
    got = {r["figure"]: r for r in records.flatten(figures)}
    assert got["film_s"]["values"] == [21.0, 23.0, 22.0] and got["film_s"]["unit"] == "s"
    assert got["same_metrics"]["text"] == "True"
    assert got["sizes.skills=80.vectorised"]["summary"]["median"] == 0.2
    assert got["sizes.skills=80.vectorised"]["unit"] == "ms"
    assert got["film_over_plain"]["unit"] == "x" and got["peak_rss_mb"]["unit"] == "MB"
    assert "load_before" not in got and "note" not in got


def test_run_all_turns_a_part_into_records_and_a_failed_part_into_none(tmp_path):
    machine = common.machine_info()
    results = {"overhead": {"figures": {"bare_ms": common.stats([3.0, 4.0])},
                            "harness": {"wall_s": 9.0, "cpu_s": 8.0, "peak_tree_rss_mb": 100.0},
                            "load_before": [0.1, 0.1, 0.1], "load_after": [0.2, 0.2, 0.2],
                            "started": "2026-12-01 10:00:00 UTC"},
               "film": {"error": "boom", "harness": {"wall_s": 1.0}}}
    recs = run_all.to_records(results, machine, {"overhead": {"n": 20}}, quick=True)
    assert {r["part"] for r in recs} == {"overhead"}
    assert {r["figure"] for r in recs} >= {"bare_ms", "harness.cpu_s", "harness.peak_tree_rss_mb"}
    assert recs[0]["command"] == "python bench/run_all.py --only overhead --quick --set n=20"
    bare = next(r for r in recs if r["figure"] == "bare_ms")
    assert bare["values"] == [3.0, 4.0] and bare["load_before"] == [0.1, 0.1, 0.1]
    assert bare["date"] == "2026-12-01 10:00 UTC" and bare["run"].endswith("(quick)")
    assert bare["commit"] == machine["git"] and bare["packages"]["prefect"] != "absent"
    records.append(recs, tmp_path)
    records.append(recs, tmp_path)  # appended, never rewritten
    assert len((tmp_path / "overhead.jsonl").read_text().splitlines()) == 2 * len(recs)
    assert json.loads((tmp_path / "overhead.jsonl").read_text().splitlines()[0])["quick"]


@pytest.mark.slow  # a child process under the harness (about 20 s on a busy machine)
def test_a_part_script_runs_under_the_harness_and_records_its_figures(tmp_path):
    """`python bench/intervals.py --set sims=2`: the harness runs the part in a child, measures
    its tree's CPU and memory and the load, appends records and writes the page."""
    import subprocess

    page = tmp_path / "page.md"
    proc = subprocess.run([sys.executable, str(BENCH / "intervals.py"), "--set", "sims=2",
                           "--quiet-wait", "0", "--records", str(tmp_path / "r"), "--out",
                           str(page)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    recs = records.load(tmp_path / "r")
    got = {r["figure"]: r for r in recs}
    assert got["sims"]["values"] == [2] and got["harness.cpu_s"]["values"][0] > 0
    assert got["harness.peak_tree_rss_mb"]["values"][0] > 0
    assert all(r["command"].endswith("--only intervals --set sims=2") for r in recs)
    assert page.read_text() == report.render(recs)
    bad = subprocess.run([sys.executable, str(BENCH / "run_all.py"), "--only", "intervals",
                          "--set", "sims"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--set takes KEY=VALUE" in bad.stderr


def test_compare_says_whether_a_difference_is_beyond_the_noise():
    recs = [_rec("film", "film_s", [20.0, 20.5, 19.8, 20.2]),
            _rec("film", "film_s", [30.0, 30.4, 29.7, 30.1], commit="bbbb"),
            _rec("film", "plain_s", [30.0, 25.0, 35.0]),
            _rec("film", "plain_s", [31.0, 24.0, 34.0], commit="bbbb"),
            {**_rec("film", "kept", None), "summary": {"median": 1.0, "min": 0.9, "max": 1.1,
                                                       "n": 3}},
            {**_rec("film", "kept", None, commit="bbbb"), "values": [2.0, 2.1]}]
    lines = compare.compare(recs, "aaa", "bbbb", show_all=True)
    by = {line.split(":")[0]: line for line in lines}
    assert "beyond noise" in by["film film_s"] and "+49" in by["film film_s"]
    assert "within noise" in by["film plain_s"]
    assert "cannot tell (only a median and range kept)" in by["film kept"]
    assert compare.compare(recs, "zzz", "bbbb")[0].startswith("compare: no records match")
