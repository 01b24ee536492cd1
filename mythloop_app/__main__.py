"""`python -m mythloop_app ...` is the `mythloop` command."""

from mythloop_app.cli import main

main()
