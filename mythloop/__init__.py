"""mythloop: skill-router feedback sweeps and Mythos films as Prefect workflows.

The `mythloop` package is the domain library: plain Python with no Prefect
imports. Prefect tasks live in the top-level tasks/ folder and flows in flows/,
installed as the packages `mythloop_tasks` and `mythloop_flows` (setup.py).
"""

__version__ = "0.1.0"
