"""The sweep's failure hook: a failed run leaves a markdown artifact naming the failed step."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefect import flow, task
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

from mythloop_tasks.hooks import SWEEP_FAILURE_KEY, record_sweep_failure


@task(name="learning-turn-explodes", retries=0)
def _explode(message: str) -> None:
    raise ValueError(message)


@flow(name="condition-run-under-test")
def _inner(message: str) -> None:
    _explode(message)


@flow(name="sweep-under-test", on_failure=[record_sweep_failure])
def _outer(message: str) -> None:
    _inner.with_options(flow_run_name="c3-rep2")(message)


def _failure_artifact(flow_run_id) -> str:
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])))
    found = [a for a in artifacts if a.key == SWEEP_FAILURE_KEY]
    assert found, f"no {SWEEP_FAILURE_KEY} artifact on flow run {flow_run_id}: {artifacts}"
    assert found[0].type == "markdown"
    return str(found[0].data)


def test_hook_names_the_failed_task_in_its_subflow(prefect_harness):
    state = _outer("judge answered nonsense #4711", return_state=True)
    assert state.is_failed()
    markdown = _failure_artifact(state.state_details.flow_run_id)
    row = next(line for line in markdown.splitlines() if "learning-turn-explodes" in line)
    assert "c3-rep2" in row  # the subflow it ran in
    assert "judge answered nonsense #4711" in row  # its error
    assert "Failed" in row


def test_a_failed_real_sweep_records_its_failure(prefect_harness, tmp_path: Path):
    from mythloop.sweep import SweepConfig
    from mythloop_flows.feedback_loop import sweep

    # Inputs are checked before anything runs, so the failure here is a model that cannot load.
    config = SweepConfig(conditions=["c0"], rounds=1, embedder=str(tmp_path / "no-such-model"),
                         results_dir=tmp_path / "results")
    state = sweep(config, return_state=True)
    assert state.is_failed()
    markdown = _failure_artifact(state.state_details.flow_run_id)
    assert "c0-rep1" in markdown  # the condition subflow that failed
    assert "no-such-model" in markdown
    assert str(tmp_path / "results") in markdown
    assert not (tmp_path / "results").exists()  # it never ran a round: nothing left behind


def test_a_sweep_with_bad_inputs_records_its_failure(prefect_harness, tmp_path: Path):
    from mythloop.sweep import SweepConfig
    from mythloop_flows.feedback_loop import sweep

    empty_pool = tmp_path / "pool"
    empty_pool.mkdir()
    config = SweepConfig(conditions=["c0"], rounds=1, pool=empty_pool,
                         results_dir=tmp_path / "results")
    state = sweep(config, return_state=True)
    assert state.is_failed()
    markdown = _failure_artifact(state.state_details.flow_run_id)
    assert "no valid skill in pool" in markdown and "the flow itself raised" in markdown
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("message", ["a | pipe", "line one\nline two"])
def test_failure_table_stays_one_row(prefect_harness, message):
    state = _outer(message, return_state=True)
    markdown = _failure_artifact(state.state_details.flow_run_id)
    rows = [line for line in markdown.splitlines() if "learning-turn-explodes" in line]
    assert len(rows) == 1
    assert rows[0].count("|") == 5  # the pipe in the error does not split the table
