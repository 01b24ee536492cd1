"""Replay cassettes for films: the prompts a film sends, step by step, and their hashes.

A cassette records the sha256 of the prompt it answered. `expected_prompts(topic)` rebuilds
the prompts the film flow sends when it replays that topic, so a charter edit that changes
a prompt is caught (the replay backend warns; `python -m mythloop.mythos.standins.cassettes --check`
fails) instead of silently orphaning the recording. Repairs are not hashed: their prompt
carries the render's error output, which differs from machine to machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mythloop.data import data_path
from mythloop.fileio import write_json_atomic
from mythloop.llm.replay import cassette_path
from mythloop.mythos.code.extract import extract_json_object
from mythloop.mythos.plan.prompts import codegen_prompt, prompt_sha256, stage_prompt
from mythloop.mythos.plan.stages import STAGES

__all__ = ["expected_prompts", "check", "rehash"]


def _response(cassette_dir: Path, topic: str, key: str) -> str:
    return json.loads(cassette_path(cassette_dir, topic, key).read_text("utf-8"))["response"]


def expected_prompts(topic: str, cassette_dir: Path | None = None) -> dict[str, str]:
    """Step key -> the exact prompt the film flow sends for it when replaying `topic`."""
    cassette_dir = cassette_dir or data_path("fixtures", "cassettes")
    prompts: dict[str, str] = {}
    artifact: dict = {"user_prompt": topic}
    dossier: dict = {}
    for spec in STAGES:
        prompts[spec.slug] = stage_prompt(spec.slug, artifact)
        artifact = extract_json_object(_response(cassette_dir, topic, spec.slug))
        dossier[spec.artifact_name] = artifact
    prompts["codegen"] = codegen_prompt(dossier)
    return prompts


def check(topic: str, cassette_dir: Path | None = None) -> list[str]:
    """Keys whose recorded prompt hash is missing or differs from today's prompt."""
    cassette_dir = cassette_dir or data_path("fixtures", "cassettes")
    stale = []
    for key, prompt in expected_prompts(topic, cassette_dir).items():
        recorded = json.loads(cassette_path(cassette_dir, topic, key).read_text("utf-8"))
        if recorded.get("prompt_sha256") != prompt_sha256(prompt):
            stale.append(key)
    return stale


def rehash(topic: str, cassette_dir: Path | None = None) -> list[str]:
    """Record today's prompt hashes in the cassettes of `topic` (after reviewing a charter edit)."""
    cassette_dir = cassette_dir or data_path("fixtures", "cassettes")
    changed = []
    for key, prompt in expected_prompts(topic, cassette_dir).items():
        path = cassette_path(cassette_dir, topic, key)
        data = json.loads(path.read_text("utf-8"))
        digest = prompt_sha256(prompt)
        if data.get("prompt_sha256") != digest:
            data["prompt_sha256"] = digest
            write_json_atomic(path, data)
            changed.append(key)
    return changed


TOPICS = ("the heat equation", "Euler's identity")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="exit 1 when a cassette's prompt hash differs from today's prompt "
                           "(the default)")
    mode.add_argument("--rehash", action="store_true",
                      help="write today's prompt hashes into the cassettes")
    args = parser.parse_args(argv)
    status = 0
    for topic in TOPICS:
        if args.rehash:
            print(f"{topic}: rehashed {rehash(topic) or 'nothing'}")
        else:
            stale = check(topic)
            print(f"{topic}: {'stale: ' + ', '.join(stale) if stale else 'all prompts match'}")
            status |= bool(stale)
    return status


if __name__ == "__main__":
    sys.exit(main())
