"""The Prefect task publishes the headline table and the report under stable keys."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data" / "results_small"


def test_artifact_key_is_prefect_safe():
    from mythloop_tasks.analysis import artifact_key

    assert artifact_key("Nightly Sweep_2", "headline") == "sweep-nightly-sweep-2-headline"
    assert artifact_key("--x--", "report") == "sweep-x-report"
    with pytest.raises(ValueError, match="sweep_key"):
        artifact_key("!!!", "report")


def test_analyze_results_publishes_versioned_artifacts(prefect_harness, tmp_path):
    from prefect import flow
    from prefect.artifacts import Artifact
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from mythloop_tasks.analysis import analyze_results

    root = tmp_path / "results"
    shutil.copytree(DATA, root)

    @flow
    def nightly() -> str:
        return str(analyze_results(root, "Small Test").report_path)

    assert nightly() == str(root / "report.md")
    nightly()  # a second night under the same keys

    table = Artifact.get("sweep-small-test-headline")
    report = Artifact.get("sweep-small-test-report")
    assert table is not None and report is not None
    assert table.type == "table" and report.type == "markdown"
    rows = json.loads(table.data)
    assert {(r["condition"], r["round"]) for r in rows} == {  # rounds labelled from 1
        ("c0", 1),
        ("c0", 2),
        ("c3", 1),
        ("c3", 2),
    }
    c3_last = next(r for r in rows if (r["condition"], r["round"]) == ("c3", 2))
    # two trap pairs x two replicates: an interval over the prompts, inside [0, 1]
    assert re.fullmatch(r"0\.750 \[0\.\d{3}, (0\.\d{3}|1\.000)\]", c3_last["trap-win rate"])
    assert "SIMULATED JUDGE" in report.data
    assert str(root / "hit_at_3.png") in report.data  # figure links point at the files
    with get_client(sync_client=True) as client:
        versions = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["sweep-small-test-report"]))
        )
    assert len(versions) == 2
