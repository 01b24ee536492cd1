"""The fixture study of docs/blend.md: 5 replicates x 6 rounds at noise 0.3, c0 c3 c4 on the
bundled pool and prompts, through the plain loop of bench/sweep.py (no Prefect); prints the
last round's trap-win rate, in-distribution hit@5 and hit@3 minus C0 (mean [95% interval])
and held-out hit@3 per condition.

    python bench/fixture_study.py /tmp/fixture-study      # ~4 min on 2 busy cores
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep import plain_sweep  # noqa: E402

from mythloop.sweep import JudgeOptions, SweepConfig  # noqa: E402


def main(out: Path) -> dict:
    plain_sweep(SweepConfig(conditions=["c0", "c3", "c4"], rounds=6, replicates=5,
                            judge="simulated", judge_options=JudgeOptions(noise=0.3),
                            results_dir=out))
    m = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    last = str(m["last_round"])

    def cell(s: dict | None) -> str | None:
        return None if not s else f"{s['mean']:+.2f} [{s['lo']:+.2f}, {s['hi']:+.2f}]"

    rows = {}
    for cond in m["conditions"]:
        s = m["per_round"][cond][last]
        diff = m["differences"].get(f"{cond}-c0", {}).get("per_round", {}).get(last, {})
        rows[cond] = {"trap_win": round(s["trap.trap_win_rate"]["mean"], 2),
                      "hit@5 - c0": cell(diff.get("in_distribution.hit@5")),
                      "hit@3 - c0": cell(diff.get("in_distribution.hit@3")),
                      "heldout hit@3": round(s["heldout.hit@3"]["mean"], 2)}
    return rows


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1])), indent=1))
