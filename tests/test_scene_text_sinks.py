"""Scene- and model-derived text is data (docs/sandbox.md, attack table): one test per sink.

The hostile text holds what a scene or a model reply could print or name: OSC 52 (clipboard
write), OSC 0 (window title), OSC 8 (hyperlink), CSI 2J (clear screen), 8-bit CSI and DCS,
bidi overrides and isolates, a zero-width space, C0 controls, DEL, a lone surrogate (a file
name that is not UTF-8); and for artifacts, markdown images, links and raw HTML. Each sink is
called as the code calls it, and its output is checked character by character.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from mythloop.mythos.code.scenes import SceneUnit
from mythloop.mythos.plan.prompts import repair_prompt
from mythloop.mythos.records import FilmManifest
from mythloop.mythos.sandbox.layout import Finding
from mythloop.mythos.sandbox.render import RenderResult, _namespaces_work
from mythloop.mythos.sandbox.sandbox_classify import classify
from mythloop.mythos.scene_policy import FilmFailed, SceneFailed, film_failure
from mythloop.mythos.summary import film_summary
from mythloop.textsafe import clean_line, clean_text, md_code, md_text

ESCAPES = ("\x1b]52;c;cHduZWQ=\x07"  # OSC 52: write the clipboard
           "\x1b]0;pwned-title\x1b\\"  # OSC 0: the window title
           "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\"  # OSC 8: a hyperlink
           "\x1b[2J\x1b[H"  # CSI: clear the screen, cursor home
           "\x9b31m\x90qDCS\x9c"  # 8-bit CSI, 8-bit DCS to ST
           "\x1bP1$r\x1b\\\x1b(0\x1b7")  # DCS, charset switch, save cursor
DISGUISE = "\u202eevil\u202c \u2066iso\u2069 zero\u200bwidth \ufeff"
CONTROLS = "\x00\x07\x08\x0b\x0c\x7f\r"
HOSTILE = f"boom {ESCAPES} {DISGUISE} {CONTROLS} bad\udcffname"
MARKDOWN = ("![pixel](https://evil.example/pixel.png) <img src=https://evil.example/a.png> "
            "[click](https://evil.example/) <script>x</script> www.evil.example "
            "https://evil.example/raw | cell ` tick")
EVIL = HOSTILE + " " + MARKDOWN


def assert_terminal_safe(text: str, *, newlines: bool = False) -> None:
    """No C0 control (bar newline and tab where NEWLINES), no DEL or C1, no ESC, no format
    character (bidi overrides and isolates, zero-width), no surrogate; the escape sequences'
    parameters gone with them."""
    allowed = "\n\t" if newlines else ""
    bad = [f"U+{ord(c):04X}" for c in text
           if (ord(c) < 0x20 and c not in allowed) or 0x7F <= ord(c) <= 0x9F
           or unicodedata.category(c) in ("Cf", "Cs")]
    assert not bad, f"{bad} in {text!r}"
    assert "pwned-title" not in text and "cHduZWQ" not in text and "evil.example/\\" not in text


def assert_markdown_inert(markdown: str, *, code: bool = False) -> None:
    """A CommonMark parser (with tables) finds no image, link or raw HTML in MARKDOWN (nor,
    unless it is a CODE span, the raw text of one)."""
    assert_terminal_safe(markdown, newlines=True)
    found = []
    for token in MarkdownIt("commonmark").enable("table").parse(markdown):
        for tok in [token, *(token.children or [])]:
            if tok.type in ("image", "link_open", "html_inline", "html_block"):
                found.append((tok.type, tok.content or tok.attrs))
    assert not found, found
    for raw in () if code else ("![", "](", "<img", "<script", "](https"):
        assert raw not in markdown


# -- the cleaner -------------------------------------------------------------------------
def test_the_cleaners_keep_the_text_and_drop_what_a_terminal_would_act_on():
    line = clean_line(HOSTILE)
    assert_terminal_safe(line)
    assert line.startswith("boom ") and "click" in line and "evil" in line
    assert "DCS" not in line  # a string command goes whole, its body too
    assert "bad\ufffdname" in line  # a non-UTF-8 file name stays readable
    block = clean_text("Traceback:\r\n  line 1\tx\n" + HOSTILE + "\u2028end")
    assert_terminal_safe(block, newlines=True)
    assert block.startswith("Traceback:\n  line 1\tx\n") and block.endswith("\nend")
    assert "\n" not in clean_line("a\nb\u2029c") and clean_line("a\nb\tc") == "a b c"
    assert clean_line("x" * 5000, 100) == "x" * 99 + "…"
    assert clean_line("\x1b]0;unterminated title") == ""  # a terminal would swallow it all
    assert clean_line(12) == "12" and clean_line("plain, printable: ünïcödé ✓") == \
        "plain, printable: ünïcödé ✓"


def test_markdown_escapes_leave_no_markup_and_show_the_text():
    assert_markdown_inert(md_text(EVIL))
    assert_markdown_inert(f"| a | b |\n|---|---|\n| {md_text(MARKDOWN)} | x |")
    rendered = MarkdownIt("commonmark").render(md_text("a_b *c* [d](e) <f> & g|h"))
    assert rendered == "<p>a_b *c* [d](e) &lt;f&gt; &amp; g|h</p>\n"  # shown as typed
    for text in ("a`b", "``", "`x`", "plain"):
        rendered = MarkdownIt("commonmark").render(md_code(text))
        assert rendered == f"<p><code>{text}</code></p>\n", rendered
    assert_markdown_inert(md_code(EVIL), code=True)


# -- sinks -------------------------------------------------------------------------------
def test_classify_message_carries_no_escape_from_the_scene_log():
    """The render's one-line message: `mythloop render`'s `render failed` line, the film's
    render line, the manifest and the repair loop's errors."""
    log = ('Traceback (most recent call last):\n  File "/tmp/s.py", line 7, in construct\n'
           f"ValueError: {HOSTILE}\n")
    kind, message = classify(returncode=1, timed_out=False, timeout=60, video=False, log=log,
                             scene_file="s.py", limits_text="")
    assert kind == "scene_error" and message.startswith("scene error: ValueError: boom")
    assert "(scene line 7)" in message
    assert_terminal_safe(message)
    # an exception line hidden by escapes between its words is still found
    kind, message = classify(returncode=1, timed_out=False, timeout=60, video=False,
                             log="Memory\x1b[0mError: \x1b]0;t\x07x\n", scene_file="s.py",
                             limits_text="")
    assert kind == "resource_limit" and "MemoryError: x" in message
    # the fallback (no exception line): the last line of the log
    _, message = classify(returncode=3, timed_out=False, timeout=60, video=False,
                          log=f"\nboom {ESCAPES} {DISGUISE}\n", scene_file="s.py",
                          limits_text="")
    assert message.startswith("scene error: manim exited with code 3: boom click evil")
    assert_terminal_safe(message)


def test_render_cli_prints_findings_and_outputs_clean(capsys):
    """`mythloop render --layout`: one line per finding (a `Text` label in `what`/`detail`),
    the output paths."""
    from mythloop_app.commands import verify as cli

    finding = Finding(kind="off_frame", at=f"wait {HOSTILE}", t=1.0, what=f"text '{EVIL}'",
                      detail=f"beyond the right edge {HOSTILE}")
    result = RenderResult(ok=True, kind="ok", layout_findings=[finding])
    cli._print_findings([("Hostile", result)], strict=False)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("layout: Hostile off_frame at wait boom") and "click" in lines[0]
    assert lines[-1].startswith("layout: 1 finding(s)") and len(lines) == 2
    assert_terminal_safe(out, newlines=True)


def test_verify_cli_line_names_a_hostile_file_cleanly(tmp_path):
    """`mythloop verify FILE`: the `FILE:LINE: reason` line, for a file a scene's maker
    named with escapes."""
    from mythloop_app.cli import app

    name = "scene\x1b]0;pwned-title\x07\x1b[2J\u202egp.py"
    path = tmp_path / name
    path.write_text("import os\nfrom manim import *\n", encoding="utf-8")
    out = CliRunner().invoke(app, ["verify", str(path)])
    assert out.exit_code == 1
    assert f"{tmp_path}/scenegp.py:1: " in out.output  # the name, cleaned; the reason follows
    assert_terminal_safe(out.output, newlines=True)


def test_say_and_the_run_log_clean_what_they_pass_on(capsys):
    """`say` (the film's console lines, also sent to the Prefect log) and the run loggers'
    filter (a task's exception message and traceback, before the console or API handler)."""
    from mythloop.mythos.scene_book import _print  # (the scene book's say outside a flow)
    from mythloop_tasks.common import say

    for said in (say, _print):
        said(f"[film] render-scene-01 -> {HOSTILE}\nsecond line")
        out = capsys.readouterr().out
        assert out.startswith("[film] render-scene-01 -> boom") and out.count("\n") == 1
        assert_terminal_safe(out, newlines=True)

    seen: list[str] = []
    kinds: list[type | None] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(self.format(record))
            kinds.append(type(record.exc_info[1]) if record.exc_info else None)

    logger = logging.getLogger("prefect.task_runs")
    handler = Keep()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    try:
        try:
            raise SceneFailedLike(HOSTILE)
        except SceneFailedLike:
            logger.error("Task run failed with exception: %s - %s", HOSTILE, "done",
                         exc_info=True, extra={"send_to_api": False, "task_run_name": "scene-01",
                                                 "flow_run_name": "film-x"})
    finally:
        logger.removeHandler(handler)
    (text,) = seen
    assert kinds == [SceneFailedLike]  # (the console filters recognise it by its type)
    assert text.startswith("Task run failed with exception: boom") and "Traceback" in text
    assert "SceneFailedLike: boom" in text
    assert_terminal_safe(text, newlines=True)


class SceneFailedLike(RuntimeError):
    """An exception from outside the project's error classes (raw message)."""


def test_the_films_layout_warning_lines_are_clean(capsys):
    """The film's `[film] warning: layout ...` lines (a `Text` label in `what`)."""
    from mythloop_flows.film import _say_rendered

    unit = SceneUnit(1, "Hostile", "", [])
    finding = Finding(kind="overlap", at="end", t=2.0, what=f"text '{HOSTILE}'", detail="x")
    _say_rendered(unit, "", True, "miss", "/tmp/v.mp4", "rendered", [finding])
    out = capsys.readouterr().out
    assert "[film] warning: layout scene-01 t=2.0s overlap: text 'boom" in out
    assert_terminal_safe(out, newlines=True)


def test_scene_and_film_errors_are_clean_when_made():
    """SceneFailed and FilmFailed: `mythloop film`'s `film failed:` line, the Prefect log's
    task failure and the run's state message."""
    unit = SceneUnit(1, "Hostile", "", [])
    scene = SceneFailed(unit, f"scene-01 (Hostile) still fails: {HOSTILE}")
    assert str(scene).startswith("scene-01 (Hostile) still fails: boom")
    assert_terminal_safe(str(scene))
    film = FilmFailed(film_failure([scene], 2, 1, "/runs/x/scenes", "/runs/x"))
    assert str(film).startswith("1 of 2 scene(s) failed: scene-01") and "run dir /runs/x" in \
        str(film)
    assert_terminal_safe(str(film))
    assert_terminal_safe(str(FilmFailed(f"static check: {HOSTILE}\n{HOSTILE}")))


def test_film_summary_artifact_has_no_markup_from_the_scene(tmp_path):
    """The Prefect "Film summary" markdown: labels, names, errors, findings, the prompt."""
    data = FilmManifest.model_validate({
        "prompt": f"heat {MARKDOWN}", "backend": "replay", "model": f"m`{HOSTILE}",
        "stages": [{"stage": "codegen", "seconds": 1.5, "model": EVIL}],
        "static_check": {"passed": False, "detail": EVIL},
        "failed": {"error": EVIL},
        "scenes": [{"label": f"scene-01{MARKDOWN}", "name": "Hostile", "ok": True,
                    "cache": "miss", "render_seconds": 1.0, "attempts": 1,
                    "layout": [{"kind": "overlap", "at": f"end{MARKDOWN}", "t": 2.0,
                                "what": f"text '{EVIL}'", "detail": EVIL}],
                    "failed_repair": {"attempt": EVIL, "error": EVIL}}]})
    markdown = film_summary(data, tmp_path / f"run{HOSTILE}").markdown
    assert_markdown_inert(markdown)
    assert markdown.startswith("# Film: heat \\!\\[pixel\\]")  # the text, shown as text
    # the table keeps its columns: no pipe of the scene's splits a cell
    rows = [ln for ln in markdown.splitlines() if ln.startswith("| scene-01")]
    assert sorted(row.count("|") for row in rows) == [6, 8]  # findings: 5 cells; scenes: 7


def test_the_repair_prompt_keeps_the_log_text_without_its_escapes():
    """The log tail a repair gets (kept as a file with the prompt): text and newlines stay."""
    tail = f"Traceback (most recent call last):\n  File \"s.py\", line 3\nValueError: {HOSTILE}\n"
    prompt = repair_prompt("class S(Scene): pass", tail, scene_name="S")
    assert "Traceback (most recent call last):\n  File \"s.py\", line 3\nValueError: boom" \
        in prompt
    assert_terminal_safe(prompt, newlines=True)


# rich (which writes the render's traceback) drops BEL and wraps long lines: a short message
# terminated by ST stays on the exception line the parent reads
SHORT = ("\x1b]52;c;cHduZWQ=\x1b\\\x1b]0;pwned-title\x1b\\"
         "\x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\\x1b[2J\x1b[H\u202eboom")
_HOSTILE_SCENE = '''from manim import *

class Hostile(Scene):
    def construct(self):
        self.add(Square())
        raise ValueError({text!r})
'''


@pytest.mark.slow
@pytest.mark.skipif(not _namespaces_work(), reason="the sandbox needs bubblewrap and root")
def test_render_cli_failure_line_on_stderr_is_clean(tmp_path, state_dir):
    """`mythloop render` of a scene whose exception message is escape sequences: the
    `render failed (scene_error): ...` line, and everything else on stdout and stderr."""
    scene = tmp_path / "hostile.py"
    scene.write_text(_HOSTILE_SCENE.format(text=SHORT), encoding="utf-8")
    env = {**os.environ, "MYTHLOOP_STATE_DIR": str(state_dir)}
    proc = subprocess.run([sys.executable, "-m", "mythloop_app", "render", str(scene), "--out",
                           str(tmp_path / "out"), "--timeout", "120"], env=env,
                          capture_output=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    stderr = proc.stderr.decode("utf-8")
    assert re.search(r"^render failed \(scene_error\): scene error: ValueError: clickboom "
                     r"\(scene line 6\)", stderr, re.M), stderr
    assert_terminal_safe(stderr + proc.stdout.decode("utf-8"), newlines=True)
    # the scene's raw bytes are in its own log, where they belong
    assert b"\x1b]52;" in (tmp_path / "out" / "render.log").read_bytes()
    assert Path(tmp_path / "out").is_dir()
