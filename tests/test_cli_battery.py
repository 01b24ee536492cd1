"""A battery of bad command lines, every subcommand: one `error:` line, exit 2, nothing written.

Each case runs the real CLI app in this process (typer's CliRunner calls the same
`_Group.main` the installed `mythloop` does), in a fresh folder with a state dir of its own
that must stay absent: no state folder, no Prefect server (its database would be under it),
and the folder's files byte-identical afterwards. The cases cover each class of value the
validation layer (mythloop_app.params) checks: paths (missing, wrong kind, symlink loops,
FIFOs, too long, not UTF-8, under a file), files by content (SQLite header, model folder
shape, size caps), numbers (inf, nan, 0, negative), dates, enumerations, host addresses,
stray words and flags that cannot apply together. A few run as real subprocesses too, for
what only a real process has: bytes that are not UTF-8 in argv, the resume line's
executable. Help and --version are checked at 80 and 120 columns.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mythloop_app.cli import app

REPO = Path(__file__).resolve().parents[1]
POOL_SMALL = REPO / "tests" / "data" / "pool_small"
RESULTS_SMALL = REPO / "tests" / "data" / "results_small"

LOOP = "{t}/loop"  # a symlink to itself
FILE = "{t}/a-file"  # a small text file
EMPTY = "{t}/empty"  # an empty folder
BIG = "{t}/big.py"  # a sparse 64 MB file
FIFO = "{t}/fifo"  # reading it would never end
NOT_DB = "{t}/notes.db"  # text, not SQLite
SCENE = "{t}/scene.py"  # a valid scene file
RES = "{t}/results"  # a sweep's results dir (a copy of tests/data/results_small)
BOGUS = "{t}/bogus-tags.md"  # model text whose tag has verdict=bogus

# (id, argv, words the one line must hold)
CASES = [
    # ---- stray words: never read as a condition, a noise level or a replicate count
    ("sweep-stray-condition", ["sweep", "c4"], ("unexpected word(s) 'c4'", "mythloop sweep")),
    ("sweep-replicates-2-1", ["sweep", "--replicates", "2", "1"], ("unexpected word(s) '1'",)),
    ("sweep-rounds-2-4", ["sweep", "--rounds", "2", "4"], ("unexpected word(s) '4'",)),
    ("sweep-noise-list-then-word", ["sweep", "--noise", "0", "0.2", "extra"],
     ("unexpected word(s) 'extra'",)),
    ("sweep-conditions-then-option-then-word",
     ["sweep", "--conditions", "c0", "c3", "--rounds", "2", "c4"], ("unexpected word(s) 'c4'",)),
    ("route-two-queries", ["route", "one", "two"], ("unexpected word(s) 'two'",)),
    ("film-two-prompts", ["film", "one", "two"], ("unexpected word(s) 'two'",)),
    ("history-word", ["history", "7"], ("unexpected word(s) '7'",)),
    ("doctor-word", ["doctor", "now"], ("unexpected word(s) 'now'",)),
    ("analyze-two-dirs", ["analyze", RES, RES], ("unexpected word(s)",)),
    ("unknown-option", ["sweep", "--no-such-option"], ("No such option: --no-such-option",)),
    ("unknown-command", ["sweeep"], ("No such command", "sweeep")),
    # ---- numbers: finite, in range
    ("turn-timeout-neg", ["sweep", "--turn-timeout", "-5"], ("not more than 0", "(--turn-timeout)")),
    ("turn-timeout-nan", ["sweep", "--turn-timeout", "nan"], ("not a finite number",
                                                               "(--turn-timeout)")),
    ("turn-timeout-0", ["sweep", "--turn-timeout", "0"], ("not more than 0",)),
    ("turn-timeout-inf", ["sweep", "--turn-timeout", "inf"], ("not a finite number",)),
    ("turn-timeout-text", ["sweep", "--turn-timeout", "soon"], ("'soon' is not a number",)),
    ("turn-timeout-huge", ["sweep", "--turn-timeout", "1e300"], ("over a week",)),
    ("render-timeout-inf", ["film", "x", "--render-timeout", "inf"],
     ("render timeout inf is not a finite number", "(--render-timeout)")),
    ("render-timeout-nan", ["film", "x", "--render-timeout", "nan"], ("not a finite number",)),
    ("render-timeout-0", ["film", "x", "--render-timeout", "0"], ("not more than 0",)),
    ("render-timeout-neg", ["film", "x", "--render-timeout", "-5"], ("not more than 0",)),
    ("film-timeout-inf", ["film", "x", "--timeout", "inf"], ("(--timeout)", "not a finite")),
    ("render-cmd-timeout-inf", ["render", SCENE, "--timeout", "inf"], ("(--timeout)",)),
    ("server-startup-timeout-nan", ["server", "--startup-timeout", "nan"],
     ("(--startup-timeout)",)),
    ("noise-nan", ["sweep", "--noise", "nan"], ("--noise must be a number, not nan",)),
    ("noise-level-2", ["sweep", "--noise", "0", "2"], ("--noise must be at most 1",)),
    ("rounds-0", ["sweep", "--rounds", "0"], ("--rounds must be at least 1 (got 0)",)),
    ("replicates-abc", ["sweep", "--replicates", "abc"], ("--replicates must be a whole number",)),
    ("cold-skills-1.5", ["sweep", "--cold-skills", "1.5"], ("--cold-skills 1.5 is outside 0..1",)),
    ("top-k-0", ["route", "x", "--top-k", "0"], ("--top-k must be at least 1",)),
    ("max-repairs-99", ["film", "x", "--max-repairs", "99"], ("--max-repairs must be at most 10",)),
    ("abstain-threshold-7", ["analyze", RES, "--abstain-threshold", "7"],
     ("--abstain-threshold", "between 0 and 1")),
    ("port-70000", ["server", "--port", "70000"], ("--port must be at most 65535",)),
    ("preview-port-neg", ["serve", "--preview-port", "-1"], ("--preview-port must be at least 0",)),
    ("history-n-0", ["history", "-n", "0"], ("-n/--last must be at least 1",)),
    # ---- paths
    ("prompts-symlink-loop", ["sweep", "--prompts", LOOP], ("is a symlink loop", "(--prompts)")),
    ("prompts-folder", ["sweep", "--prompts", EMPTY], ("is a folder, not a file",
                                                        "--prompts FILE")),
    ("prompts-missing", ["sweep", "--prompts", "{t}/nope.yaml"], ("prompts file",
                                                                   "does not exist")),
    ("prompts-fifo", ["sweep", "--prompts", FIFO], ("not a regular file",)),
    ("held-out-missing", ["sweep", "--held-out", "{t}/nope.json"], ("(--held-out)",)),
    ("pool-a-file", ["sweep", "--pool", FILE], ("skill pool", "is a file, not a folder",
                                                "(--pool)")),
    ("pool-loop", ["route", "x", "--pool", LOOP], ("is a symlink loop", "(--pool)")),
    ("results-dir-5000", ["sweep", "--results-dir", "{t}/" + "r" * 5000],
     ("over the 4,095 a path may have", "(--results-dir)")),
    ("results-dir-long-name", ["sweep", "--results-dir", "{t}/" + "r" * 300],
     ("a name 300 bytes long", "(--results-dir)")),
    ("results-dir-under-a-file", ["sweep", "--results-dir", FILE + "/sub"],
     ("is a file", "(--results-dir)")),
    ("results-dir-not-utf8", ["sweep", "--results-dir", "{t}/r\udcff"],
     ("is not valid UTF-8", "\\xff", "(--results-dir)")),
    ("runs-dir-a-file", ["film", "x", "--runs-dir", FILE], ("runs dir", "(--runs-dir)")),
    ("runs-dir-5000", ["film", "x", "--runs-dir", "{t}/" + "r" * 5000], ("(--runs-dir)",)),
    ("resume-missing", ["film", "x", "--resume", "{t}/nope"], ("run dir", "(--resume)")),
    ("compare-out-under-a-file", ["compare", RES, RES, "--out", FILE + "/compare.md"],
     ("(--out)",)),
    ("compare-out-a-folder", ["compare", RES, RES, "--out", EMPTY], ("is a folder", "(--out)")),
    ("compare-missing-a", ["compare", "{t}/nope", "--baseline", "last"],
     ("does not exist", "(A)")),
    ("analyze-missing", ["analyze", "{t}/nope"], ("does not exist", "(RESULTS_DIR)")),
    ("analyze-not-a-sweep", ["analyze", EMPTY], ("holds no sweep.json",)),
    ("render-out-a-file", ["render", SCENE, "--out", FILE], ("render dir", "(--out)")),
    ("tags-folder", ["tags", EMPTY], ("is a folder, not a file",)),
    ("tags-missing", ["tags", "{t}/nope.txt"], ("does not exist",)),
    # ---- files by content
    ("route-store-not-sqlite", ["route", "x", "--store", NOT_DB],
     ("is not a SQLite database", "(--store)")),
    ("route-store-folder", ["route", "x", "--store", EMPTY], ("is a folder", "(--store)")),
    ("route-store-missing-folder", ["route", "x", "--store", "{t}/missing/v.db"],
     ("does not exist", "(--store)")),
    ("promote-store-not-sqlite", ["models", "promote", "--store", NOT_DB, "--held-out", FILE],
     ("is not a SQLite database", "(--store)")),
    ("promote-store-missing", ["models", "promote", "--store", "{t}/nope.db", "--held-out", FILE],
     ("does not exist", "(--store)")),
    ("embedder-missing-folder", ["sweep", "--embedder", "{t}/no-model"],
     ("embedding model", "does not exist", "(--embedder)")),
    ("embedder-not-a-model", ["sweep", "--embedder", EMPTY],
     ("without modules.json or config.json", "(--embedder)")),
    ("embedder-name-not-cached", ["sweep", "--embedder", "no-such-org/no-such-model"],
     ("'no-such-org/no-such-model' is neither a folder here nor in the Hugging Face cache",
      "(--embedder)")),
    ("verify-64mb", ["verify", BIG], ("is larger than 1 MB", "(FILE)")),
    ("render-64mb", ["render", BIG], ("is larger than 1 MB",)),
    ("verify-fifo", ["verify", FIFO], ("not a regular file",)),
    ("tags-verdict-bogus", ["tags", BOGUS], ("verdict 'bogus'", "HELPFUL, HARMFUL, NEUTRAL")),
    # ---- text, dates, enumerations, addresses
    ("route-query-not-utf8", ["route", "ab\udcff"], ("not valid UTF-8", "(QUERY)")),
    ("film-prompt-not-utf8", ["film", "\udcff\udcfe"], ("not valid UTF-8", "(PROMPT)")),
    ("route-query-too-long", ["route", "x" * 2001], ("2,001 characters", "over the 2,000")),
    ("baseline-not-a-date", ["compare", RES, "--baseline", "2026-13-45"],
     ("2026-13-45 is not a date", "(--baseline)")),
    ("baseline-word", ["compare", RES, "--baseline", "yesterday"], ("(--baseline)",)),
    ("baseline-and-b", ["compare", RES, RES, "--baseline", "last"], ("give two results dirs",)),
    ("baseline-last-no-history", ["compare", RES, "--baseline", "last"],
     ("nothing to compare", "with yet", "rerun the sweep")),
    ("history-metric-bogus", ["history", "--metric", "bogus"], ("--metric 'bogus'",)),
    ("judge-bogus", ["sweep", "--judge", "gpt-oracle"], ("unknown judge 'gpt-oracle'",)),
    ("condition-bogus", ["sweep", "--conditions", "c0", "c9"], ("unknown condition(s) c9",)),
    ("film-quality-bogus", ["film", "x", "-q", "z"], ("-q/--quality",)),
    ("render-quality-bogus", ["render", SCENE, "-q", "z"], ("-q must be one of",)),
    ("render-strict-alone", ["render", SCENE, "--strict"], ("pass --layout",)),
    ("host-999", ["server", "--host", "999.1.1.1"], ("host '999.1.1.1' is not a valid address",
                                                      "(--host)")),
    ("host-space", ["server", "--host", "bad host"], ("(--host)",)),
    ("cron-bogus", ["serve", "--cron", "99 * * *"], ("not a valid cron expression",)),
    ("serve-wait-inf", ["serve", "--wait", "inf"], ("wait inf is not a finite number", "(--wait)")),
    ("serve-wait-neg", ["serve", "--wait", "-1"], ("wait -1 is negative", "(--wait)")),
    ("timezone-bogus", ["serve", "--timezone", "Mars/Olympus"], ("not an IANA timezone",)),
    ("models-remove-unknown", ["models", "remove", "nope"], ("no model 'nope'",)),
    # ---- flags that cannot apply together
    ("no-render-burn-subtitles", ["film", "x", "--no-render", "--burn-subtitles"],
     ("--burn-subtitles would do nothing without a render", "pass --render")),
    ("no-render-voice", ["film", "x", "--no-render", "--voice", "espeak"],
     ("--voice espeak would do nothing without a render",)),
    ("voice-without-render", ["film", "x", "--voice", "espeak"], ("without a render",)),
    ("several-noise-levels-oracle", ["sweep", "--noise", "0", "0.5", "--judge", "oracle"],
     ("several --noise levels need --judge simulated",)),
]


def _tree(root: Path) -> dict[str, bytes | str | None]:
    """Every entry under root: a file's bytes (a sparse or special file: its size/kind)."""
    out: dict[str, bytes | str | None] = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[key] = "link:" + os.readlink(path)
        elif path.is_fifo():
            out[key] = "fifo"
        elif path.is_file():
            size = path.stat().st_size
            out[key] = path.read_bytes() if size < 1 << 20 else f"size:{size}"
        else:
            out[key] = None
    return out


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh folder with the inputs the cases name, and a state dir (absent) of its own."""
    from mythloop_app.commands import runtime

    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "a-file").write_text("x\n", encoding="utf-8")
    (tmp_path / "empty").mkdir()
    with (tmp_path / "big.py").open("wb") as fh:
        fh.truncate(64 << 20)  # sparse: 64 MB on no disk
    os.mkfifo(tmp_path / "fifo")
    # Should a reader ever open the FIFO (a check gone missing), it gets a byte and the end of
    # the file, and the case fails instead of hanging the suite.
    threading.Thread(target=lambda: (tmp_path / "fifo").write_bytes(b"x"), daemon=True).start()
    (tmp_path / "notes.db").write_text("not a database\n", encoding="utf-8")
    (tmp_path / "scene.py").write_text(
        "from manim import *\n\n\nclass Hello(Scene):\n    def construct(self):\n"
        "        self.add(Text('hi'))\n", encoding="utf-8")
    (tmp_path / "bogus-tags.md").write_text(
        '<skill-used name="regex-debugger" verdict="bogus" reason="x"/>\n', encoding="utf-8")
    shutil.copytree(RESULTS_SMALL, tmp_path / "results")
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("MYTHLOOP_BACKEND", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))  # (absent: an empty cache)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(runtime, "_PREPARED", [])  # this case prepares its own state dir
    return tmp_path


@pytest.mark.parametrize(("argv", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_command_line_is_one_line_exit_2_nothing_written(place, argv, names):
    args = [a.replace("{t}", str(place)) for a in argv]
    before = _tree(place)
    res = CliRunner().invoke(app, args)
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr, res.exception)
    assert isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.stdout + res.stderr
    assert res.stdout == "", res.stdout
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    for needle in names:
        assert needle.replace("{t}", str(place)) in lines[0], (needle, lines[0])
    assert not (place / "state").exists(), "the state folder (or a Prefect server) was made"
    assert _tree(place) == before


def test_every_subcommand_has_a_case():
    """A new subcommand comes with its bad-input cases here."""
    from typer.main import get_command

    group = get_command(app)
    names = set(group.commands) | {f"models {n}" for n in group.commands["models"].commands}
    covered = {c[1][0] for c in CASES} | {" ".join(c[1][:2]) for c in CASES}
    assert names - {"models"} <= covered, names - covered


# ---- help and --version ----------------------------------------------------------------------

def _command_paths() -> list[list[str]]:
    from typer.main import get_command

    group = get_command(app)
    paths = [[]]
    for name, cmd in group.commands.items():
        paths.append([name])
        paths += [[name, sub] for sub in getattr(cmd, "commands", {})]
    return paths


@pytest.mark.parametrize("columns", [80, 120])
def test_help_reads_whole_at_80_and_120_columns(columns):
    """Every help: nothing cut with "...", no line past the terminal, no fake <bool> value on a
    flag, and the text wrapped by the formatter (descriptions flow into one paragraph)."""
    for path in _command_paths():
        res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
        assert res.exit_code == 0, (path, res.output)
        text = res.stdout
        where = " ".join(path) or "mythloop"
        body = [line for line in text.splitlines() if not line.startswith("Usage:")]
        assert all("..." not in line for line in body), (where, text)
        assert max(len(line) for line in text.splitlines()) <= columns, (where, text)
        assert "<bool>" not in text and "Show this message and exit." in text, (where, text)
    wide = CliRunner().invoke(app, ["sweep", "--help"], env={"COLUMNS": str(columns)}).stdout
    # one paragraph, wrapped to the width: the docstring's own line break is not kept
    assert "report.md and plots into" in " ".join(wide.split())
    assert "and plots\n  into" not in wide


def test_version():
    from importlib.metadata import version

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout == f"mythloop {version('mythloop')}\n"


# ---- as real processes: argv bytes, the installed command, leaving nothing -------------------

EXE = Path(sys.executable).with_name("mythloop")


def test_real_processes_answer_in_one_line_and_leave_nothing(tmp_path):
    """Bytes that are not UTF-8 on the command line, and the other classes, through the
    installed `mythloop` itself, several at once: one line, exit 2, no state folder."""
    (tmp_path / "a-file").write_text("x\n", encoding="utf-8")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    cases = {
        "query-bytes": [b"route", b"my regex \xff\xfe hangs"],
        "path-bytes": [b"sweep", b"--results-dir", os.fsencode(tmp_path) + b"/r\xff"],
        "prompts-loop": [b"sweep", b"--prompts", os.fsencode(tmp_path / "loop")],
        "stray": [b"sweep", b"--replicates", b"2", b"1"],
        "no-render-voice": [b"film", b"x", b"--no-render", b"--voice", b"espeak"],
        "host": [b"server", b"--host", b"999.1.1.1"],
    }
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL",
                                                            "MYTHLOOP_BACKEND")}
    env.update(MYTHLOOP_STATE_DIR=str(tmp_path / "state"),
               PREFECT_HOME=str(tmp_path / "state" / "prefect"), LC_ALL="C.UTF-8")
    procs = {name: subprocess.Popen([os.fsencode(EXE), *args], cwd=tmp_path, env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for name, args in cases.items()}
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        lines = [line for line in err.decode("utf-8").splitlines() if line.strip()]
        assert proc.returncode == 2, (name, out, err)
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, err)
        assert b"Traceback" not in out + err, name
        if name.endswith("bytes"):  # said as \xNN, never a surrogate escape or an error
            assert "\\xff" in lines[0] and "not valid UTF-8" in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "loop"]


def test_resume_line_starts_with_the_executable_as_typed(tmp_path):
    """The resume command runs as printed from where the user is: the script path as typed
    (a bare name only when PATH finds that very file), or `python -m mythloop_app`."""
    probe = ("import sys; from mythloop_app.commands.runtime import resume_command; "
             "print(resume_command(add={'--results-dir': 'R'}))")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    typed = subprocess.run([sys.executable, "-c",
                            f"import sys; sys.argv = ['.venv/bin/mythloop', 'sweep']; {probe}"],
                           capture_output=True, text=True, env=env, check=True)
    assert typed.stdout.strip() == ".venv/bin/mythloop sweep --results-dir R"
    on_path = subprocess.run([sys.executable, "-c",
                              f"import sys; sys.argv = [{str(EXE)!r}, 'sweep']; {probe}"],
                             capture_output=True, text=True, check=True,
                             env={**env, "PATH": f"{EXE.parent}:/usr/bin:/bin"})
    assert on_path.stdout.strip() == "mythloop sweep --results-dir R"
    module = subprocess.run([sys.executable, "-c", (
        "import sys; sys.orig_argv = ['.venv/bin/python', '-m', 'mythloop_app', 'sweep']; "
        f"sys.argv = ['/x/mythloop_app/__main__.py', 'sweep']; {probe}")],
        capture_output=True, text=True, env=env, check=True)
    assert module.stdout.strip() == ".venv/bin/python -m mythloop_app sweep --results-dir R"


def test_progress_lines_stop_when_a_stop_is_under_way(capsys):
    """After Ctrl-C or SIGTERM the console gets the command's one `interrupted; ...` line,
    not the progress lines of scenes and turns that end because of the stop."""
    from mythloop.procs import STOPPING
    from mythloop_tasks.common import say

    say("[film] rendering 3 scene(s), 2 at a time")
    STOPPING.set()
    try:
        say("[film] render-scene-02 -> render interrupted (Ctrl-C or SIGTERM)")
    finally:
        STOPPING.clear()
    assert capsys.readouterr().out == "[film] rendering 3 scene(s), 2 at a time\n"
