"""bench/bad_input.py: its cases and its section of RESULTS.md (no CLI run, no timing)."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import bad_input  # noqa: E402


def test_cases_name_three_baselines_and_issue_27s_bad_inputs(tmp_path):
    cases = bad_input.cases(tmp_path)
    assert [name for name in cases if "(baseline)" in name] == [
        "python -c pass (baseline)", "import typer (baseline)", "mythloop --help (baseline)"]
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
