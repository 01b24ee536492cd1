"""What a model's answer is turned into: extraction, the scene split, safe parsing.

extract.py (JSON objects and Python blocks from a reply, the Scene class), scenes.py (the film
as a header and scene classes, the scene cache key), safe_ast.py (`parse` with limits, for
untrusted code). Imports nothing else from mythloop.mythos.
"""
