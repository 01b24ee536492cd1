"""Inputs that used to fail late (after a Prefect server started): now one line, exit 2, first.

Each case runs the real CLI in a subprocess with PREFECT_HOME pointing at a folder of its own;
"before Prefect starts" is checked by that folder staying absent (a temporary server would
create it and its database), not by timing. How fast they answer is measured by hand, not here.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def cli(tmp_path: Path, *args: object, env_extra: dict[str, str] | None = None,
        ) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env.update({"PREFECT_HOME": str(tmp_path / "prefect-home"),
                "MYTHLOOP_STATE_DIR": str(tmp_path / "state"), **(env_extra or {})})
    return subprocess.run([sys.executable, "-m", "mythloop_app.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def refused(tmp_path: Path, *args: object, names: tuple[str, ...], code: int = 2,
            env_extra: dict[str, str] | None = None) -> str:
    """Exit `code`, one `error:` line on stderr naming the problem, no traceback, no Prefect."""
    proc = cli(tmp_path, *args, env_extra=env_extra)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), lines[0]
    for needle in names:
        assert needle in lines[0], (needle, lines[0])
    assert not (tmp_path / "prefect-home").exists(), "a Prefect server was started first"
    return lines[0]


def sweep_args(results: object) -> list[object]:
    return ["sweep", "--rounds", "1", "--conditions", "c0", "--results-dir", results]


# ---- results and runs dirs ------------------------------------------------------------------


def test_sweep_results_dir_that_cannot_be_created(tmp_path):
    line = refused(tmp_path, *sweep_args("/proc/nope/x"),
                   names=("results dir /proc/nope/x cannot be created", "--results-dir"))
    assert "/proc" in line


def test_sweep_results_dir_under_a_file(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("keep me", encoding="utf-8")
    refused(tmp_path, *sweep_args(blocker / "sub" / "results"),
            names=(f"{blocker} is a file", "--results-dir"))
    assert blocker.read_text(encoding="utf-8") == "keep me"


def test_noise_study_results_dir_that_cannot_be_created(tmp_path):
    refused(tmp_path, *sweep_args("/proc/nope/x"), "--noise", "0", "0.2",
            names=("cannot be created",))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a mode-500 folder")
def test_sweep_results_dir_in_a_read_only_folder(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        refused(tmp_path, *sweep_args(locked / "results"), names=("cannot be created",))
    finally:
        locked.chmod(0o700)


def test_film_runs_dir_that_is_a_file(tmp_path):
    runs = tmp_path / "runs-file"
    runs.write_text("x", encoding="utf-8")
    refused(tmp_path, "film", "the heat equation", "--runs-dir", runs,
            names=(f"runs dir {runs} is a file", "--runs-dir"))
    assert runs.read_text(encoding="utf-8") == "x"


def test_film_runs_dir_whose_mythos_folder_is_a_file(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "mythos").write_text("x", encoding="utf-8")
    refused(tmp_path, "film", "the heat equation", "--runs-dir", runs,
            names=(str(runs / "mythos"), "is a file"))


def test_a_refused_check_leaves_no_probe_behind(tmp_path):
    from mythloop.checks import dir_problem

    root = tmp_path / "ok"
    root.mkdir()
    assert dir_problem(root / "a" / "b", "results dir") is None
    assert dir_problem(root, "results dir") is None
    assert list(root.iterdir()) == []
    assert "is a file" in dir_problem(Path(__file__), "results dir")


# ---- replay, cron, verify, plain words ------------------------------------------------------


def test_replay_of_an_unrecorded_topic(tmp_path):
    runs = tmp_path / "runs"
    line = refused(tmp_path, "film", "the wave equation", "--backend", "replay",
                   "--runs-dir", runs, names=("no recording to replay for 'the wave equation'",
                                              "the heat equation", "--backend offline"))
    assert "Euler" in line
    assert not runs.exists()


def test_replay_of_a_recorded_topic_passes_the_check():
    from mythloop.checks import replay_problem

    assert replay_problem("the heat equation") is None
    assert replay_problem("The Heat Equation") is None  # the same cassette folder


def test_replay_looks_in_the_cassette_dir_the_flow_uses(tmp_path):
    from mythloop.checks import replay_problem

    own = tmp_path / "cassettes" / "my-topic"
    own.mkdir(parents=True)
    (own / "intent.json").write_text('{"topic": "my topic", "response": "{}"}', "utf-8")
    assert replay_problem("my topic", tmp_path / "cassettes") is None
    message = replay_problem("the heat equation", tmp_path / "cassettes")
    assert message and "'my topic'" in message


@pytest.mark.parametrize(("args", "names"), [
    (["--cron", "99 * * *"], ("cron '99 * * *' is not a valid cron expression", "--cron")),
    (["--cron", "0 2 * * *", "--timezone", "Mars/Olympus"],
     ("timezone 'Mars/Olympus' is not an IANA timezone", "--timezone")),
], ids=["cron", "timezone"])
def test_serve_checks_cron_and_timezone_before_looking_for_a_server(tmp_path, args, names):
    # No server runs for this state folder: without the local check the command would say
    # "no Prefect server to serve to" (or, with one up, refuse the cron much later).
    refused(tmp_path, "serve", *args, names=names)


def test_verify_rejects_a_file_with_no_scene(tmp_path):
    for text in ("", "x = 1\n", "from manim import *\nclass Helper:\n    pass\n"):
        scene = tmp_path / "scene.py"
        scene.write_text(text, encoding="utf-8")
        proc = cli(tmp_path, "verify", scene)
        assert proc.returncode == 1, (proc.stdout, proc.stderr)
        assert proc.stdout == ""  # a rejection goes to stderr
        assert proc.stderr.strip() == (f"{scene}:1: defines no Scene subclass (a class deriving "
                                       "from Scene with a construct method); there is nothing "
                                       "to render")


def test_verify_still_passes_a_real_scene(tmp_path):
    scene = tmp_path / "ok.py"
    scene.write_text("from manim import *\n\nclass Hello(Scene):\n    def construct(self):\n"
                     "        self.add(Text('hi'))\n", encoding="utf-8")
    proc = cli(tmp_path, "verify", scene)
    assert proc.returncode == 0, proc.stdout
    assert proc.stdout.startswith("ok:")


def test_empty_prompt_is_said_in_plain_words(tmp_path):
    line = refused(tmp_path, "film", "", "--runs-dir", tmp_path / "runs",
                   names=("the prompt is empty",))
    assert "String should" not in line
    line = refused(tmp_path, "film", "x" * 2001, "--runs-dir", tmp_path / "runs",
                   names=("the prompt is 2,001 characters long, over the 2,000", "(PROMPT)"))


def test_plain_errors_name_options_not_fields():
    from pydantic import ValidationError

    from mythloop.checks import plain_errors
    from mythloop.mythos.plan.request import FilmRequest
    from mythloop.sweep import SweepConfig

    with pytest.raises(ValidationError) as info:
        FilmRequest(prompt="x", quality="z", max_repairs=11)
    text = plain_errors(info.value, {"quality": "-q/--quality"})
    assert "-q/--quality must be one of" in text and "(got 'z')" in text
    assert "--max-repairs must be at most 10 (got 11)" in text
    with pytest.raises(ValidationError) as info:
        SweepConfig(rounds=500)
    assert plain_errors(info.value) == "--rounds must be at most 100 (got 500)"


def test_sweep_option_out_of_range_in_plain_words(tmp_path):
    line = refused(tmp_path, *sweep_args(tmp_path / "r"), "--rounds", "500",
                   names=("--rounds must be at most 100 (got 500)",))
    assert "Input should" not in line


@pytest.mark.parametrize("cron", ["0 2 * * *", "*/15 * * * *", "0 0 1 jan *", "30 4 * * mon-fri",
                                  "0 0 L * *", "0 9 * * 1#2", "@daily", "0,30 8-18/2 * * 1-5"])
def test_cron_that_prefect_accepts_passes_the_local_check(cron):
    from prefect._internal.schemas.validators import validate_cron_string

    from mythloop.checks import cron_problem

    validate_cron_string(cron)  # Prefect's own check accepts it ...
    assert cron_problem(cron, "UTC") is None  # ... and so does the local one


@pytest.mark.parametrize("cron", ["99 * * *", "99 * * * *", "0 24 * * *", "0 0 0 * *",
                                  "0 0 * 13 *", "x * * * *", "*/0 * * * *", ""])
def test_cron_that_prefect_refuses_fails_the_local_check(cron):
    from prefect._internal.schemas.validators import validate_cron_string

    from mythloop.checks import cron_problem

    with pytest.raises(ValueError):
        validate_cron_string(cron)
    assert "is not a valid cron expression" in cron_problem(cron, "UTC")


def test_film_resume_of_a_folder_that_holds_no_film(tmp_path):
    empty = tmp_path / "not-a-film"
    empty.mkdir()
    refused(tmp_path, "film", "the heat equation", "--runs-dir", tmp_path / "runs", "--resume",
            empty, names=(f"--resume {empty} holds no film",))


def test_film_resume_of_another_prompts_film(tmp_path):
    other = tmp_path / "other-film"
    other.mkdir()
    (other / "manifest.json").write_text('{"prompt": "fourier series"}', encoding="utf-8")
    refused(tmp_path, "film", "the heat equation", "--runs-dir", tmp_path / "runs", "--resume",
            other, names=("is the film of 'fourier series', not of 'the heat equation'",))
