"""Bad input: one line on stderr, exit 2, no traceback, before any Prefect server, nothing lost.

Each case runs the real CLI (`python -m mythloop_app.cli`) in a subprocess, next to an earlier
results dir that must come out byte-identical. The last tests run a sweep and a film for
real to check what their terminal output says about the judge / backend and the data issues.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
POOL_SMALL = REPO / "tests" / "data" / "pool_small"
RESULTS_SMALL = REPO / "tests" / "data" / "results_small"

PROMPTS = {
    "version": 1,
    "seed": 7,
    "in_distribution": [
        {"id": "t_regex", "prompt": "My regex hangs on long input strings. How do I fix it?",
         "expected_skill": "regex-debugger", "trap_for": "naive-regex-matcher"},
        {"id": "n_pytest", "prompt": "Write pytest fixtures for my database tests.",
         "expected_skill": "pytest-fixtures"},
    ],
    "null_prompts": [{"id": "null_recipe", "prompt": "Give me a recipe for banana bread."}],
    "heldout": [{"id": "h_regex", "prompt": "A pattern match never finishes on big text.",
                 "expected_skill": "regex-debugger", "trap_for": "naive-regex-matcher",
                 "paraphrase_of": "t_regex"}],
}
BAD_SKILL = "---\nname: other-name\ndescription: a skill whose folder name differs\n---\nBody.\n"


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and folder (None) under root."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Path]:
    """A valid pool and prompts file, and an earlier sweep's results dir."""
    pool = tmp_path / "pool"
    shutil.copytree(POOL_SMALL, pool)
    prompts = tmp_path / "prompts.yaml"
    prompts.write_text(yaml.safe_dump(PROMPTS, sort_keys=False), encoding="utf-8")
    earlier = tmp_path / "earlier"
    shutil.copytree(RESULTS_SMALL, earlier)
    return {"root": tmp_path, "pool": pool, "prompts": prompts, "earlier": earlier}


def cli(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The CLI in a subprocess; the timeout only catches a hang (how fast a rejection comes is
    a benchmark figure: bench/bad_input.py)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    if cwd is not None:  # a state folder of its own: a Prefect database there would be news
        env.update(MYTHLOOP_STATE_DIR=str(cwd / "state"),
                   PREFECT_HOME=str(cwd / "state" / "prefect"))
    return subprocess.run([sys.executable, "-m", "mythloop_app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def rejected(ws: dict[str, Path], *args: object, names: tuple[str, ...]) -> str:
    """Run the CLI; assert exit 2, one stderr line naming the problem, no traceback, and the
    earlier results dir untouched. Returns the error line."""
    before = _tree(ws["earlier"])
    proc = cli(*args, cwd=ws["root"])
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    for needle in names:
        assert needle in lines[0], (needle, lines[0])
    assert not list((ws["root"] / "state").rglob("*.db")), "a Prefect server was started"
    assert _tree(ws["earlier"]) == before
    return lines[0]


def sweep_args(ws: dict[str, Path], **override: object) -> list[object]:
    opts = {"--pool": ws["pool"], "--prompts": ws["prompts"], "--results-dir": ws["earlier"],
            "--rounds": 1, **override}
    args: list[object] = ["sweep"]
    for key, value in opts.items():
        args += [key, value]
    return args


# ---- sweep: the pool ------------------------------------------------------------------------


def test_strict_sweep_names_the_invalid_skill(ws):
    bad = ws["pool"] / "real" / "wrong-folder"
    bad.mkdir()
    (bad / "SKILL.md").write_text(BAD_SKILL, encoding="utf-8")
    rejected(ws, *sweep_args(ws), "--strict",
             names=("--strict", str(bad / "SKILL.md"), "differs from its folder name"))


def test_pool_with_no_valid_skill(ws):
    pool = ws["root"] / "broken-pool"
    for name in ("one", "two"):
        (pool / name).mkdir(parents=True)
        (pool / name / "SKILL.md").write_text("no frontmatter here\n", encoding="utf-8")
    rejected(ws, *sweep_args(ws, **{"--pool": pool}),
             names=("no valid skill in pool", str(pool), "all 2 SKILL.md files are invalid"))


def test_empty_pool_folder(ws):
    pool = ws["root"] / "empty-pool"
    pool.mkdir()
    rejected(ws, *sweep_args(ws, **{"--pool": pool}),
             names=("no valid skill in pool", "holds no <name>/SKILL.md"))


def test_missing_pool_folder(ws):
    rejected(ws, *sweep_args(ws, **{"--pool": ws["root"] / "nope"}),
             names=("skill pool", "does not exist", "--pool"))


# ---- sweep: the prompts file ----------------------------------------------------------------


def test_expected_skill_not_in_the_pool(ws):
    data = json.loads(json.dumps(PROMPTS))
    data["in_distribution"][1]["expected_skill"] = "pytest-guide"
    ws["prompts"].write_text(yaml.safe_dump(data), encoding="utf-8")
    rejected(ws, *sweep_args(ws), names=("'n_pytest'", "'pytest-guide'", "not a valid skill"))


def test_expected_skill_whose_skill_md_is_invalid(ws):
    bad = ws["pool"] / "real" / "sql-helper"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: sql-helper\n---\n", encoding="utf-8")
    data = json.loads(json.dumps(PROMPTS))
    data["in_distribution"][1]["expected_skill"] = "sql-helper"
    ws["prompts"].write_text(yaml.safe_dump(data), encoding="utf-8")
    rejected(ws, *sweep_args(ws), names=("'n_pytest'", "'sql-helper'", "SKILL.md is invalid"))


@pytest.mark.parametrize(("text", "names"), [
    ("in_distribution:\n  - id: a\n    prompt: [unclosed\n", ("not valid YAML", "line")),
    ("", ("is empty",)),
    ("# only a comment\n", ("is empty",)),
    # a top-level list is the benchmark form ({"id", "text", "expected"} rows): a bad row
    ("- id: a\n  words: b\n", ("row 1 (id 'a')", "'text'")),
    ("in_distribution: just text\n", ("'in_distribution' must be a list",)),
    ("in_distribution:\n  - id: a\n", ("in_distribution entry 1", "'prompt'")),
    ("null_prompts:\n  - plain string\n", ("null_prompts entry 1", "must be a map")),
    ("in_distribution:\n  - {id: a, prompt: b, expected_skill: [x]}\n", ("'expected_skill'",)),
    ("seed: abc\nnull_prompts:\n  - {id: a, prompt: b}\n", ("'seed' must be an integer",)),
    ("version: 1\n", ("has no prompts",)),
    ("null_prompts:\n  - {id: a, prompt: b}\n  - {id: a, prompt: c}\n", ("repeats ids: a",)),
], ids=["yaml-syntax", "empty", "comment-only", "top-list-row-without-text", "section-not-list",
        "entry-no-prompt", "entry-not-map", "skill-not-string", "seed-not-int", "no-prompts",
        "duplicate-ids"])
def test_malformed_prompts_file(ws, text, names):
    ws["prompts"].write_text(text, encoding="utf-8")
    rejected(ws, *sweep_args(ws), names=("prompts file", str(ws["prompts"]), *names))


def test_missing_prompts_file(ws):
    rejected(ws, *sweep_args(ws, **{"--prompts": ws["root"] / "nope.yaml"}),
             names=("prompts file", "does not exist"))


# ---- sweep: the results dir and the options -------------------------------------------------


def test_results_dir_of_another_sweep(ws):
    meta_path = ws["earlier"] / "sweep.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta_path.write_text(json.dumps({**meta, "fingerprint": "0123456789abcdef"}), encoding="utf-8")
    rejected(ws, *sweep_args(ws), names=(str(ws["earlier"]), "holds a different sweep"))


def test_results_dir_with_a_foreign_sweep_json(ws):
    rejected(ws, *sweep_args(ws), names=(str(ws["earlier"]), "no fingerprint"))


def test_results_dir_that_is_a_file(ws):
    target = ws["root"] / "a-file"
    target.write_text("x", encoding="utf-8")
    rejected(ws, *sweep_args(ws, **{"--results-dir": target}), names=("is a file",))
    assert target.read_text(encoding="utf-8") == "x"


def test_failed_check_leaves_no_results_dir(ws):
    ws["prompts"].write_text("", encoding="utf-8")
    fresh = ws["root"] / "fresh" / "results"
    rejected(ws, *sweep_args(ws, **{"--results-dir": fresh}), names=("is empty",))
    assert not fresh.exists() and not fresh.parent.exists()


def test_unknown_judge_and_condition(ws):
    rejected(ws, *sweep_args(ws, **{"--judge": "gpt-oracle"}),
             names=("unknown judge 'gpt-oracle'", "simulated"))
    rejected(ws, *sweep_args(ws, **{"--conditions": "c0,c9"}),
             names=("unknown condition(s) c9",))
    rejected(ws, *sweep_args(ws, **{"--rounds": 500}), names=("--rounds", "100"))


# ---- route and analyze ----------------------------------------------------------------------


@pytest.mark.parametrize("query", ["", "   "])
def test_route_empty_query(ws, query):
    rejected(ws, "route", query, "--pool", ws["pool"], names=("query is empty",))


def test_route_store_under_a_missing_folder(ws):
    store = ws["root"] / "missing" / "verdicts.db"
    rejected(ws, "route", "my regex hangs", "--pool", ws["pool"], "--store", store,
             names=("--store", str(store.parent), "does not exist"))
    assert not store.parent.exists()


@pytest.mark.parametrize("value", ["7", "-0.1"])
def test_analyze_abstain_threshold_out_of_range(ws, value):
    rejected(ws, "analyze", ws["earlier"], "--abstain-threshold", value,
             names=("--abstain-threshold", "between 0 and 1"))


def test_film_unknown_backend(ws):
    rejected(ws, "film", "the heat equation", "--backend", "gpt", "--runs-dir",
             ws["root"] / "runs", names=("backend", "'offline'"))
    assert not (ws["root"] / "runs").exists()


# ---- the models behind the CLI and the Prefect UI form --------------------------------------


def test_judge_and_film_backend_are_validated_by_the_models():
    from pydantic import ValidationError

    from mythloop.mythos.plan.request import FILM_BACKENDS, FilmRequest
    from mythloop.sweep import SweepConfig
    from mythloop.sweep.config import JUDGES

    with pytest.raises(ValidationError, match="judge"):
        SweepConfig(judge="gpt-oracle")
    with pytest.raises(ValidationError, match="backend"):
        FilmRequest(prompt="x", backend="gpt")
    assert SweepConfig(judge="oracle").simulated
    assert set(JUDGES) == {"simulated", "oracle", "gemini", "claude", "codex", "openai"}
    assert "offline" in FILM_BACKENDS and "replay" in FILM_BACKENDS


def test_the_ui_forms_offer_only_valid_judges_and_backends():
    from prefect.utilities.callables import parameter_schema

    from mythloop.mythos.plan.request import FILM_BACKENDS
    from mythloop.sweep.config import JUDGES
    from mythloop_flows.feedback_loop import sweep
    from mythloop_flows.film import film

    sweep_defs = parameter_schema(sweep.fn).model_dump()["definitions"]
    assert sweep_defs["SweepConfig"]["properties"]["judge"]["enum"] == list(JUDGES)
    film_defs = parameter_schema(film.fn).model_dump()["definitions"]
    assert film_defs["FilmRequest"]["properties"]["backend"]["enum"] == list(FILM_BACKENDS)


def test_a_ui_started_sweep_with_bad_inputs_writes_nothing(prefect_harness, ws):
    """The flow checks its inputs itself: no sweep.json, no results dir."""
    from mythloop.sweep import SweepConfig
    from mythloop_flows.feedback_loop import sweep

    data = json.loads(json.dumps(PROMPTS))
    data["heldout"][0]["expected_skill"] = "no-such-skill"
    ws["prompts"].write_text(yaml.safe_dump(data), encoding="utf-8")
    fresh = ws["root"] / "fresh"
    state = sweep(SweepConfig(conditions=["c0"], rounds=1, pool=ws["pool"],
                              prompts_file=ws["prompts"], results_dir=fresh),
                  return_state=True)
    assert state.is_failed()
    assert "'no-such-skill'" in state.message
    assert not fresh.exists()
    before = _tree(ws["earlier"])
    state = sweep(SweepConfig(conditions=["c0"], rounds=1, pool=ws["pool"],
                              prompts_file=ws["prompts"], results_dir=ws["earlier"]),
                  return_state=True)
    assert state.is_failed()
    assert _tree(ws["earlier"]) == before


# ---- honest output: what a real sweep and film print ----------------------------------------


def test_sweep_names_invalid_skills_and_its_judge_and_analyze_prints_data_issues(
        prefect_harness, ws):
    from typer.testing import CliRunner

    from mythloop_app.cli import app

    bad = ws["pool"] / "real" / "wrong-folder"
    bad.mkdir()
    (bad / "SKILL.md").write_text(BAD_SKILL, encoding="utf-8")
    results = ws["root"] / "results"
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", "--conditions", "c0", "--rounds", "1", "--pool",
                              str(ws["pool"]), "--prompts", str(ws["prompts"]),
                              "--results-dir", str(results)])
    assert res.exit_code == 0, res.output
    warning = [line for line in res.stderr.splitlines() if "wrong-folder" in line]
    assert warning and warning[0].startswith("warning: invalid skill left out of the pool")
    assert "judge: simulated (no model: verdicts from a simulated judge" in res.stdout
    assert "judge:   simulated (no model" in res.stdout
    assert "1 invalid SKILL.md left out of the pool" in res.stdout
    meta = json.loads((results / "sweep.json").read_text(encoding="utf-8"))
    assert [Path(i["file"]).parent.name for i in meta["catalog_issues"]] == ["wrong-folder"]
    report = (results / "report.md").read_text(encoding="utf-8")
    issues = report.split("## Data issues", 1)[1]
    assert "wrong-folder/SKILL.md" in issues and "invalid skill left out" in issues

    analyzed = runner.invoke(app, ["analyze", str(results)])
    assert analyzed.exit_code == 0, analyzed.output
    assert "data issues: 1" in analyzed.stdout
    assert "wrong-folder/SKILL.md: invalid skill left out of the pool" in analyzed.stdout

    oracle = runner.invoke(app, ["sweep", "--conditions", "c0", "--rounds", "1", "--judge",
                                 "oracle", "--pool", str(POOL_SMALL), "--prompts",
                                 str(ws["prompts"]), "--results-dir",
                                 str(ws["root"] / "oracle")])
    assert oracle.exit_code == 0, oracle.output
    assert "judge:   oracle (no model" in oracle.stdout
    assert "warning" not in oracle.stderr


def test_film_names_its_offline_backend(prefect_harness, tmp_path):
    from typer.testing import CliRunner

    from mythloop_app.cli import app

    # a prompt of its own: the session's stage cache must not serve other tests' films
    res = CliRunner().invoke(app, ["film", "labels of the offline backend", "--backend",
                                   "offline", "--no-render", "--runs-dir", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    labelled = [line for line in res.stdout.splitlines() if line.startswith("backend:")]
    assert labelled == ["backend: offline (no model: deterministic offline stand-ins wrote "
                        "every stage)"] * 2


def test_analyze_prints_the_data_issues_it_found(ws):
    from typer.testing import CliRunner

    from mythloop_app.cli import app

    turns = ws["earlier"] / "c0-rep1" / "turns.jsonl"
    turns.write_text(turns.read_text(encoding="utf-8") + "{not json\n", encoding="utf-8")
    lines = len(turns.read_text(encoding="utf-8").splitlines())
    res = CliRunner().invoke(app, ["analyze", str(ws["earlier"])])
    assert res.exit_code == 0, res.output
    metrics = json.loads((ws["earlier"] / "metrics.json").read_text(encoding="utf-8"))
    assert f"data issues: {len(metrics['data_issues'])} " in res.stdout
    assert f"c0-rep1/turns.jsonl:{lines}: malformed JSON" in res.stdout


# ---- issue 38: range errors, files, folders: one line each, nothing written ------------------


@pytest.mark.parametrize(("args", "names"), [
    (["sweep", "--rounds", "0"], ("--rounds must be at least 1 (got 0)", "mythloop sweep --help")),
    (["sweep", "--rounds", "-3"], ("--rounds must be at least 1 (got -3)",)),
    (["sweep", "--rounds", "abc"], ("--rounds must be a whole number",)),
    (["sweep", "--replicates", "0"], ("--replicates must be at least 1 (got 0)",)),
    (["sweep", "--noise", "-0.5"], ("--noise must be at least 0", "(got -0.5)")),
    (["sweep", "--noise", "2"], ("--noise must be at most 1", "(got 2)")),
    (["sweep", "--noise", "nan"], ("--noise must be a number, not nan",)),
    (["sweep", "--concurrency", "0"], ("--concurrency must be at least 1 (got 0)",)),
    (["route", "my regex hangs", "--top-k", "0"], ("--top-k must be at least 1 (got 0)",)),
    (["film", "the heat equation", "--max-repairs", "99"],
     ("--max-repairs must be at most 10 (got 99)",)),
    (["history", "-n", "0"], ("-n/--last must be at least 1 (got 0)",)),
    (["sweep", "--no-such-option"], ("No such option: --no-such-option",)),
], ids=["rounds-0", "rounds-neg", "rounds-abc", "replicates-0", "noise-neg", "noise-2",
        "noise-nan", "concurrency-0", "top-k-0", "max-repairs-99", "history-n-0", "unknown"])
def test_a_usage_error_is_one_plain_line(ws, args, names):
    line = rejected(ws, *args, names=names)
    assert "Invalid value" not in line and "Input should" not in line
    assert not (ws["root"] / "state").exists()


def test_prompts_that_are_a_folder_or_too_big(ws):
    rejected(ws, *sweep_args(ws, **{"--prompts": ws["root"]}),
             names=("prompts file", "is a folder, not a file", "--prompts FILE"))
    big = ws["root"] / "big.yaml"
    with big.open("wb") as fh:  # sparse: 100 MB of nothing, on no disk
        fh.truncate(100 * 1024 * 1024)
    rejected(ws, *sweep_args(ws, **{"--prompts": big}),
             names=("prompts file", "is larger than 16 MB"))


def test_results_dir_of_unrelated_files_is_refused_unless_forced(ws):
    mine = ws["root"] / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes\n", encoding="utf-8")
    rejected(ws, *sweep_args(ws, **{"--results-dir": mine}),
             names=(str(mine), "holds files that are not a sweep's (notes.txt)", "--force"))
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    from mythloop.sweep import SweepConfig
    from mythloop.sweep.inputs import check_inputs

    forced = SweepConfig(pool=ws["pool"], prompts_file=ws["prompts"], results_dir=mine,
                         force=True)
    assert check_inputs(forced).prompts  # --force: accepted
    assert forced.fingerprint() == forced.model_copy(update={"force": False}).fingerprint()


def test_tags_on_a_binary_file(ws):
    binary = ws["root"] / "model.bin"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    rejected(ws, "tags", binary, names=(str(binary), "is a binary file, not model text"))
    assert not (ws["root"] / "state").exists()


def test_route_query_is_capped_like_a_film_prompt(ws):
    rejected(ws, "route", "x" * 2001, "--pool", ws["pool"],
             names=("2,001 characters", "over the 2,000"))
    assert not (ws["root"] / "state").exists()


def test_render_of_a_file_with_no_scene_leaves_no_out_dir(ws):
    scene = ws["root"] / "helpers.py"
    scene.write_text("def helper():\n    return 1\n", encoding="utf-8")
    out = ws["root"] / "out"
    rejected(ws, "render", scene, "--out", out, names=("defines no Scene subclass",))
    assert not out.exists() and not (ws["root"] / "state").exists()


@pytest.mark.parametrize("args", [
    ["route", "", "--pool", "{pool}"],
    ["tags", "{root}/nope.txt"],
    ["analyze", "{root}"],
    ["compare", "{root}", "{root}"],
    ["history", "-n", "0"],
    ["render", "{root}/nope.py"],
], ids=["route", "tags", "analyze", "compare", "history", "render"])
def test_error_paths_leave_no_state_folder(ws, args):
    """The commands that prepare the state folder before they check their input remove the
    folder again when they refuse it (and created it)."""
    filled = [a.format(root=ws["root"], pool=ws["pool"]) for a in args]
    proc = cli(*filled, cwd=ws["root"])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr
    assert not (ws["root"] / "state").exists()


def test_a_sweep_that_ran_under_other_ranking_settings_is_not_resumed(ws, monkeypatch):
    """The MYTHLOOP_* ranking settings (here C5's fine-tune epochs) are part of what a rerun
    must match: a sweep that ran with MYTHLOOP_C5_EPOCHS=2 is not resumed, and mixed, by a
    rerun without it (one line naming the setting), and resumes with it set again."""
    from mythloop.sweep import SweepConfig
    from mythloop.sweep.inputs import InputError, check_inputs
    from mythloop_flows.feedback_loop import _prepare_results_dir

    results = ws["root"] / "c5-sweep"
    config = SweepConfig(pool=ws["pool"], prompts_file=ws["prompts"], results_dir=results,
                         conditions=["c0", "c5"])
    monkeypatch.setenv("MYTHLOOP_C5_EPOCHS", "2")
    _prepare_results_dir(config, results)
    record = json.loads((results / "sweep.json").read_text(encoding="utf-8"))
    assert record["ranking_settings"] == {"MYTHLOOP_C5_EPOCHS": 2}
    assert check_inputs(config).prompts  # the same settings: it resumes
    monkeypatch.delenv("MYTHLOOP_C5_EPOCHS")
    with pytest.raises(InputError, match="MYTHLOOP_C5_EPOCHS was 2, is the default now"):
        check_inputs(config)
    ws["earlier"] = results  # (rejected() checks that it is left as it was)
    rejected(ws, *sweep_args(ws, **{"--results-dir": results, "--conditions": "c0,c5"}),
             names=(str(results), "ran under other ranking settings",
                    "MYTHLOOP_C5_EPOCHS was 2, is the default now"))
    # a setting spelt out at its default is no change (sweeps from before resume as they were)
    monkeypatch.setenv("MYTHLOOP_W_HARM", "1.5")  # the default, spelt out
    assert config.fingerprint() == SweepConfig(
        pool=ws["pool"], prompts_file=ws["prompts"], conditions=["c0", "c5"]).fingerprint()
