"""Prefect tasks of a Mythos film: one per reasoning stage, codegen, verify, render, repair-N.

Stage and codegen results are cached on (charter text, input artifact, backend,
model) so a rerun after a failed render calls no model for the finished steps.
"""

from __future__ import annotations

from prefect.context import TaskRunContext

from mythloop.mythos.pipeline import FilmSession
from tasks.common import mythloop_task


def _film_cache_key(context: TaskRunContext, parameters: dict) -> str:
    return f"mythloop-film-{parameters['basis']}"


@mythloop_task(name="stage", llm=True, cache_key_fn=_film_cache_key)
def run_stage(session: FilmSession, slug: str, input_artifact: dict, basis: str) -> dict:
    """One reasoning agent: charter + input artifact -> validated JSON artifact."""
    return session.run_stage(slug, input_artifact)


@mythloop_task(name="codegen", llm=True, cache_key_fn=_film_cache_key)
def codegen(session: FilmSession, dossier: dict, basis: str) -> dict:
    """The six artifacts -> one Manim CE scene file."""
    return session.codegen(dossier)


@mythloop_task(name="verify", retries=0)
def verify(code: str, prompt: str) -> dict:
    """Static check of the untrusted scene code (`mythloop verify`)."""
    from mythloop.mythos.verify import verify_scene

    return verify_scene(code, prompt).model_dump()


@mythloop_task(name="render", retries=0)
def render(scene_file: str, scene_name: str, quality: str, timeout: float, out_dir: str) -> dict:
    """Sandboxed manim render (`mythloop render`), killed with its process group at the deadline."""
    from mythloop.mythos.render import render_scene

    return render_scene(scene_file, scene=scene_name or None, quality=quality, timeout=timeout,
                        out_dir=out_dir).model_dump()


@mythloop_task(name="repair", llm=True)
def repair(session: FilmSession, attempt: int, code: str, failure: str) -> dict:
    """The failing file + the error tail -> a repaired scene file."""
    return session.repair(attempt, code, failure)
