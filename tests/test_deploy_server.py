"""End to end: `mythloop server` + `mythloop serve`, a film started through the API the UI's
Run form uses, its task runs, `prefect deployment ls`, the UI in headless Chromium, and a
clean stop. The tests share one server; a test that finds it stopped (the clean-stop test ran
before it) starts another, and the film run is started by the first test that needs it, so
every test runs alone or in any order."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from browser import chromium_render, find_chromium, visible_text
from waiting import settle, wait_for

pytestmark = pytest.mark.slow

FILM_STEPS = ["intent", "cartographer", "curriculum", "math-director", "cinematographer",
              "scene-composer", "codegen", "scene-01", "scene-02", "scene-03",
              "verify-scene-01", "verify-scene-02", "verify-scene-03", "render-scene-01",
              "render-scene-02", "render-scene-03", "stitch", "subtitles-and-voice"]
# the offline film is three scenes, each a task run (a node of the run graph) with its verify
# and render inside, then stitched and given its subtitles
LLM_LIMIT = 3  # not the default (4): proves serve reads MYTHLOOP_LLM_CONCURRENCY
STARTUP_S = 300.0


@dataclass
class Stack:
    state: Path
    env: dict[str, str]
    server: subprocess.Popen
    serve: subprocess.Popen
    api_url: str
    server_pid: int
    logs: Path
    film_run_id: str | None = None  # the film_run_id fixture's run, once it has ended

    def stopped(self) -> bool:
        return self.server.poll() is not None or self.serve.poll() is not None


def _wait_for(what: str, check, timeout: float, procs: list[subprocess.Popen], logs: Path):
    """Poll `check()` until it returns a truthy value; fail early if a process died."""
    def checked():
        value = check()
        for proc in procs if not value else ():
            if proc.poll() is not None:
                pytest.fail(f"{what}: {proc.args[3:5]} exited with {proc.returncode}\n"
                            + _tails(logs))
        return value

    try:
        return wait_for(checked, timeout, what)
    except TimeoutError as exc:
        pytest.fail(f"{exc}\n" + _tails(logs))


def _tails(logs: Path) -> str:
    parts = []
    for path in sorted(logs.glob("*.log")):
        lines = path.read_text(errors="replace").splitlines()[-20:]
        parts.append(f"--- {path.name}\n" + "\n".join(lines))
    return "\n".join(parts)


def _api(stack_or_url, method: str, path: str, body: dict | None = None):
    """One API call; what a busy server answers (429, 503: SQLite locked under load) is asked
    again with backoff, as Prefect's own client and the UI do (2, 4, 8, 16, 32 s)."""
    import time

    import httpx

    url = stack_or_url.api_url if isinstance(stack_or_url, Stack) else stack_or_url
    for wait in (2, 4, 8, 16, 32, None):
        response = httpx.request(method, f"{url}{path}", json=body, timeout=30)
        if response.status_code not in (429, 503) or wait is None:
            break
        time.sleep(wait)
    response.raise_for_status()
    return response.json()


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "mythloop_app.cli", *args], env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen, timeout: float = 90.0) -> int | None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None
    return proc.returncode


@contextlib.contextmanager
def _running_stack(state: Path) -> Iterator[Stack]:
    logs = state / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env.update({"MYTHLOOP_STATE_DIR": str(state), "MYTHLOOP_TIMEZONE": "Europe/Berlin",
                "MYTHLOOP_LLM_CONCURRENCY": str(LLM_LIMIT),
                "PREFECT_RUNNER_POLL_FREQUENCY": "2"})  # pick up a new run within ~2 s
    server = _start(["server"], env, logs / "server.log")
    # Started together, no PREFECT_API_URL: serve waits for the server's server.json.
    serve = _start(["serve", "--wait", str(STARTUP_S)], env, logs / "serve.log")
    record = state / "server.json"
    procs = [server, serve]
    try:
        info = _wait_for("mythloop server", lambda: record.exists() and json.loads(
            record.read_text()), STARTUP_S, procs, logs)
        # every deployment the tests use (serve registers them one after another)
        _wait_for("served deployments", lambda: {"nightly-sweep", "film"} <= {
            d["name"] for d in _api(info["api_url"], "POST", "/deployments/filter", {})},
            STARTUP_S, procs, logs)
        yield Stack(state, env, server, serve, info["api_url"], info["server_pid"], logs)
    finally:
        for proc in reversed(procs):
            _stop(proc)


@pytest.fixture(scope="module")
def _stacks() -> Iterator[dict]:
    """The module's stacks: stopped at the module's end (those a test stopped, a no-op)."""
    with contextlib.ExitStack() as exits:
        yield {"exits": exits, "current": None}


@pytest.fixture
def stack(_stacks, tmp_path_factory) -> Stack:
    """The module's running stack; a new one when a test before stopped it."""
    current = _stacks["current"]
    if current is None or current.stopped():
        current = _stacks["exits"].enter_context(
            _running_stack(tmp_path_factory.mktemp("deploy-state")))
        _stacks["current"] = current
    return current


@pytest.fixture
def film_run_id(stack) -> str:
    """The film started like the UI's Run form, once per stack, waited for until it ends."""
    if stack.film_run_id is None:
        (deployment,) = _api(stack, "POST", "/deployments/filter",
                             {"deployments": {"name": {"any_": ["film"]}}})
        # The UI's Run form posts exactly this: the deployment's create_flow_run.
        run = _api(stack, "POST", f"/deployments/{deployment['id']}/create_flow_run", {
            "parameters": {"request": {"prompt": "the heat equation", "backend": "offline",
                                       "render": True, "quality": "l", "max_repairs": 1}}})
        _wait_for("the served film run", lambda: _api(stack, "GET", f"/flow_runs/{run['id']}")[
            "state"]["type"] in {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}, 600,
            [stack.server, stack.serve], stack.logs)
        stack.film_run_id = run["id"]
    return stack.film_run_id


def _film_summary(stack: Stack, film_run_id: str) -> dict:
    """The film's summary artifact (markdown, "# Film: ...")."""
    artifacts = _api(stack, "POST", "/artifacts/filter",
                     {"artifacts": {"flow_run_id": {"any_": [film_run_id]}}})
    summary = [a for a in artifacts if a["type"] == "markdown" and "# Film:" in a["data"]]
    assert summary, f"no film summary among {[a['type'] for a in artifacts]}"
    return summary[0]


def _flow_run_task_runs(stack: Stack, flow_run_id: str) -> list[dict]:
    return _api(stack, "POST", "/task_runs/filter",
                {"flow_runs": {"id": {"any_": [flow_run_id]}}})


def test_deployments_listed_with_the_nightly_schedule(stack):
    env = {**stack.env, "PREFECT_API_URL": stack.api_url}
    listed = subprocess.run([sys.executable, "-m", "prefect", "deployment", "ls", "-o", "json"],
                            env=env, capture_output=True, text=True, timeout=180)
    assert listed.returncode == 0, listed.stderr
    deployments = {d["name"]: d for d in json.loads(listed.stdout)}
    assert {"nightly-sweep", "film"} <= set(deployments)
    (nightly,) = deployments["nightly-sweep"]["schedules"]
    assert nightly["active"]
    assert nightly["schedule"]["cron"] == "0 2 * * *"
    assert nightly["schedule"]["timezone"] == "Europe/Berlin"
    assert deployments["film"]["schedules"] == []
    assert deployments["film"]["parameters"]["request"]["backend"] == "offline"


def test_serve_rejects_a_bad_cron_in_one_line(stack):
    bad = subprocess.run([sys.executable, "-m", "mythloop_app.cli", "serve", "--cron", "61 2 * * *"],
                         env=stack.env, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: ") and "61 2 * * *" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_serve_created_the_llm_concurrency_limit(stack):
    limit = _api(stack, "GET", "/concurrency_limits/tag/llm")
    assert limit["concurrency_limit"] == LLM_LIMIT


def test_film_started_like_the_run_form_completes_every_step(stack, film_run_id):
    run = {"id": film_run_id}
    state = _api(stack, "GET", f"/flow_runs/{run['id']}")["state"]
    assert state["type"] == "COMPLETED", f"{state}\n{_tails(stack.logs)}"
    tasks = {}
    _wait_for("task run states", lambda: tasks.update(
        {t["name"]: t["state"]["type"] for t in _flow_run_task_runs(stack, run["id"])})
        or all(tasks.get(step) == "COMPLETED" for step in FILM_STEPS), 60,
        [stack.server], stack.logs)
    assert [step for step in FILM_STEPS if tasks.get(step) != "COMPLETED"] == []
    assert not [name for name in tasks if name.startswith("repair")]  # offline scene renders
    (manifest,) = (stack.state / "runs" / "mythos").glob("*/manifest.json")
    film = json.loads(manifest.read_text())
    assert film["prefect_flow_run_id"] == run["id"]
    video = Path(film["video_path"])
    assert video.suffix == ".mp4" and video.stat().st_size > 10_000
    artifacts = _api(stack, "POST", "/artifacts/filter",
                     {"artifacts": {"flow_run_id": {"any_": [run["id"]]}}})
    # Prefect stores both as markdown: the summary, and the link "[film.mp4](<address>)"
    summary = [a for a in artifacts if a["type"] == "markdown" and "# Film:" in a["data"]]
    assert summary and str(video) in summary[0]["data"]
    # serve publishes the run dirs over HTTP: the film's link is an address that plays
    import httpx

    (link,) = [a for a in artifacts
               if re.fullmatch(r"\"?\[film\.mp4\]\(\S+\)\"?", str(a["data"]))]
    url = re.search(r"\]\((\S+)\)", link["data"]).group(1)
    assert url.startswith("http://127.0.0.1:") and url.endswith("/film.mp4"), link["data"]
    answer = httpx.get(url, timeout=30)
    assert answer.status_code == 200 and answer.headers["content-type"] == "video/mp4"
    assert answer.content == video.read_bytes()
    assert "poster.png" in summary[0]["data"]


def test_the_ui_shows_the_film_steps(stack, film_run_id, repo_root):
    chromium = find_chromium()
    if chromium is None:
        message = "Debian's chromium is not installed (make setup installs it)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    ui = stack.api_url.rsplit("/api", 1)[0]
    page = f"{ui}/v2/runs/flow-run/{film_run_id}?tab=TaskRuns"
    shot = repo_root / "tests" / "artifacts" / "film-run-task-runs.png"
    text = ""
    for budget in (15_000, 30_000, 60_000):  # retry while the UI loads on a busy machine
        text = visible_text(chromium_render(chromium, page, screenshot=shot, budget_ms=budget))
        if all(step in text for step in FILM_STEPS) and f"{len(FILM_STEPS)} Completed" in text:
            break
    missing = [step for step in FILM_STEPS if step not in text]
    assert not missing, f"the rendered page lacks {missing}; it shows: {text[:1500]}"
    assert f"{len(FILM_STEPS)} Completed" in text  # the task-runs tab's state summary
    assert "film-the-heat-equation" in text
    assert shot.stat().st_size > 20_000  # the screenshot of that same render


def test_the_film_summary_page_shows_the_poster(stack, film_run_id, repo_root):
    """In the default UI (not /v2): the poster is an image the browser loads from serve's
    preview server, no markdown shows as raw text, and the steps table is whole."""
    chromium = find_chromium()
    if chromium is None:
        message = "Debian's chromium is not installed (make setup installs it)"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)
    summary_id = _film_summary(stack, film_run_id)["id"]
    page = f"{stack.api_url.rsplit('/api', 1)[0]}/artifacts/artifact/{summary_id}"
    access = stack.state / "preview-access.log"
    shot = repo_root / "tests" / "artifacts" / "film-summary.png"
    dom = ""
    for budget in (15_000, 30_000, 60_000):
        dom = chromium_render(chromium, page, screenshot=shot, budget_ms=budget)
        if "poster.png" in dom:
            break
    poster = re.search(r'<img[^>]+src="(http://127\.0\.0\.1:\d+/runs/[^"]+/poster\.png)"', dom)
    assert poster, visible_text(dom)[:1500]
    # the browser that rendered the page loaded it from the preview server
    assert re.search(r"^GET /runs/\S+/poster\.png 200$", access.read_text(), re.M)
    text = visible_text(dom)
    assert "![" not in text and "](" not in text, text[:1500]  # no markdown shown raw
    assert "Watch the film" in text
    assert "Model of every step" in text or "Models of the steps" in text
    with urllib.request.urlopen(poster.group(1), timeout=30) as answer:  # noqa: S310 - loopback
        assert answer.status == 200 and answer.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_film_form_renders_its_fields(stack):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("Debian's chromium is not installed")
    (deployment,) = _api(stack, "POST", "/deployments/filter",
                         {"deployments": {"name": {"any_": ["film"]}}})
    # both UIs: the default one and /v2; the Runs Dir help keeps its placeholders (the form
    # reads a description as markdown, where `<runs_dir>` was an HTML tag it dropped)
    wanted = ["Prompt", "Render", "Quality", "Backend", "Max Repairs",
              "How many times a failed render may be repaired.",
              "RUNS_DIR/mythos/STAMP-SLUG/"]
    ui = stack.api_url.rsplit('/api', 1)[0]
    for page in (f"{ui}/deployments/deployment/{deployment['id']}/run",
                 f"{ui}/v2/deployments/deployment/{deployment['id']}/run"):
        text = ""
        for budget in (15_000, 30_000):
            text = visible_text(chromium_render(chromium, page, budget_ms=budget))
            if all(word in text for word in wanted):
                break
        assert [word for word in wanted if word not in text] == [], (page, text[:1500])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _processes_with_state(state: Path) -> list[int]:
    """Processes whose environment names this test's state folder (server, serve, flow runs)."""
    marker = f"MYTHLOOP_STATE_DIR={state}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def test_sigterm_stops_serve_and_server_without_leftovers(stack):
    port = int(stack.api_url.rsplit(":", 1)[1].split("/")[0])
    assert _stop(stack.serve) == 0, _tails(stack.logs)
    assert _stop(stack.server) == 0, _tails(stack.logs)
    assert not (stack.state / "server.json").exists()
    assert "Prefect server stopped." in (stack.logs / "server.log").read_text()
    settle(lambda: not (_group_alive(stack.server_pid) or _processes_with_state(stack.state)),
           30)
    assert not _group_alive(stack.server_pid)
    assert _processes_with_state(stack.state) == []
    with socket.socket() as probe, pytest.raises(OSError):
        probe.settimeout(2)
        probe.connect(("127.0.0.1", port))
