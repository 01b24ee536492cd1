"""Mythos films: stage specs and artifact models, charters, prompts, extraction, offline stand-ins, run dirs.

The static check (`verify`) and the sandboxed render (`render`) live beside these modules.
Nothing here imports Prefect or Manim; the flow in `flows/` drives them.
"""
