"""A noise study end to end under the Prefect harness: layout, resume, `analyze D`, CLI input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mythloop.sweep import JudgeOptions, SweepConfig
from mythloop_app.cli import app

LEVELS = (0.0, 0.4)


@pytest.fixture(scope="module")
def study(prefect_harness, tmp_path_factory) -> tuple[Path, dict, SweepConfig]:
    from mythloop_flows.feedback_loop import sweep

    root = tmp_path_factory.mktemp("study") / "D"
    config = SweepConfig(conditions=["c0", "c4"], rounds=2, replicates=1, results_dir=root)
    return root, sweep(config, noise_levels=[0.4, 0.0]), config


@pytest.mark.slow  # the study fixture: a sweep per noise level
def test_study_layout_one_ordinary_sweep_per_level(study):
    root, result, config = study
    assert result.results_dir == str(root) and result.levels == list(LEVELS)
    assert [r.results_dir for r in result.level_results] == [
        str(root / f"noise-{x:.2f}") for x in LEVELS]
    meta = json.loads((root / "sweep.json").read_text())
    assert meta["study"] == "noise" and meta["levels"] == list(LEVELS)
    assert meta["level_dirs"] == {"0.00": "noise-0.00", "0.40": "noise-0.40"}
    assert meta["finished_utc"]
    for level in LEVELS:
        level_dir = root / f"noise-{level:.2f}"
        level_meta = json.loads((level_dir / "sweep.json").read_text())
        assert level_meta["judge_options"]["noise"] == level
        # the level is exactly what a single-level sweep with that noise would have written
        single = config.model_copy(update={
            "results_dir": level_dir,
            "judge_options": JudgeOptions(noise=level)})
        assert level_meta["fingerprint"] == single.fingerprint()
        for name in ("metrics.json", "report.md", "hit_at_3.png"):
            assert (level_dir / name).is_file(), name
        for shard in ("c0-rep1", "c4-rep1"):
            assert json.loads((level_dir / shard / "progress.json").read_text())[
                "completed_rounds"] == [0, 1]
    report = (root / "report.md").read_text()
    # 1 replicate: the prompts are the unit, so the study concludes, and says what it covers
    assert "**Conclusion**: C4 vs C0:" in report
    assert "prompt variation only" in report.split("## Noise table")[0]
    metrics = json.loads((root / "metrics.json").read_text())
    trap = metrics["table"]["0.00"]["differences"]["c4-c0"]["trap.trap_win_rate"]
    assert trap["lo"] is not None and -1.0 <= trap["lo"] <= trap["hi"] <= 1.0
    assert "| noise | metric | c0 | c4 | c4-c0 |" in report
    for level in ("| 0 | trap-win rate |", "| 0.4 | trap-win rate |"):
        assert level in report
    assert (root / "noise_curve.png").read_bytes()[:4] == b"\x89PNG"
    metrics = json.loads((root / "metrics.json").read_text())
    assert metrics["levels"] == list(LEVELS) and set(metrics["table"]) == {"0.00", "0.40"}


@pytest.mark.slow  # the study fixture: a sweep per noise level
def test_analyze_rebuilds_the_study_from_its_files(study):
    root, _, _ = study
    before = (root / "metrics.json").read_text()
    level_report = root / "noise-0.40" / "report.md"
    for path in (root / "metrics.json", root / "report.md", root / "noise_curve.png", level_report):
        path.unlink()
    out = CliRunner().invoke(app, ["analyze", str(root)], env={"COLUMNS": "200"})
    assert out.exit_code == 0, out.output
    assert "noise study" in out.output and "SIMULATED JUDGE" in out.output
    assert (root / "metrics.json").read_text() == before
    assert (root / "noise_curve.png").is_file() and level_report.is_file()
    assert "**Conclusion**" in (root / "report.md").read_text()


@pytest.mark.slow  # the study fixture: a sweep per noise level
def test_rerun_resumes_every_level_and_rejects_another_sweep(study):
    from mythloop_flows.feedback_loop import sweep

    root, _, config = study
    rounds = root / "noise-0.00" / "c4-rep1" / "round_1.jsonl"
    stamp = rounds.stat().st_mtime_ns
    again = sweep(config, noise_levels=list(LEVELS))
    assert again.failed_turns == 0
    assert rounds.stat().st_mtime_ns == stamp  # finished rounds were skipped, not redone
    other = config.model_copy(update={"conditions": ["c0", "c3"]})
    with pytest.raises(ValueError, match="different noise study"):
        sweep(other, noise_levels=list(LEVELS))
    with pytest.raises(ValueError, match="different sweep"):  # a single level on a study dir
        sweep(config)


def test_cli_noise_levels_and_conditions_mix():
    out = CliRunner().invoke(app, ["sweep", "--judge", "gemini", "--noise", "0", "0.2"])
    assert out.exit_code == 2 and "need --judge simulated" in out.output
    out = CliRunner().invoke(app, ["sweep", "--noise", "0", "1.5"])
    assert out.exit_code == 2 and "--noise must be at most 1.0 (got 1.5)" in out.output
    # a word after the levels is not a condition: each list belongs to its own option
    out = CliRunner().invoke(app, ["sweep", "--noise", "0", "0.2", "c3"])
    assert out.exit_code == 2 and "unexpected word(s) 'c3'" in out.output
    out = CliRunner().invoke(app, ["sweep", "--conditions", "c0", "c9"], env={"COLUMNS": "200"})
    assert out.exit_code == 2 and "c0, c3, c4 and/or c5" in " ".join(out.output.split())


def test_nightly_deployment_takes_noise_levels(monkeypatch):
    from mythloop_app import deployments as serve_entry

    nightly, _ = serve_entry.build_deployments(cron="0 2 * * *", timezone="UTC")
    assert nightly.parameters["noise_levels"] is None  # default: one ordinary sweep
    monkeypatch.setenv("MYTHLOOP_NIGHTLY_NOISE_LEVELS", "0.4, 0,0.2")
    nightly, _ = serve_entry.build_deployments(cron="0 2 * * *", timezone="UTC")
    assert nightly.parameters["noise_levels"] == [0.0, 0.2, 0.4]
    assert SweepConfig.model_validate(nightly.parameters["config"]) == SweepConfig(
        replicates=serve_entry.NIGHTLY_REPLICATES)


def test_artifact_keys_per_judge_and_noise_level():
    from mythloop.sweep.study import sweep_key
    from mythloop_tasks.analysis import artifact_key

    assert artifact_key(sweep_key("simulated", 0.2), "report") == "sweep-simulated-noise-0-20-report"
    assert artifact_key(sweep_key("simulated", 0.0), "report") == "sweep-simulated-noise-0-00-report"
    assert artifact_key(sweep_key("oracle", 0.2), "report") == "sweep-oracle-report"
    assert artifact_key(sweep_key("gemini", 0.2), "headline") == "sweep-gemini-headline"
