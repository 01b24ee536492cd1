"""sweep.json through its model (mythloop.sweep.records.SweepRecord): what the sweep writes
reads back unchanged, an older file still loads (and is rewritten in its own shape), and a
malformed one is one clear line for every reader (analysis, compare, report)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mythloop.analysis.load import AnalysisError, load_results
from mythloop.fileio import write_json_atomic
from mythloop.sweep.config import SweepConfig
from mythloop.sweep.records import SweepRecord, SweepRecordError, read_sweep_record
from mythloop_app.cli import app

RESULTS_SMALL = Path(__file__).parent / "data" / "results_small"


def _new_record(tmp_path: Path) -> dict:
    """A sweep.json as the sweep flow writes one today (every key it writes)."""
    config = SweepConfig(conditions=["c0", "c4"], rounds=3, replicates=2,
                         results_dir=tmp_path / "r")
    return {
        "sweep_id": "r", "fingerprint": config.fingerprint(),
        "config": config.model_dump(mode="json"), "conditions": config.conditions,
        "rounds": 3, "replicates": 2, "judge": "simulated", "simulated": True,
        "judge_options": config.judge_options.model_dump(mode="json"),
        "model": "simulated judge", "embedder": "all-MiniLM-L6-v2 (bundled)",
        "pool": "/p", "prompts_file": "/p.yaml", "prompts": 12, "heldout_file": None,
        "catalog_issues": [{"file": "/p/bad/SKILL.md", "problem": "no description"}],
        "seed": 7, "replicate_seeds": {"1": 11, "2": 12},
        "started_utc": "2026-01-01T00:00:00+00:00", "finished_utc": None,
        "mythloop_version": "0.1.0", "python": "3.11.9",
    }


def test_round_trip(tmp_path):
    data = _new_record(tmp_path)
    root = tmp_path / "r"
    root.mkdir()
    write_json_atomic(root / "sweep.json", SweepRecord.from_json(data).to_json())
    on_disk = json.loads((root / "sweep.json").read_text())
    assert on_disk == data  # same keys, same values: the model adds and drops nothing
    record = read_sweep_record(root)
    assert record.conditions == ["c0", "c4"] and record.catalog_issues[0].problem
    assert record.to_json() == data
    finished = record.model_copy(update={"finished_utc": "2026-01-01T01:00:00+00:00"})
    assert finished.to_json() == {**data, "finished_utc": "2026-01-01T01:00:00+00:00"}


def test_an_older_file_loads_in_its_own_shape(tmp_path):
    """results_small/sweep.json predates the fingerprint, the config dump and seeds by
    replicate (a list): it loads, and writing it back changes nothing, unknown keys kept."""
    data = json.loads((RESULTS_SMALL / "sweep.json").read_text())
    assert isinstance(data["replicate_seeds"], list) and "fingerprint" not in data
    record = read_sweep_record(RESULTS_SMALL)
    assert record.seeds_by_replicate() == {"1": 1001, "2": 1002}
    assert record.fingerprint is None and record.abstain_threshold is None
    assert record.to_json() == data
    extra = SweepRecord.from_json({**data, "written_by_a_later_version": {"x": 1}})
    assert extra.to_json()["written_by_a_later_version"] == {"x": 1}
    assert load_results(RESULTS_SMALL).sweep.sweep_id == "small-test"


@pytest.mark.parametrize(("content", "names"), [
    ('{"rounds": "six"}', "'rounds'"),
    ('{"conditions": ["c0", "c9"]}', "'c0', 'c3', 'c4' or 'c5'"),
    ('{"catalog_issues": [{"file": "x"}]}', "catalog_issues"),
    ("[1, 2]", "not a JSON object"),
    ("{not json", "not readable JSON"),
])
def test_malformed_file_is_one_line(tmp_path, content, names):
    (tmp_path / "sweep.json").write_text(content)
    with pytest.raises(SweepRecordError) as caught:
        read_sweep_record(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and names in message and "sweep.json" in message
    with pytest.raises(AnalysisError) as analysed:
        load_results(tmp_path)
    assert "\n" not in str(analysed.value) and names in str(analysed.value)


def test_readers_answer_a_malformed_file_with_one_line(tmp_path):
    """`mythloop analyze` and `mythloop compare` on a results dir whose sweep.json names an
    unknown condition: exit 2, one error line, no traceback."""
    bad, good = tmp_path / "bad", tmp_path / "good"
    shutil.copytree(RESULTS_SMALL, bad)
    shutil.copytree(RESULTS_SMALL, good)
    meta = json.loads((bad / "sweep.json").read_text())
    meta["conditions"] = ["c0", "c9"]
    (bad / "sweep.json").write_text(json.dumps(meta))
    runner = CliRunner()
    for args in (["analyze", str(bad)], ["compare", str(good), str(bad)]):
        out = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert out.exit_code == 2, (args, out.output)
        lines = [ln for ln in out.output.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, out.output)
        assert "'conditions.1'" in lines[0] and "'c0', 'c3', 'c4' or 'c5'" in lines[0]
        assert "Traceback" not in out.output
