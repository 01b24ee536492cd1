"""Untrusted scene code: the static check, the sandboxed render, and what runs inside it.

In the parent: verify.py (layer 1, static), sandbox_policy.py (the tables both layers read),
render.py (the sandboxed render), render_pool.py (warm workers), sandbox_classify.py (what a
failed render was), formula_cache.py, tex_policy.py, layout.py (the layout check),
layout_record.py (the probe's record read as hostile data), layout_frames.py (the layout
verdict from the rendered frames), intake.py (each output checked and remade before the
parent reads it), footprint.py (a render's cgroups and stage filesystem),
scene_cache.py (finished scene videos), stage_tree.py (walks, reads and removal of a
stage a scene wrote, at any depth).
Inside the sandbox, run by path or as source, never imported as part of mythloop:
sandbox_init.py (standard library and pyseccomp), sandbox_worker.py (standard library and manim),
layout_probe.py (standard library, numpy and manim). A contract in pyproject.toml
(`standard_library_only`) keeps them so. See docs/sandbox.md.
"""
