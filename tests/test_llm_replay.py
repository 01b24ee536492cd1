"""Replay cassettes (hit, miss, prompt-hash drift) and the offline stand-in backend."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging

import pytest

from mythloop.llm import BackendError, MissingCassette, get_backend
from mythloop.llm.replay import cassette_path, topic_slug, write_cassette

TOPIC = "Euler's identity"


def test_slug_rule_from_the_contract():
    assert topic_slug("the heat equation") == "the-heat-equation"
    assert topic_slug(TOPIC) == "euler-s-identity"


def test_hit_returns_the_recording(tmp_path, caplog):
    prompt = "charter text\nINPUT ARTIFACT JSON:\n{}"
    path = write_cassette(tmp_path, TOPIC, "intent", prompt, "claude-opus-4", '{"core_claim": "e^{i pi} = -1"}')
    assert path == tmp_path / "euler-s-identity" / "intent.json"
    record = json.loads(path.read_text())
    assert record["prompt_sha256"] == hashlib.sha256(prompt.encode()).hexdigest()
    backend = get_backend("replay", topic=TOPIC, cassette_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="mythloop.llm.replay"):
        reply = backend.complete(prompt, key="intent")
    assert reply.text == '{"core_claim": "e^{i pi} = -1"}'
    assert reply.model == "replay:claude-opus-4" and reply.backend == "replay" and not reply.simulated
    assert not caplog.records


def test_miss_names_the_key_and_path(tmp_path):
    backend = get_backend("replay", topic=TOPIC, cassette_dir=tmp_path)
    with pytest.raises(MissingCassette) as err:
        backend.complete("anything", key="repair-2")
    msg = str(err.value)
    assert "'repair-2'" in msg and str(cassette_path(tmp_path, TOPIC, "repair-2")) in msg


def test_prompt_drift_warns_but_answers(tmp_path, caplog):
    write_cassette(tmp_path, TOPIC, "codegen", "old charter wording", "m", "```python\npass\n```")
    backend = get_backend("replay", topic=TOPIC, cassette_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="mythloop.llm.replay"):
        reply = backend.complete("new charter wording", key="codegen")
    assert reply.text.startswith("```python")
    assert any("differs from the recording" in r.getMessage() and "codegen" in r.getMessage() for r in caplog.records)


def test_null_hash_never_warns_and_bad_files_are_clear(tmp_path, caplog):
    write_cassette(tmp_path, TOPIC, "curriculum", None, "m", "{}")
    backend = get_backend("replay", topic=TOPIC, cassette_dir=tmp_path)
    with caplog.at_level(logging.WARNING, logger="mythloop.llm.replay"):
        backend.complete("whatever", key="curriculum")
    assert not caplog.records
    cassette_path(tmp_path, TOPIC, "intent").write_text("{not json")
    with pytest.raises(BackendError, match="not a valid recording"):
        backend.complete("x", key="intent")
    with pytest.raises(BackendError, match="needs key="):
        backend.complete("x")


HAS_OFFLINE = importlib.util.find_spec("mythloop.mythos.standins.offline") is not None


@pytest.mark.skipif(not HAS_OFFLINE, reason="mythloop.mythos.standins.offline not written yet")
@pytest.mark.parametrize("key", ["intent", "codegen"])
def test_offline_wraps_the_stand_ins(key):
    from mythloop.mythos.standins.offline import offline_response

    reply = get_backend("offline").complete("the heat equation", key=key)
    assert reply.text == offline_response(key, "the heat equation")
    assert reply.backend == "offline" and reply.model == "offline-stand-in" and not reply.simulated


def test_offline_needs_a_key():
    with pytest.raises(BackendError, match="needs key="):
        get_backend("offline").complete("x")
