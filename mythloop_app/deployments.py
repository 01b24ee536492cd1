"""Serve mythloop's deployments from one long-lived process (`mythloop serve`).

    nightly-sweep    mythloop_flows.feedback_loop.sweep   cron (default 0 2 * * *, settings
                                                          timezone), parameters = the SweepConfig
                                                          defaults and noise_levels
                                                          (MYTHLOOP_NIGHTLY_NOISE_LEVELS: two or
                                                          more run a noise study)
    film             mythloop_flows.film.film             no schedule; started from the UI's form
    regression-alert mythloop_flows.regression_alert.regression_alert
                                                          no schedule; run by the automation
                                                          `mythloop: sweep regression` on each
                                                          mythloop.sweep.regression event

Entrypoints are module paths (the flows/ folder installs as `mythloop_flows`), so flow runs
load the installed flows whatever their working directory: a checkout or an installed wheel.

Also run as `python deployments/serve.py` (PREFECT_API_URL set).
`deployments/prefect.yaml` describes the same deployments for `prefect deploy` and a
process work pool.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:  # Prefect is imported late, after PREFECT_HOME points at the state folder
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.deployments.runner import RunnerDeployment

NIGHTLY = "nightly-sweep"
FILM = "film"
REGRESSION_ALERT = "regression-alert"
NIGHTLY_REPLICATES = 3  # mythloop.analysis.conclusion.MIN_REPLICATES
REGRESSION_AUTOMATION = "mythloop: sweep regression"

# What the film form is pre-filled with: runs with no account and renders a ~6 s scene.
FILM_FORM_DEFAULTS = {"prompt": "the heat equation", "backend": "offline", "render": True,
                      "quality": "l", "max_repairs": 3}


def first_error_line(exc: Exception) -> str:
    """One line for a bad cron or timezone (pydantic's message is several lines)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            message = str(errors()[0].get("msg", exc)).removeprefix("Value error, ")
            return f"{message}; fix --cron / --timezone (or MYTHLOOP_SCHEDULE_CRON / TIMEZONE)"
        except Exception:
            pass
    return " ".join(str(exc).split())


def nightly_schedule(cron: str, timezone: str) -> CronSchedule:
    """The nightly sweep's schedule; a bad cron or timezone raises ValueError."""
    from prefect.client.schemas.schedules import CronSchedule

    return CronSchedule(cron=cron, timezone=timezone)


def build_deployments(cron: str, timezone: str) -> list[RunnerDeployment]:
    """The two served deployments, defined from the flows themselves."""
    from prefect.deployments.runner import EntrypointType

    from mythloop.settings import get_settings
    from mythloop.sweep import SweepConfig
    from mythloop_flows.feedback_loop import sweep
    from mythloop_flows.film import film

    levels = sorted(set(get_settings().nightly_noise_levels))
    schedule = nightly_schedule(cron, timezone)
    nightly = sweep.to_deployment(
        name=NIGHTLY,
        schedules=[schedule],
        # MIN_REPLICATES replicates: fewer give no interval, so no night could be compared
        parameters={"config": SweepConfig(replicates=NIGHTLY_REPLICATES).model_dump(mode="json"),
                    "noise_levels": levels or None},
        description=("The feedback-loop sweep, C0 vs C3 with the simulated judge, every night. "
                     "Results land in .mythloop/results/<UTC stamp>/ (report.md, metrics.json, "
                     "plots); the report is also an artifact of the run. Two or more "
                     "noise_levels run a noise study: one sweep per level in "
                     "<results>/noise-<level>/ and a noise curve in the report; artifacts keep "
                     "one history per judge and noise level."),
        tags=["mythloop", "sweep", "nightly"],
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    film_deployment = film.to_deployment(
        name=FILM,
        parameters={"request": FILM_FORM_DEFAULTS},
        description=("A Mythos film: six reasoning agents, codegen, verify, render, repair. "
                     "Fill in the prompt and press Run; the video path is in the run's "
                     "artifacts and in .mythloop/runs/mythos/<stamp>-<slug>/manifest.json."),
        tags=["mythloop", "film"],
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    # to_deployment returns the deployment itself when called outside an event loop
    return [cast("RunnerDeployment", nightly), cast("RunnerDeployment", film_deployment)]


def build_alert_deployment() -> RunnerDeployment:
    """The deployment the regression automation runs (served by `mythloop serve`)."""
    from prefect.deployments.runner import EntrypointType

    from mythloop_flows.regression_alert import regression_alert

    alert = regression_alert.to_deployment(
        name=REGRESSION_ALERT,
        parameters={"regression": {}},
        description=("Started by the automation 'mythloop: sweep regression' for each "
                     "mythloop.sweep.regression event (a nightly metric worse than the last "
                     "comparable night beyond its interval): leaves the artifact "
                     "sweep-regression-alert. See docs/operations.md to send it to e-mail or "
                     "Slack instead."),
        tags=["mythloop", "sweep", "regression"],
        entrypoint_type=EntrypointType.MODULE_PATH,
    )
    return cast("RunnerDeployment", alert)  # (called outside an event loop)


def ensure_regression_automation(alert_deployment_id, notify_block: str | None = None):
    """Create or update the automation turning each mythloop.sweep.regression event into a
    run of the regression-alert deployment (and a message through the notification block
    `<type slug>/<name>` when given); idempotent: one automation of that name. Returns it."""
    from prefect.client.orchestration import get_client
    from prefect.events.actions import RunDeployment, SendNotification
    from prefect.events.schemas.automations import AutomationCore, EventTrigger, Posture

    actions: list = [RunDeployment(source="selected", deployment_id=alert_deployment_id,
                                   parameters={"regression": "{{ event.payload }}"})]
    with get_client(sync_client=True) as client:
        if notify_block:
            slug, _, name = notify_block.partition("/")
            block = client.read_block_document_by_name(name=name, block_type_slug=slug)
            actions.insert(0, SendNotification(
                block_document_id=block.id,
                subject="mythloop: {{ event.payload.cond }} {{ event.payload.label }} got worse",
                body=("{{ event.payload.cond }} {{ event.payload.label }}: "
                      "{{ event.payload.before.mean }} -> {{ event.payload.after.mean }}, "
                      "difference {{ event.payload.interval.mean }} [95% CI "
                      "{{ event.payload.interval.lo }}, {{ event.payload.interval.hi }}] against "
                      "the night of {{ event.payload.baseline_night }}. Results: "
                      "{{ event.payload.results_dir }}")))
        automation = AutomationCore(
            name=REGRESSION_AUTOMATION,
            description=("A nightly sweep metric got worse than the last comparable night "
                         "beyond its 95% interval (event mythloop.sweep.regression)."),
            trigger=EventTrigger(expect={"mythloop.sweep.regression"},
                                 posture=Posture.Reactive, threshold=1),
            actions=actions, tags=["mythloop"])
        found = client.read_automations_by_name(REGRESSION_AUTOMATION)
        if found:
            client.update_automation(found[0].id, automation)
            for extra in found[1:]:
                client.delete_automation(extra.id)
            return client.read_automation(found[0].id)
        return client.read_automation(client.create_automation(automation))


def ensure_llm_limit(size: int) -> int:
    """Create (or resize) the tag-based concurrency limit on model calls; idempotent."""
    from prefect.client.orchestration import get_client

    from mythloop.llm import LLM_TAG

    with get_client(sync_client=True) as client:
        client.create_concurrency_limit(tag=LLM_TAG, concurrency_limit=size)
        return client.read_concurrency_limit_by_tag(LLM_TAG).concurrency_limit


def serve_all(deployments: list[RunnerDeployment], *, llm_concurrency: int,
              api_url: str, alert: RunnerDeployment | None = None,
              notify_block: str | None = None) -> None:
    """Create the `llm` limit and the regression automation, then serve the deployments until
    SIGTERM / Ctrl-C."""
    size = ensure_llm_limit(llm_concurrency)
    if alert is not None:
        deployments = [*deployments, alert]
        ensure_regression_automation(alert.apply(), notify_block)
        where = f"notification block {notify_block} and " if notify_block else ""
        print(f"automation '{REGRESSION_AUTOMATION}': each mythloop.sweep.regression event -> "
              f"{where}a {REGRESSION_ALERT} run (artifact sweep-regression-alert)", flush=True)
    ui = api_url.rsplit("/api", 1)[0]
    for deployment in deployments:
        when = ", ".join(f"cron '{getattr(s.schedule, 'cron', '?')}' "
                         f"({getattr(s.schedule, 'timezone', '?')})"
                         for s in deployment.schedules or []) or "on demand"
        print(f"serving {deployment.flow_name}/{deployment.name}: {when}", flush=True)
    print(f"model calls (tag llm) limited to {size} at a time", flush=True)
    print(f"open {ui}/deployments to run a film from its form; Ctrl-C stops serving",
          flush=True)
    from prefect import serve

    serve(*deployments, print_starting_message=False)


def main() -> None:
    """`python deployments/serve.py`: serve with the settings' cron and timezone."""
    from mythloop.settings import get_settings
    from mythloop.state import prepare_environment

    settings = prepare_environment(get_settings())
    from prefect.settings import PREFECT_API_URL

    api_url = PREFECT_API_URL.value()
    if not api_url:
        sys.exit("error: set PREFECT_API_URL (see `mythloop server`), or use `mythloop serve`")
    serve_all(build_deployments(settings.schedule_cron, settings.timezone),
              llm_concurrency=settings.llm_concurrency, api_url=api_url,
              alert=build_alert_deployment(), notify_block=settings.regression_notify_block)


if __name__ == "__main__":
    main()
