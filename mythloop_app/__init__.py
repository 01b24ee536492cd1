"""mythloop's application layer: the CLI, the deployments it serves, and the scale-out stack.

    cli          the `mythloop` command (typer); each area's commands in `commands/`
    commands     sweep, analyze, router, film, verify/render, server/serve, doctor
    deployments  the nightly-sweep and film deployments (`mythloop serve`)
    scale        PostgreSQL, a process work pool and workers on one machine (`make scale-demo`)

This is the top layer: it may import `mythloop_flows`, `mythloop_tasks` (the flows/ and tasks/
folders), the `mythloop` library, Prefect and typer; nothing below imports it (`make lint`
checks the contracts in pyproject.toml).
"""
