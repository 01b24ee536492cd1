"""Bad input is answered before the heavy modules load (issue 27: under a second).

Each case runs the real CLI in a fresh interpreter and lists, as it exits, which of the heavy
modules were imported: none of them may be (the time it takes is measured in
bench/bad_input.py, not here), and no state folder is written.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The config models the CLI reads its defaults from (mythloop.sweep.config,
# mythloop.mythos.plan.request) may load; the settings model (pydantic_settings), the sweep's
# measurement side, the router and the render code may not.
HEAVY = ("pydantic_settings", "prefect", "torch", "sentence_transformers", "manim", "numpy",
         "mythloop.settings_model", "mythloop.sweep.condition", "mythloop.router",
         "mythloop.mythos.sandbox.render", "mythloop.mythos.pipeline")
PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('HEAVY:', *sorted({m.split('.')[0] if not m.startswith("
    "'mythloop') else m for m in sys.modules if any(m == h or m.startswith(h + '.') "
    f"for h in {HEAVY!r})}}), file=sys.stderr))\n"
    "sys.argv = ['mythloop', *sys.argv[1:]]\n"
    "from mythloop_app.cli import main\n"
    "main()\n"
)


def _cases(tmp: Path) -> dict[str, list[str]]:
    (tmp / "a-file").write_text("x", encoding="utf-8")
    return {
        "results-dir": ["sweep", "--rounds", "1", "--results-dir", "/proc/nope/x"],
        "runs-dir": ["film", "the heat equation", "--runs-dir", str(tmp / "a-file")],
        "replay": ["film", "the wave equation", "--backend", "replay"],
        "cron": ["serve", "--cron", "99 * * *"],
        "timezone": ["serve", "--timezone", "Mars/Olympus"],
        # issue 53: the validation layer answers before anything heavy loads
        "turn-timeout": ["sweep", "--turn-timeout", "nan"],
        "stray-word": ["sweep", "--rounds", "2", "4"],
        "store": ["route", "my regex hangs", "--store", str(tmp / "a-file")],
        "baseline": ["compare", str(tmp), "--baseline", "2026-13-45"],
        "analyze": ["analyze", str(tmp / "nope")],
        "embedder": ["sweep", "--embedder", str(tmp / "no-model")],
    }


@pytest.mark.parametrize("case", ["results-dir", "runs-dir", "replay", "cron", "timezone",
                                  "turn-timeout", "stray-word", "store", "baseline", "analyze",
                                  "embedder"])
def test_bad_input_is_answered_before_heavy_modules_load(tmp_path, case):
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env["MYTHLOOP_STATE_DIR"] = str(tmp_path / "state")
    proc = subprocess.run([sys.executable, "-c", PROBE, *_cases(tmp_path)[case]], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 2 and lines[0].startswith("error: "), proc.stderr
    assert lines[1] == "HEAVY:", f"loaded before the answer: {lines[1]}"
    assert not (tmp_path / "state").exists()
    assert not (tmp_path / ".mythloop").exists()


def test_a_command_that_runs_still_prepares_the_state_folder(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env["MYTHLOOP_STATE_DIR"] = str(tmp_path / "state")
    proc = subprocess.run([sys.executable, "-m", "mythloop_app", "history"], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "state").is_dir()
