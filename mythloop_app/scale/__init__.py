"""Scale-out on Prefect's own pieces: PostgreSQL, a server, a process work pool, workers.

    postgres  a throwaway PostgreSQL cluster on loopback (Debian's postgresql package)
    stack     the whole stack as child processes, stopped without leftovers
    api       the Prefect API reads the stack needs (Prefect's own client)
    demo      `make scale-demo`: a sharded sweep on two workers, checked
    driver    the Prefect side, run only as `python -m mythloop_app.scale.driver` child processes

The shard plan itself is library code (`mythloop.sweep.shards`). No module here imports
Prefect at import time: the driving process stays free of Prefect settings (docs/scaling.md).
"""
