"""mythloop: skill-router feedback sweeps and Mythos films as Prefect workflows.

The `mythloop` package is the domain library: plain Python with no Prefect
imports. Prefect tasks live in the top-level `tasks` package and flows in
`flows`.
"""

__version__ = "0.1.0"
