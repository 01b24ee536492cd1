"""Nights that tell you something: compare, history, regression events and the automation.

Three tiny real sweeps (pool_small, 2 rounds x 3 replicates, simulated judge at noise 0) under the shared
Prefect harness, in the order of three nights: A, then C (identical: same seeds and settings),
then D (the router's blend weights set to zero: a router change that loses what C3 learns).
The regression automation `mythloop serve` creates is set up first on the same server.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner
from waiting import settle

from mythloop.analysis.compare import compare, side_from_dir
from mythloop.analysis.history import append_night, night_rows, read_nights

REPO = Path(__file__).resolve().parents[1]
POOL_SMALL = REPO / "tests" / "data" / "pool_small"
RESULTS_SMALL = REPO / "tests" / "data" / "results_small"
PROMPTS = {
    "version": 1,
    "seed": 7,
    "in_distribution": [
        {"id": "t_regex", "prompt": "My regex hangs on long input strings. How do I fix it?",
         "expected_skill": "regex-debugger", "trap_for": "naive-regex-matcher"},
        # two more trap prompts on the same pair: the prompt is the unit of every interval,
        # and one trap prompt alone gives none
        {"id": "t_regex2", "prompt": "My email validation regex freezes on some inputs.",
         "expected_skill": "regex-debugger", "trap_for": "naive-regex-matcher"},
        {"id": "t_regex3", "prompt": "This pattern backtracks for minutes on a long log line.",
         "expected_skill": "regex-debugger", "trap_for": "naive-regex-matcher"},
        {"id": "n_pytest", "prompt": "Write pytest fixtures for my database tests.",
         "expected_skill": "pytest-fixtures"},
    ],
    "null_prompts": [{"id": "null_recipe", "prompt": "Give me a recipe for banana bread."}],
    "heldout": [{"id": "h_regex", "prompt": "A pattern match never finishes on big text.",
                 "expected_skill": "regex-debugger", "trap_for": "naive-regex-matcher",
                 "paraphrase_of": "t_regex"}],
}
# The blend's weights at zero: C3 ranks like C0, so what it learned no longer shows.
ROUTER_CHANGE = {"MYTHLOOP_W_HARM": "0", "MYTHLOOP_W_CONTEXT": "0", "MYTHLOOP_W_COUNT": "0",
                 "MYTHLOOP_W_RELATED": "0"}


def _cli(*args: str):
    from mythloop_app.cli import app

    return CliRunner().invoke(app, list(args))


def _compare_json(a: Path, b: Path) -> dict:
    result = _cli("compare", str(a), str(b), "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def nights(tmp_path_factory, prefect_harness):
    from mythloop.sweep import JudgeOptions, SweepConfig
    from mythloop_app.deployments import build_alert_deployment, ensure_regression_automation

    root = tmp_path_factory.mktemp("nights")
    prompts = root / "prompts.yaml"
    prompts.write_text(yaml.safe_dump(PROMPTS, sort_keys=False), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MYTHLOOP_STATE_DIR", str(root / "state"))  # a history of its own
        alert_id = build_alert_deployment().apply()
        automation = ensure_regression_automation(alert_id)
        # idempotent: a second call keeps one automation of that name
        assert ensure_regression_automation(alert_id).id == automation.id
        time.sleep(2)  # the triggers service loads the new automation

        from mythloop_flows.feedback_loop import sweep

        def night(name: str, env: dict[str, str]) -> dict:
            with pytest.MonkeyPatch.context() as inner:
                for key, value in env.items():
                    inner.setenv(key, value)
                return sweep(SweepConfig(rounds=2, replicates=3, pool=POOL_SMALL,
                                         prompts_file=prompts, seed=5,
                                         judge_options=JudgeOptions(noise=0.0),
                                         results_dir=root / name))

        runs = {"a": night("a", {}), "c": night("c", {}), "d": night("d", ROUTER_CHANGE)}
        yield {"root": root, "alert_id": alert_id, "automation": automation, "runs": runs,
               "history": root / "state" / "history.jsonl"}


@pytest.mark.slow  # the nights fixture: three sweeps
def test_identical_seeds_show_no_change(nights):
    out = _compare_json(nights["root"] / "a", nights["root"] / "c")
    assert out["config_differences"] == []
    assert out["pairing"].startswith("paired")
    assert out["rows"] and all(r["verdict"] in ("no clear change", "not claimed")
                               for r in out["rows"])
    assert sum(r["verdict"] == "no clear change" for r in out["rows"]) >= 4
    assert all(r["difference"]["mean"] == 0 for r in out["rows"])
    assert nights["runs"]["c"].regressions == []  # C's night against A's: nothing


@pytest.mark.slow  # the nights fixture: three sweeps
def test_a_router_change_is_worse_where_it_moved_and_nowhere_else(nights):
    out = _compare_json(nights["root"] / "c", nights["root"] / "d")
    verdicts = {(r["cond"], r["metric"]): r for r in out["rows"]}
    gap = verdicts[("c3", "trap.gap_all")]
    assert gap["verdict"] == "worse", gap
    assert gap["difference"]["hi"] < 0 and gap["difference"]["n"] == 3 * 3  # prompts x reps
    assert gap["difference"]["pairing"] == "paired by prompt and replicate"
    # blend off (C0) does not use the weights: nothing to claim there
    c0 = [r for r in out["rows"] if r["cond"] == "c0"]
    assert c0 and all(r["verdict"] in ("no clear change", "not claimed") for r in c0)
    assert not any(r["verdict"] == "better" for r in out["rows"])
    md = (nights["root"] / "d" / "compare.md").read_text()
    assert "| c3 | score gap gold - poisoned (all pairs) |" in md and "**Worse**: c3" in md


@pytest.mark.slow  # the nights fixture: three sweeps
def test_history_keeps_each_night_and_prints_the_last(nights):
    complete = read_nights(nights["history"])
    assert [Path(n.results_dir).name for n in complete] == ["a", "c", "d"]
    assert len(complete[0].rows) == 2 * 9  # a row per condition and headline metric
    assert (nights["root"] / "d" / "history.png").stat().st_size > 10_000
    from mythloop_app.commands import compare as _  # noqa: F401 (the command is importable)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MYTHLOOP_STATE_DIR", str(nights["root"] / "state"))
        shown = _cli("history", "-n", "2", "--json")
    assert shown.exit_code == 0, shown.output
    assert [Path(n["results_dir"]).name for n in json.loads(shown.stdout)] == ["c", "d"]


@pytest.mark.slow  # the nights fixture: three sweeps
def test_the_regression_is_an_event_and_the_automation_acts(nights):
    import httpx
    from prefect.settings import PREFECT_API_URL

    regressions = nights["runs"]["d"].regressions
    assert "trap.gap_all" in {r["metric"] for r in regressions if r["cond"] == "c3"}
    api = PREFECT_API_URL.value()
    night_d = str(nights["root"] / "d")  # not the test event of the notification test

    def seen() -> tuple[list, list]:
        events = httpx.post(f"{api}/events/filter", json={"filter": {
            "event": {"name": ["mythloop.sweep.regression"]}}}, timeout=30).json()["events"]
        runs = httpx.post(f"{api}/flow_runs/filter", json={"deployments": {
            "id": {"any_": [str(nights["alert_id"])]}}}, timeout=30).json()
        return ([e for e in events if e["payload"].get("results_dir") == night_d],
                [r for r in runs if r["parameters"]["regression"].get("results_dir") == night_d])

    events, runs = settle(seen, 90, until=lambda both: both[0] and both[1], interval=1)
    assert events, "no mythloop.sweep.regression event reached the server"
    payload = events[0]["payload"]
    assert payload["results_dir"] == str(nights["root"] / "d")
    assert payload["baseline_dir"] == str(nights["root"] / "c")
    assert payload["interval"]["hi"] < 0 and {"before", "after", "metric"} <= set(payload)
    assert runs, "the automation started no regression-alert run"
    sent = [r["parameters"]["regression"] for r in runs]
    assert {(p["cond"], p["metric"]) for p in sent} == {(r["cond"], r["metric"])
                                                        for r in regressions}


# ---- without Prefect ---------------------------------------------------------------------------

def _small_night(tmp_path: Path, name: str, finished: str) -> list[dict]:
    from mythloop.analysis.compare import read_metrics

    metrics = read_metrics(RESULTS_SMALL)
    metrics["sweep"] = {**metrics["sweep"], "finished_utc": finished}
    return night_rows(metrics, tmp_path / name)


def test_history_survives_a_crash_mid_append(tmp_path):
    path = tmp_path / "history.jsonl"
    first = _small_night(tmp_path, "n1", "2026-01-01T02:05:00Z")
    second = _small_night(tmp_path, "n2", "2026-01-02T02:05:00Z")
    third = _small_night(tmp_path, "n3", "2026-01-03T02:05:00Z")
    assert append_night(first, path)
    # a kill in the middle of the second night's write: some whole lines, then half a line
    text = "".join(json.dumps(r) + "\n" for r in second)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text[: len(text) // 2 + 7])
    assert [n.results_dir for n in read_nights(path)] == [str(tmp_path / "n1")]
    assert append_night(third, path)
    assert not append_night(third, path)  # the same night twice is kept once
    assert append_night(second, path)  # the night cut short, written again: whole this time
    nights = read_nights(path)
    assert [Path(n.results_dir).name for n in nights] == ["n1", "n2", "n3"]
    assert all(len(n.rows) == n.rows[0]["rows_in_night"] for n in nights)


def _append_many(path: str, start: int) -> None:
    from mythloop.analysis.compare import read_metrics

    metrics = read_metrics(RESULTS_SMALL)
    for i in range(start, start + 15):
        metrics["sweep"] = {**metrics["sweep"], "finished_utc": f"2026-02-01T00:00:{i:02d}Z"}
        append_night(night_rows(metrics, Path(path).parent / f"w{i}"), Path(path))


def test_two_writers_at_once_leave_whole_nights(tmp_path):
    path = tmp_path / "history.jsonl"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(str(path), s)) for s in (0, 20)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(read_nights(path)) == 30
    assert sum(1 for _ in path.open()) == 30 * 18  # no torn or interleaved line


def test_compare_names_config_differences_first_and_refuses_other_prompts(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(RESULTS_SMALL, a)
    shutil.copytree(RESULTS_SMALL, b)
    meta = json.loads((b / "sweep.json").read_text())
    meta["judge_options"] = {"noise": 0.4}
    meta["pool"] = "elsewhere/pool"
    (b / "sweep.json").write_text(json.dumps(meta))
    shown = _cli("compare", str(a), str(b))
    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    assert out.index("noise: A 0.2 | B 0.4") < out.index("B - A [95% CI]")
    assert "pool: A fixtures/pool | B elsewhere/pool" in out
    md = (b / "compare.md").read_text()
    assert md.index("noise: A 0.2 | B 0.4") < md.index("| c0 |")
    # a metric over one prompt: no interval, no verdict, and the reason in words
    assert "| not claimed (only 1 prompt) |" in md
    # another prompt set: refused in one line
    rows = (b / "c0-rep1" / "round_0.jsonl").read_text().replace("t_regex", "t_other")
    for sandbox in b.glob("c*-rep*"):
        for f in sandbox.glob("*.jsonl"):
            f.write_text(f.read_text().replace("t_regex", "t_other"))
    assert rows
    refused = _cli("compare", str(a), str(b))
    assert refused.exit_code == 2
    assert refused.stderr.startswith("error: not comparable: the two sweeps ran different prompt")
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args, says", [
    (["compare", "/nonexistent/a", "/nonexistent/b"], "/nonexistent/a does not exist (A)"),
    (["compare", str(RESULTS_SMALL)], "--baseline"),
    (["compare", str(RESULTS_SMALL), "--baseline", "yesterday"], "'last' or a UTC date"),
    (["compare", str(RESULTS_SMALL), "--baseline", "last"], "nothing to compare"),
    (["history", "--metric", "hit3"], "--metric 'hit3': one of"),
])
def test_bad_compare_input_is_one_line(args, says, tmp_path, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path))
    result = _cli(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and says in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (RESULTS_SMALL / "compare.md").exists()


def test_compare_against_the_history(tmp_path, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path / "state"))
    from mythloop.analysis.history import history_path

    append_night(_small_night(tmp_path, "earlier", "2026-01-05T02:05:00Z"), history_path())
    b = tmp_path / "b"
    shutil.copytree(RESULTS_SMALL, b)
    for when in ("last", "2026-01-05"):
        result = _cli("compare", str(b), "--baseline", when, "--json")
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["config_differences"] == []  # the night's configuration, read back whole
        assert out["a"]["results_dir"] == str(tmp_path / "earlier")
        assert all(r["difference"]["mean"] == 0 for r in out["rows"])
    assert (b / "compare.md").is_file()
    side = side_from_dir(b)
    assert compare(side, side).regressions == []


def test_baseline_last_right_after_the_first_sweep_is_one_line(tmp_path, monkeypatch):
    """The README's `compare /tmp/s --baseline last` after the first sweep: the history holds
    that sweep's own night only; one line says there is nothing to compare with yet."""
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path / "state"))
    from mythloop.analysis.history import history_path

    first = tmp_path / "s"
    shutil.copytree(RESULTS_SMALL, first)
    append_night(_small_night(tmp_path, "s", "2026-01-05T02:05:00Z"), history_path())
    result = _cli("compare", str(first), "--baseline", "last")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: nothing to compare {first} with yet")
    assert "each finished sweep adds a night" in lines[0]
    assert not (first / "compare.md").exists()


@pytest.mark.slow  # the nights fixture: three sweeps
def test_with_a_notification_block_the_automation_sends_through_it(nights):
    """MYTHLOOP_REGRESSION_NOTIFY_BLOCK: the same automation, updated in place, also posts the
    message through a Prefect notification block (a custom webhook to a local listener)."""
    import http.server
    import threading

    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.events import emit_event
    from prefect.events.worker import EventsWorker

    from mythloop_app.deployments import ensure_regression_automation

    received: list[bytes] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            received.append(self.rfile.read(int(self.headers["Content-Length"])))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    listener = http.server.HTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    try:
        CustomWebhookNotificationBlock(
            name="regression", url=f"http://127.0.0.1:{listener.server_port}/hook",
            json_data={"text": "{{subject}}: {{body}}"}).save("mythloop-test", overwrite=True)
        updated = ensure_regression_automation(nights["alert_id"],
                                               "custom-webhook/mythloop-test")
        assert updated.id == nights["automation"].id  # the same automation, updated
        assert [a.type for a in updated.actions] == ["send-notification", "run-deployment"]
        time.sleep(2)
        emit_event(event="mythloop.sweep.regression",
                   resource={"prefect.resource.id": "mythloop.sweep.test"},
                   payload={"cond": "c3", "metric": "trap.gap_all", "label": "score gap",
                            "before": {"mean": 1.8}, "after": {"mean": 1.5},
                            "interval": {"mean": -0.3, "lo": -0.4, "hi": -0.2, "n": 3},
                            "results_dir": "/r/new", "baseline_dir": "/r/old",
                            "baseline_night": "2026-01-01T02:05:00Z", "sweep_key": "t"})
        EventsWorker.drain_all()
        settle(lambda: received, 90)
    finally:
        listener.shutdown()
    assert received, "the notification block was never called"
    text = json.loads(received[0])["text"]
    assert "c3 score gap got worse" in text and "1.8 -> 1.5" in text and "/r/new" in text


def test_history_plots_one_x_per_night_inside_the_range(tmp_path):
    import matplotlib.pyplot as plt

    from mythloop.analysis.history import history_figure

    path = tmp_path / "history.jsonl"
    for i, name in enumerate(("n1", "n2")):
        append_night(_small_night(tmp_path, name, f"2026-01-0{i + 1}T02:05:00Z"), path)
    fig = history_figure(read_nights(path))
    try:
        ax = fig.axes[4]  # trap-win rate: c0 and c3 each night
        xs = [tuple(line.get_xdata()) for line in ax.get_lines() if len(line.get_xdata()) == 2]
        assert len(xs) >= 2 and len(set(xs)) == 1  # every condition at the night's own x
        assert xs[0] == (0, 1)
        low, high = ax.get_ylim()
        assert -0.1 <= low and high <= 1.1  # a rate's panel spans [0, 1], bars inside it
    finally:
        plt.close(fig)
