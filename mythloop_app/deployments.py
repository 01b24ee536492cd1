"""Serve mythloop's deployments from one long-lived process (`mythloop serve`).

    nightly-sweep   mythloop_flows.feedback_loop.sweep   cron (default 0 2 * * *, settings
                                                         timezone), parameters = the SweepConfig
                                                         defaults and noise_levels
                                                         (MYTHLOOP_NIGHTLY_NOISE_LEVELS: two or
                                                         more run a noise study)
    film            mythloop_flows.film.film             no schedule; started from the UI's form

Entrypoints are module paths (the flows/ folder installs as `mythloop_flows`), so flow runs
load the installed flows whatever their working directory: a checkout or an installed wheel.

Also run as `python deployments/serve.py` (PREFECT_API_URL set).
`deployments/prefect.yaml` describes the same deployments for `prefect deploy` and a
process work pool.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # Prefect is imported late, after PREFECT_HOME points at the state folder
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.deployments.runner import RunnerDeployment

NIGHTLY = "nightly-sweep"
FILM = "film"

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
        parameters={"config": SweepConfig().model_dump(mode="json"),
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
    return [nightly, film_deployment]


def ensure_llm_limit(size: int) -> int:
    """Create (or resize) the tag-based concurrency limit on model calls; idempotent."""
    from prefect.client.orchestration import get_client

    from mythloop.llm import LLM_TAG

    with get_client(sync_client=True) as client:
        client.create_concurrency_limit(tag=LLM_TAG, concurrency_limit=size)
        return client.read_concurrency_limit_by_tag(LLM_TAG).concurrency_limit


def serve_all(deployments: list[RunnerDeployment], *, llm_concurrency: int,
              api_url: str) -> None:
    """Create the `llm` limit, then serve the deployments until SIGTERM / Ctrl-C."""
    size = ensure_llm_limit(llm_concurrency)
    ui = api_url.rsplit("/api", 1)[0]
    for deployment in deployments:
        when = ", ".join(f"cron '{s.schedule.cron}' ({s.schedule.timezone})"
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
              llm_concurrency=settings.llm_concurrency, api_url=api_url)


if __name__ == "__main__":
    main()
