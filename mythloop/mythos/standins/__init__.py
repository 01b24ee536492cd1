"""Stand-ins for the models of a film: the offline backend and the replay cassettes.

offline.py (deterministic answers for every stage; the "offline" model backend, found by
`mythloop.llm` through the `mythloop.backends` entry-point group), cassettes.py (the replay
cassettes' topics, `python -m mythloop.mythos.standins.cassettes --check`).
"""
