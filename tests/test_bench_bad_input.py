"""bench/bad_input.py: its cases and its section of RESULTS.md (no CLI run, no timing)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bad_input  # noqa: E402
import common  # noqa: E402
import report  # noqa: E402


def test_cases_name_two_baselines_and_issue_27s_bad_inputs(tmp_path):
    cases = bad_input.cases(tmp_path)
    assert [name for name in cases if "(baseline)" in name] == [
        "python -c pass (baseline)", "mythloop --help (baseline)"]
    assert len(cases) >= 6
    assert (tmp_path / "a-file").is_file() and (tmp_path / "empty_scene.py").read_text() == ""


def test_cases_count_issue_38s_bad_inputs_and_unusable_backends(tmp_path):
    cases = bad_input.cases(tmp_path)
    for name in ("sweep --rounds 0", "sweep --rounds -3", "sweep --rounds abc",
                 "sweep --replicates 0", "sweep --noise -0.5", "sweep --noise 2",
                 "sweep --noise nan", "sweep --concurrency 0", "route --top-k 0",
                 "film --max-repairs 99", "history -n 0", "sweep --prompts <a folder>",
                 "sweep --prompts <100 MB file>", "sweep --results-dir <unrelated files>",
                 "tags <a binary file>", "render <a file with no Scene>",
                 "route <2,001-character query>", "film <no backend configured>"):
        assert name in cases, name
    backends = [name for name in cases if bad_input.BACKEND_CASE in name]
    assert len(backends) == 8  # sweep --judge and film --backend, each of four backends
    for name in backends:  # asked with no CLI on PATH and no endpoint listening
        argv = cases[name]
        assert argv[0] == "env" and argv[1] == f"PATH={tmp_path / 'empty-bin'}"
    assert (tmp_path / "big.yaml").stat().st_size == 100 * 1024 * 1024
    assert b"\x00" in (tmp_path / "model.bin").read_bytes()


def test_results_page_holds_the_backend_cases_to_two_seconds():
    part = _part(1.5, {"sweep --rounds 0": (0.6, 2, 1)})
    part["figures"].update(worst_backend_median_s=1.4, written=[])
    assert "| bad_input | an unusable model backend answered in one line in < 2 s (median), " \
           "nothing written | 1.40 s (slowest case) | met |" in _page(part)
    part["figures"].update(written=["state"])
    page = _page(part)
    assert "nothing written | 1.40 s (slowest case) | **NOT met** |" in page
    assert "Written by a refused command: state." in page


def _part(help_s: float, answers: dict[str, tuple[float, int, int]]) -> dict:
    rows = {"mythloop --help (baseline)": {
        "seconds": common.stats([help_s]), "over_help": common.ratio_stats([help_s], [help_s]),
        "exit": 0, "lines": 40, "first_line": "Usage: mythloop"}}
    for name, (seconds, code, lines) in answers.items():
        rows[name] = {"seconds": common.stats([seconds]),
                      "over_help": common.ratio_stats([seconds], [help_s]),
                      "exit": code, "lines": lines, "first_line": "error: a | b"}
    return {"figures": {"repeats": 1, "cases": rows,
                        "worst_median_s": max(s for s, _, _ in answers.values()),
                        "all_one_line": all(c == 2 and n == 1 for _, c, n in answers.values()),
                        "databases_left": []},
            "child_wall_s": 9.0, "load_before": [1, 1, 1], "load_after": [1, 1, 1]}


def _page(part: dict) -> str:
    return report.render_results({
        "machine": {"date_utc": "d", "cpu": "c", "cores": 2, "cores_usable": 2,
                    "memory_gb": 1.0, "os": "o", "python": "3.11.0", "packages": {},
                    "loadavg": [0.1, 0.1, 0.1], "git": "abc"},
        "total_s": 10.0, "load_end": [0.1, 0.1, 0.1], "parts": {"bad_input": part}})


def test_results_page_shows_each_answer_and_the_one_second_target():
    page = _page(_part(1.5, {"sweep --results-dir /proc/nope/x": (0.6, 2, 1),
                             "serve --cron '99 * * *'": (0.75, 2, 1)}))
    assert "## Bad input answers (bench/bad_input.py)" in page
    assert "| bad_input | each bad input answered in one line in < 1 s (median) | " \
           "0.75 s (slowest case) | met |" in page
    assert "| `serve --cron '99 * * *'` | 0.75 s (0.75 - 0.75, n=1) | 0.50x | 2 | 1 | " \
           "error: a / b |" in page  # a | in the answer does not split the table row


def test_a_slow_or_two_line_answer_misses_the_target():
    slow = _page(_part(1.5, {"sweep --results-dir /proc/nope/x": (1.2, 2, 1)}))
    assert "1.20 s (slowest case) | **NOT met** |" in slow
    wordy = _page(_part(1.5, {"sweep --results-dir /proc/nope/x": (0.5, 2, 3)}))
    assert "0.50 s (slowest case) | **NOT met** |" in wordy
