"""Shared behaviour of the fake vendor CLIs (gemini, claude, codex) used by tests/test_llm_*.py.

Environment knobs:
  FAKE_MODE        ok (default) | auth | sleep | empty | garbled | ratelimit | network | untrusted
                   | mythos (claude only: film stage JSON / scene code; needs mythloop importable)
  FAKE_DEGENERATE  (mythos mode) a stage slug that always gets a degenerate artifact
  FAKE_CALL_LOG    (mythos mode) append one line per call: "<model> <step>"
  FAKE_BAD_MODELS  comma list: these --model values fail as "model not found"
  FAKE_ARGV_FILE   write {"argv", "cwd", "home", "stdin", "env"} here as JSON
  FAKE_PIDFILE     (sleep mode) write "<child pid> <grandchild pid>" here
  FAKE_IGNORE_TERM (sleep mode) 1: child and grandchild ignore SIGTERM (forces SIGKILL)
  FAKE_DELAY       seconds to wait before answering (a model's latency): "2", or "0.1-0.6"
                   for a random delay in that range (shuffles the order concurrent calls end in)
  FAKE_FLAKY_DIR   the first call for each distinct prompt fails with a rate limit (429, a
                   retriable error); later calls answer (gemini only; marker files go here)
  FAKE_JUDGE_NOISE (judge mode, gemini only) the simulated judge's noise (default 0.2)
  FAKE_CALL_TIMES  (gemini only) append "<start> <end>" (time.time()) of each call here
  FAKE_VERSION     broken: `--version` fails as an npm-installed CLI does without node
                   (exit 127, "env: 'node': No such file or directory"); hang: it never answers

`<cli> --version` prints the real CLI's version line (the preflight's no-cost probe).

FAKE_MODE=judge (gemini only): answer a sweep's learning prompt with the simulated judge's
reply (verdict tags over the bundled pool and prompts; needs mythloop importable): a
deterministic stand-in for a real model on the real CLI path.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

VERSIONS = {"claude": "2.0.14 (Claude Code)", "gemini": "0.9.0", "codex": "codex-cli 0.46.0"}


def answer_version(name: str, argv: list[str]) -> None:
    """`<cli> --version` (alone): the real version line, or FAKE_VERSION's failure."""
    if argv != ["--version"]:
        return
    how = os.environ.get("FAKE_VERSION", "")
    if how == "broken":
        sys.stderr.write("/usr/bin/env: 'node': No such file or directory\n")
        sys.exit(127)
    if how == "hang":
        time.sleep(600)
    print(VERSIONS[name])
    sys.exit(0)


def mode() -> str:
    return os.environ.get("FAKE_MODE", "ok")


def arg_after(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv and argv.index(flag) + 1 < len(argv) else None


def record(argv: list[str], stdin_text: str) -> None:
    path = os.environ.get("FAKE_ARGV_FILE")
    if path:
        env = {k: v for k, v in os.environ.items() if k.startswith(("GEMINI", "HOME", "FAKE"))}
        with open(path, "w", encoding="utf-8") as fh:
            json.dump({"argv": argv, "cwd": os.getcwd(), "home": os.environ.get("HOME"),
                       "stdin": stdin_text, "env": env}, fh)


def bad_model(model: str | None) -> bool:
    bad = [m.strip() for m in os.environ.get("FAKE_BAD_MODELS", "").split(",") if m.strip()]
    return model in bad


def sleep_with_grandchild() -> None:
    """Fork a grandchild, record both pids, then both sleep far past any test deadline."""
    if os.environ.get("FAKE_IGNORE_TERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    pidfile = os.environ.get("FAKE_PIDFILE")
    if pidfile:
        tmp = pidfile + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(f"{os.getpid()} {pid}")
        os.replace(tmp, pidfile)
    print("working...", flush=True)
    time.sleep(600)
    sys.exit(0)


def delay() -> None:
    """Wait FAKE_DELAY seconds ("2" or a "lo-hi" range drawn at random)."""
    spec = os.environ.get("FAKE_DELAY", "").strip()
    if not spec:
        return
    if "-" in spec.lstrip("-"):
        import random

        lo, hi = (float(x) for x in spec.split("-", 1))
        time.sleep(random.uniform(lo, hi))
    else:
        time.sleep(float(spec))


STARTED = time.time()


def log_call_time() -> None:
    """FAKE_CALL_TIMES: append this call's start and end (one short O_APPEND write)."""
    path = os.environ.get("FAKE_CALL_TIMES")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{STARTED:.6f} {time.time():.6f}\n")


def first_call_fails(prompt: str) -> bool:
    """FAKE_FLAKY_DIR: True (and remember it) on the first call for this prompt."""
    folder = os.environ.get("FAKE_FLAKY_DIR")
    if not folder:
        return False
    import hashlib

    marker = os.path.join(folder, hashlib.sha256(prompt.encode()).hexdigest()[:24])
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def judge_reply(prompt: str) -> str:
    """The simulated judge's answer to a learning prompt (bundled pool and prompts)."""
    from mythloop.data import data_path
    from mythloop.llm.simulated import SimulatedJudge

    noise = float(os.environ.get("FAKE_JUDGE_NOISE", "0.2"))
    judge = SimulatedJudge(prompts=data_path("fixtures", "prompts.yaml"), noise=noise,
                           omit_rate=0.05, invent_rate=0.02)
    return judge.render(prompt)


def read_stdin() -> str:
    return "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()


def mythos_reply(prompt: str) -> str:
    """Film replies keyed on which charter the prompt starts with (offline stand-in content)."""
    from mythloop.mythos.plan.stages import STAGES, load_charter
    from mythloop.mythos.standins.offline import offline_response

    step = None
    for spec in STAGES:
        if prompt.startswith(load_charter(spec.charter_file)[:200]):
            step = spec.slug
    for name in ("codegen", "repair"):
        if step is None and prompt.startswith(load_charter(f"{name}.md")[:120]):
            step = name if name == "codegen" else "repair-1"
    log = os.environ.get("FAKE_CALL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{arg_after(sys.argv[1:], '--model')} {step}\n")
    if step is None:
        return "I am not sure what you are asking."
    if step == os.environ.get("FAKE_DEGENERATE"):
        return '{"stage": "' + step + '", "note": "nothing to say"}'
    return offline_response(step, prompt)
