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
