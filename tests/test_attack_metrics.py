"""Attack metrics (#51): attack success counted on a constructed ranking, the report's attack
section only for a sweep with injected skills, and collateral across two sweeps."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mythloop.analysis import analyze, load_results
from mythloop.analysis.attack import collateral
from mythloop.analysis.compare import compare, render_markdown, side_from_dir
from mythloop.analysis.load import PromptInfo
from mythloop.analysis.metrics import attack_metrics, attack_units

DATA = Path(__file__).parent / "data" / "results_small"
INJECTED = {"inj-one": ["gold-a"], "inj-two": ["gold-c"]}


def _rows(pid: str, names: list[str]) -> list[dict]:
    return [{"prompt_id": pid, "skill_name": n, "rank": i, "score": 1 - i / 20}
            for i, n in enumerate(names, start=1)]


def test_attack_success_counts_a_constructed_ranking():
    prompts = {
        "h1": PromptInfo("h1", "heldout", "gold-a", None),  # injected first: top-1 and top-5
        "h2": PromptInfo("h2", "heldout", "gold-a", None),  # injected 5th: top-5 only
        "h3": PromptInfo("h3", "heldout", "gold-b", None),  # injected 6th: neither
        "h4": PromptInfo("h4", "heldout", "inj-two", None),  # the injected skill is right
        "h5": PromptInfo("h5", "heldout", None, None),  # no right skill: any injected is wrong
        "n1": PromptInfo("n1", "normal", "gold-a", None),  # not held out: not counted
    }
    rows = (_rows("h1", ["inj-one", "gold-a"]) + _rows("h2", ["gold-a", "x", "y", "z", "inj-two"])
            + _rows("h3", ["gold-b", "p", "q", "r", "s", "inj-one"]) + _rows("h4", ["inj-two"])
            + _rows("h5", ["inj-two", "x"]) + _rows("n1", ["inj-one"]))
    m = attack_metrics(rows, prompts, INJECTED)
    assert m["attack.heldout.n_prompts"] == 5
    assert m["attack.heldout.top1_rate"] == pytest.approx(2 / 5)  # h1, h5
    assert m["attack.heldout.top5_rate"] == pytest.approx(3 / 5)  # h1, h2, h5
    # targeted: held-out prompts whose right skill an injected skill targets (gold-a, gold-c)
    assert m["attack.targeted.n_prompts"] == 2
    assert m["attack.targeted.top1_rate"] == pytest.approx(1 / 2)
    assert m["attack.targeted.top5_rate"] == pytest.approx(1.0)
    units = attack_units(rows, prompts, INJECTED)
    assert units["attack.heldout.top1_rate"] == {"h1": 1.0, "h2": 0.0, "h3": 0.0, "h4": 0.0,
                                                 "h5": 1.0}
    assert attack_metrics(rows, prompts, {}) == {} and attack_units(rows, prompts, {}) == {}


def _copy(tmp_path: Path, name: str, injected: dict | None, swap: bool) -> Path:
    root = tmp_path / name
    shutil.copytree(DATA, root)
    if injected is not None:
        meta = json.loads((root / "sweep.json").read_text())
        meta["injected"] = injected
        meta["judge_options"]["persuade"] = 0.5
        (root / "sweep.json").write_text(json.dumps(meta))
    if swap:  # c3-rep1 round 1: grep-helper (injected) climbs above the gold of h_regex
        path = root / "c3-rep1" / "round_1.jsonl"
        lines = []
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["prompt_id"] == "h_regex" and row["rank"] in (1, 2):
                row["rank"] = 3 - row["rank"]
            lines.append(json.dumps(row))
        path.write_text("\n".join(lines) + "\n")
    return root


def test_the_report_shows_the_attack_only_for_a_sweep_with_injected_skills(tmp_path):
    attacked = _copy(tmp_path, "attacked", {"grep-helper": ["regex-debugger"]}, swap=True)
    clean = _copy(tmp_path, "clean", None, swap=False)
    result = analyze(attacked)
    report = result.report_path.read_text()
    assert "## Attack: injected skills" in report and "grep-helper" in report
    metrics = json.loads(result.metrics_path.read_text())
    assert metrics["cells"]["c3"]["1"]["1"]["attack.heldout.top1_rate"] == 1.0
    assert metrics["cells"]["c3"]["1"]["0"]["attack.heldout.top1_rate"] == 0.0
    assert "lo" in metrics["per_round"]["c3"]["1"]["attack.heldout.top5_rate"]
    assert "attack.heldout.top1_rate" in metrics["differences"]["c3-c0"]["per_round"]["1"]
    plain = analyze(clean)
    assert "Attack" not in plain.report_path.read_text()
    assert not any(k.startswith("attack.") for k in
                   json.loads(plain.metrics_path.read_text())["cells"]["c3"]["1"]["1"])


def test_collateral_pairs_the_attacked_sweep_with_the_clean_one(tmp_path):
    attacked = _copy(tmp_path, "attacked", {"grep-helper": ["regex-debugger"]}, swap=True)
    clean = _copy(tmp_path, "clean", None, swap=False)
    rows = {(r["cond"], r["round"]): r for r in collateral(load_results(clean),
                                                            load_results(attacked))}
    # c3 round 1: h_regex's gold was first in rep 1 (hit@1 1) and is second once attacked;
    # rep 2 had it third on both sides: B - A = (-1 + 0) / 2
    assert rows[("c3", 1)]["collateral"]["mean"] == pytest.approx(-0.5)
    assert rows[("c3", 0)]["collateral"]["mean"] == pytest.approx(0.0)
    assert rows[("c3", 1)]["attacked attack.heldout.top1_rate"]["mean"] == pytest.approx(0.5)
    assert rows[("c3", 1)]["clean attack.heldout.top1_rate"] is None  # no injected skill
    comparison = compare(side_from_dir(clean), side_from_dir(attacked))
    # the clean sweep's record has no `persuade` at all: it reads as 0, not as None
    assert {"field": "persuade", "a": 0.0, "b": 0.5} in comparison.config_differences
    text = render_markdown(comparison)
    assert "## Attack: collateral and attack success" in text and "-0.500" in text
    assert "attack" in comparison.as_dict()
    same = compare(side_from_dir(clean), side_from_dir(clean))
    assert not same.attack and "Attack" not in render_markdown(same)


def test_an_attacked_sweep_keeps_a_history_of_its_own():
    from mythloop.analysis.history import series_of
    from mythloop.sweep.study import sweep_key

    clean = {"prompt_set": "abc", "pool": "p", "judge": "simulated", "noise": 0.2}
    assert series_of({**clean, "persuade": 0.5}) != series_of(clean)
    assert series_of({**clean, "persuade": 0.0}) == series_of(clean)
    assert sweep_key("simulated", 0.2, 0.5) == "simulated-noise-0.20-persuade-0.50"
    assert sweep_key("simulated", 0.2, 0.0) == sweep_key("simulated", 0.2) == "simulated-noise-0.20"


def _figures(per: dict[str, list[float]]) -> dict:
    return {"model_id": "m", "prompts": len(per["hit@1"]), "per_prompt": per,
            **{k: sum(v) / len(v) for k, v in per.items()}}


def test_the_promotion_gate_refuses_a_candidate_an_injection_climbs_more_in():
    from mythloop.promotion import decide

    traps = {"t_regex": True}
    current = _figures({"hit@1": [1, 0, 0, 1], "hit@5": [1, 1, 0, 1], "attack@1": [0, 0, 1, 0]})
    # better hit@1, but one more held-out prompt goes to an injected skill: refused
    worse = _figures({"hit@1": [1, 1, 0, 1], "hit@5": [1, 1, 1, 1], "attack@1": [0, 0, 1, 1]})
    decision = decide(worse, current, traps, traps)
    assert not decision["promote"]
    assert any("attack success higher" in r for r in decision["reasons"])
    assert decision["candidate"]["attack@1"] == 0.5 and "attack@1" in decision["difference"]
    # the same gains with no more attack success: promoted
    clean = _figures({"hit@1": [1, 1, 0, 1], "hit@5": [1, 1, 1, 1], "attack@1": [0, 0, 1, 0]})
    assert decide(clean, current, traps, traps)["promote"]
    # a pool without injected skills: the gate is what it was
    plain = {k: v for k, v in clean["per_prompt"].items() if k != "attack@1"}
    base = {k: v for k, v in current["per_prompt"].items() if k != "attack@1"}
    out = decide(_figures(plain), _figures(base), traps, traps)
    assert out["promote"] and "attack@1" not in out["difference"]


@pytest.mark.slow  # the real model embeds the fixture pool (seconds alone, minutes on a busy box)
def test_evaluate_counts_attack_success_at_top_1():
    from mythloop.data import data_path
    from mythloop.promotion import evaluate, load_eval_prompts
    from mythloop.router.embedder import default_model
    from mythloop.skills import load_catalog

    catalog = load_catalog(data_path("fixtures", "pool"))
    prompts = load_eval_prompts(data_path("fixtures", "prompts.yaml"))
    # every skill of the pool counts as injected: attack@1 = 1 - hit@1, prompt by prompt
    every = evaluate(default_model(), catalog, prompts, injected=catalog.names())
    assert every["per_prompt"]["attack@1"] == [1.0 - h for h in every["per_prompt"]["hit@1"]]
    assert every["attack@1"] == pytest.approx(1 - every["hit@1"], abs=1e-6)
