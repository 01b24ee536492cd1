"""The simulated judge: tiers at noise 0, flip rate at noise 0.2, determinism, omissions, inventions."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from mythloop.data import data_path
from mythloop.llm import get_backend
from mythloop.llm.simulated import BANNER, FLIP, parse_catalog, parse_task, tiers_from_pool

TAG_RE = re.compile(
    r"""<skill-used\s+name="(?P<name>[^"]+)"\s+verdict="(?P<verdict>[A-Z]+)"\s+"""
    r"""reason=(?:"(?P<dq>[^"]*)"|'(?P<sq>[^']*)')\s*/>"""
)


def _tags(text: str) -> dict[str, tuple[str, str]]:
    return {m["name"]: (m["verdict"], m["dq"] if m["dq"] is not None else m["sq"]) for m in TAG_RE.finditer(text)}


def _description(skill_md: Path) -> str:
    m = re.search(r"^description:\s*(.+)$", skill_md.read_text(encoding="utf-8"), re.M)
    return m.group(1).strip().strip("\"'") if m else ""


def _pool() -> tuple[dict[str, str], dict[str, str], str]:
    """(tiers, descriptions, source): the real fixture pool once it holds its 80 skills, else synthetic."""
    pool = data_path("fixtures", "pool")
    tiers = tiers_from_pool(pool) if pool.is_dir() else {}
    if len(tiers) >= 80 and set(tiers.values()) == {"real", "poisoned", "competing", "noise"}:
        descs = {n: _description(pool / t / n / "SKILL.md") for n, t in tiers.items()}
        return tiers, descs, "fixture pool"
    counts = {"real": 10, "poisoned": 5, "competing": 25, "noise": 40}
    tiers = {f"{tier}-skill-{i}": tier for tier, n in counts.items() for i in range(n)}
    return tiers, {n: f"Does {n.replace('-', ' ')} things. Use when needed." for n in tiers}, "synthetic"


TIERS, DESCS, SOURCE = _pool()
REAL = sorted(n for n, t in TIERS.items() if t == "real")


def _prompt(catalog: list[str], task: str) -> str:
    """A learning prompt in the seed's layout: catalog block, contract, then the user task."""
    lines = ["## Skills (mandatory)", "Scan the skills below.", "", "<available_skills>"]
    lines += [f"  - {name}: {DESCS[name]}" for name in catalog]
    lines += ["</available_skills>", "", "---", "Self-evaluation contract: emit <skill-used .../> tags.",
              "", "User task:", task]
    return "\n".join(lines)


def _cases(n: int, size: int = 10, seed: int = 0) -> list[tuple[str, str, str | None]]:
    """(key, prompt, expected) with catalogs mixing every tier; every fourth task has no expected skill."""
    rng = random.Random(seed)
    names = sorted(TIERS)
    out = []
    for i in range(n):
        expected = None if i % 4 == 3 else REAL[i % len(REAL)]
        others = rng.sample([x for x in names if x != expected], size - (expected is not None))
        catalog = ([expected] if expected else []) + others
        rng.shuffle(catalog)
        out.append((f"turn-{i}", _prompt(catalog, f"Task number {i}: please help with my project."), expected))
    return out


CASES = _cases(100)
EXPECTED = {parse_task(p): e for _, p, e in CASES}


def test_prompt_parsing():
    key, prompt, _ = CASES[0]
    assert [n for n, _ in parse_catalog(prompt)] and parse_task(prompt) == "Task number 0: please help with my project."


def test_noise_zero_matches_the_tiers_exactly():
    judge = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.0, seed=7)
    helpful_others = 0
    for key, prompt, expected in CASES:
        tags = _tags(judge.complete(prompt, key=key).text)
        for name, _desc in parse_catalog(prompt):
            tier, got = TIERS[name], tags.get(name, (None, ""))[0]
            if tier == "poisoned":
                assert got == "HARMFUL", (SOURCE, key, name)
            elif name == expected:
                assert got == "HELPFUL", (SOURCE, key, name)
            elif tier in ("real", "competing"):
                # on a task no skill fits (null prompt) the judge says nothing, as the contract asks
                assert got in (("NEUTRAL", "HELPFUL") if expected else (None,)), (key, name, got)
                helpful_others += got == "HELPFUL"
            else:
                assert got is None, (key, name, got)  # noise skills draw no tag
        assert set(tags) <= {n for n, _ in parse_catalog(prompt)}  # no invented names at rate 0
    assert helpful_others > 0  # competing/real neighbours are sometimes judged helpful


def test_flip_rate_at_noise_point_two():
    clean = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.0, seed=7)
    noisy = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.2, seed=7)
    draws = flips = 0
    for key, prompt, _ in CASES:
        text_tags = _tags(noisy.complete(prompt, key=key).text)
        for a, b in zip(clean.decisions(prompt, key), noisy.decisions(prompt, key), strict=True):
            draws += 1
            if a.verdict != b.verdict:
                flips += 1
                assert b.verdict == FLIP[a.verdict]
            # The text carries exactly the decisions (no omissions at rate 0).
            assert text_tags.get(b.name, (None,))[0] == b.verdict
    assert draws == 1000
    assert 0.15 <= flips / draws <= 0.25, flips / draws


def test_same_key_same_answer_in_any_order():
    judge = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.3, seed=3)
    forward = [judge.complete(p, key=k).text for k, p, _ in CASES[:20]]
    again = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.3, seed=3)
    backward = [again.complete(p, key=k).text for k, p, _ in reversed(CASES[:20])][::-1]
    assert forward == backward
    other_seed = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.3, seed=4)
    assert [other_seed.complete(p, key=k).text for k, p, _ in CASES[:20]] != forward


def test_omissions_and_inventions():
    judge = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.0, seed=1,
                        omit_rate=0.3, invent_rate=1.0)
    clean = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.0, seed=1)
    due = left_out = 0
    for key, prompt, _ in CASES:
        shown = {n for n, _ in parse_catalog(prompt)}
        tags = _tags(judge.complete(prompt, key=key).text)
        invented = set(tags) - shown
        assert len(invented) == 1 and not invented & set(TIERS)
        should = {d.name for d in clean.decisions(prompt, key) if d.verdict}
        due += len(should)
        left_out += len(should - set(tags))
    assert 0.2 <= left_out / due <= 0.4


def test_reply_looks_like_a_model_and_says_it_is_simulated():
    judge = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.2, seed=7)
    texts = [judge.complete(p, key=k) for k, p, _ in CASES]
    first = texts[0]
    assert first.simulated and first.backend == "simulated"
    assert first.model == "simulated-judge(noise=0.2,seed=7)"
    reasons = [r for c in texts for _, r in _tags(c.text).values()]
    assert all(c.text.splitlines()[0] == BANNER for c in texts)
    assert all(len(c.text.split("<skill-used")[0].strip()) > len(BANNER) + 20 for c in texts)  # prose first
    assert all(len(r) >= 8 for r in reasons)
    raw = "\n".join(c.text for c in texts)
    assert re.search(r'reason="[^"]*\'[^"]*"', raw), "no apostrophe inside a double-quoted reason"
    assert "reason='" in raw, "no single-quoted reason"


def test_oracle_is_noise_free_whatever_it_is_given():
    oracle = get_backend("oracle", tiers=TIERS, expected=EXPECTED, noise=0.9, omit_rate=0.5, seed=7)
    clean = get_backend("simulated", tiers=TIERS, expected=EXPECTED, noise=0.0, seed=7)
    for key, prompt, _ in CASES[:30]:
        assert oracle.decisions(prompt, key) == clean.decisions(prompt, key)
    reply = oracle.complete(CASES[0][1], key=CASES[0][0])
    assert reply.simulated and reply.backend == "oracle" and "noise=0" in reply.model


def test_rates_are_validated():
    with pytest.raises(ValueError, match="noise"):
        get_backend("simulated", tiers=TIERS, noise=1.5)


@pytest.mark.skipif(SOURCE != "fixture pool", reason="fixture pool not complete yet")
def test_default_tiers_come_from_the_fixture_pool():
    judge = get_backend("simulated", noise=0.0)
    assert judge.tiers == TIERS


PROMPTS = data_path("fixtures", "prompts.yaml")


@pytest.mark.skipif(not PROMPTS.is_file() or SOURCE != "fixture pool", reason="fixtures not complete yet")
def test_trap_prompt_from_the_prompts_file():
    from mythloop.llm.simulated import expected_from_prompts

    expected = expected_from_prompts(PROMPTS)
    task = next(p for p, e in expected.items() if e == "regex-debugger")
    judge = get_backend("simulated", prompts=PROMPTS, noise=0.0, seed=42)
    catalog = ["naive-regex-matcher", "regex-debugger"] + [n for n, t in sorted(TIERS.items()) if t == "noise"][:3]
    tags = _tags(judge.complete(_prompt(catalog, task), key="t_regex").text)
    assert tags["regex-debugger"][0] == "HELPFUL" and tags["naive-regex-matcher"][0] == "HARMFUL"
    assert set(tags) == {"regex-debugger", "naive-regex-matcher"}
