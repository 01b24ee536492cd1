"""Benchmark prompts in sweeps: the JSON rows form of --prompts, --held-out, bad rows.

Small slices of MetaTool's ToolE set (20 tools, 60 training queries, their dev queries) are
written into tmp_path from the shared benchmark files at test time; nothing depends on the
benchmark's full size.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mythloop.sweep.config import SweepConfig, load_heldout, load_sweep_prompts
from mythloop.sweep.inputs import InputError, check_inputs

METATOOL = Path("/work/shared/benchmarks/metatool")
pytestmark = pytest.mark.skipif(not (METATOOL / "train.json").is_file(),
                                reason="shared MetaTool benchmark not present")
N_TOOLS, N_TRAIN = 20, 60


@pytest.fixture(scope="module")
def bench_slice(tmp_path_factory) -> dict[str, Path]:
    """The first 20 tools (by name) that have dev queries, 3 training queries of each (60),
    and every dev query of those tools."""
    root = tmp_path_factory.mktemp("metatool-slice")
    train = json.loads((METATOOL / "train.json").read_text(encoding="utf-8"))
    dev = json.loads((METATOOL / "dev.json").read_text(encoding="utf-8"))
    tools = sorted({row["expected"] for row in dev})[:N_TOOLS]
    per_tool = N_TRAIN // N_TOOLS
    rows = [r for t in tools for r in [x for x in train if x["expected"] == t][:per_tool]]
    held = [r for r in dev if r["expected"] in tools]
    pool = root / "pool"
    for tool in tools:
        shutil.copytree(METATOOL / "pool" / tool, pool / tool)
    (root / "train.json").write_text(json.dumps(rows), encoding="utf-8")
    (root / "dev.json").write_text(json.dumps(held), encoding="utf-8")
    return {"root": root, "pool": pool, "train": root / "train.json", "dev": root / "dev.json"}


def _config(s: dict[str, Path], **kw) -> SweepConfig:
    return SweepConfig(pool=s["pool"], prompts_file=s["train"], heldout_file=s["dev"], **kw)


def test_json_rows_are_learned_prompts_and_held_out_rows_are_not(bench_slice):
    prompts, seed = load_sweep_prompts(_config(bench_slice))
    train = json.loads(bench_slice["train"].read_text())
    dev = json.loads(bench_slice["dev"].read_text())
    assert len(train) == N_TRAIN and dev
    assert [p.id for p in prompts] == [r["id"] for r in train + dev]
    assert all(p.kind == "normal" and p.learned for p in prompts[:N_TRAIN])
    assert all(p.kind == "heldout" and not p.learned for p in prompts[N_TRAIN:])
    assert [p.expected_skill for p in prompts] == [r["expected"] for r in train + dev]
    assert isinstance(seed, int)
    checked = check_inputs(_config(bench_slice))
    assert len(checked.catalog) == N_TOOLS and len(checked.prompts) == len(prompts)
    # no held-out text is a training text (the benchmark's own split guarantee, kept here)
    assert not {r["text"] for r in train} & {r["text"] for r in dev}


def test_held_out_accepts_the_yaml_heldout_section(bench_slice, tmp_path):
    import yaml

    dev = json.loads(bench_slice["dev"].read_text())[:3]
    path = tmp_path / "held.yaml"
    path.write_text(yaml.safe_dump({"heldout": [
        {"id": r["id"], "prompt": r["text"], "expected_skill": r["expected"]} for r in dev]}))
    held = load_heldout(path)
    assert [(p.id, p.kind, p.expected_skill) for p in held] == [
        (r["id"], "heldout", r["expected"]) for r in dev]


def _bad_rows(bench_slice, tmp_path, which: str, mutate) -> Path:
    rows = json.loads(bench_slice[which].read_text())
    mutate(rows)
    path = tmp_path / f"bad-{which}.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


BAD = {
    "unknown skill": ("train", lambda rows: rows[4].update(expected="no-such-tool"),
                      ("row 5", "no-such-tool", "no such skill")),
    "missing text": ("train", lambda rows: rows[6].pop("text"), ("row 7", "'text'")),
    "empty text": ("dev", lambda rows: rows[1].update(text="  "), ("row 2", "'text'")),
    "duplicate id": ("train", lambda rows: rows[9].update(id=rows[2]["id"]),
                     ("row 10", "duplicate id", "row 3")),
    "not a map": ("dev", lambda rows: rows.insert(0, "just text"), ("row 1",)),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_rows_stop_the_sweep_with_one_line_naming_file_and_row(bench_slice, tmp_path, case):
    which, mutate, needles = BAD[case]
    bad = _bad_rows(bench_slice, tmp_path, which, mutate)
    files = {"train": bench_slice["train"], "dev": bench_slice["dev"], which: bad}
    results = tmp_path / "results"
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    proc = subprocess.run(
        [sys.executable, "-m", "mythloop_app.cli", "sweep", "--pool", str(bench_slice["pool"]),
         "--prompts", str(files["train"]), "--held-out", str(files["dev"]),
         "--results-dir", str(results), "--rounds", "1"],
        capture_output=True, text=True, timeout=120, env=env)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert str(bad) in lines[0]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in proc.stderr and not results.exists()


def test_an_id_in_both_files_is_a_duplicate(bench_slice, tmp_path):
    dev = json.loads(bench_slice["dev"].read_text())
    dev[0]["id"] = json.loads(bench_slice["train"].read_text())[0]["id"]
    path = tmp_path / "dev-dup.json"
    path.write_text(json.dumps(dev))
    with pytest.raises(InputError, match=r"held-out file .*dev-dup.json row 1: duplicate id"):
        check_inputs(_config(bench_slice).model_copy(update={"heldout_file": path}))


def test_missing_held_out_file(bench_slice, tmp_path):
    with pytest.raises(InputError, match="held-out file .* does not exist"):
        check_inputs(_config(bench_slice).model_copy(
            update={"heldout_file": tmp_path / "absent.json"}))


@pytest.mark.slow  # a sweep on a benchmark slice
def test_sweep_on_a_slice_reports_held_out_rounds_and_never_learns_them(
        prefect_harness, bench_slice, tmp_path):
    from mythloop.fileio import read_jsonl
    from mythloop_flows.feedback_loop import sweep

    out = tmp_path / "sweep"
    config = _config(bench_slice, conditions=["c0", "c3"], rounds=2, results_dir=out)
    result = sweep(config)
    dev_ids = {r["id"] for r in json.loads(bench_slice["dev"].read_text())}
    for shard in ("c0-rep1", "c3-rep1"):
        turns = read_jsonl(out / shard / "turns.jsonl")
        assert len(turns) == 2 * N_TRAIN
        assert not {t["prompt_id"] for t in turns} & dev_ids
        measured = {row["prompt_id"] for row in read_jsonl(out / shard / "round_1.jsonl")}
        assert dev_ids <= measured
    report = Path(result.report).read_text(encoding="utf-8")
    section = report.split("## Held-out prompts per round", 1)[1].split("\n## ", 1)[0]
    table = [line for line in section.splitlines() if line.startswith(("| c0 ", "| c3 "))]
    assert [line.split("|")[1].strip() for line in table] == ["c0", "c0", "c3", "c3"], section
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0.0 <= metrics["per_round"]["c0"]["0"]["heldout.hit@1"]["mean"] <= 1.0
    assert json.loads((out / "sweep.json").read_text())["heldout_file"] == str(bench_slice["dev"])
