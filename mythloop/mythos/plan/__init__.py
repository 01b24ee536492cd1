"""What a film is asked for and planned as: the stage specs, their prompts, the film request.

stages.py (STAGES, the charters, artifact validation), prompts.py (the stage, codegen and
repair prompts), request.py (`FilmRequest`). Imports only `mythloop.mythos.code` from mythos.
"""
