"""Scale-out on Prefect's own pieces: PostgreSQL, a server, a process work pool, workers.

    shards    the shards of a fanned-out sweep and what each left on shared storage
    postgres  a throwaway PostgreSQL cluster on loopback (Debian's postgresql package)
    stack     the whole stack as child processes, stopped without leftovers
    api       the Prefect REST reads the stack needs (plain HTTP)
    demo      `make scale-demo`: a sharded sweep on two workers, checked
    driver    the Prefect side, run only as `python -m mythloop_app.scale.driver` child processes

No module here imports Prefect at import time (docs/scaling.md).
"""
