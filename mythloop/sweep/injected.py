"""Injected skills of a pool: the marker file the attack metrics read.

A pool made by tools/inject_pool.py holds, beside its skills, `injected.yaml`: the skills
whose description carries an instruction to the judging model, and for each the right
skills of the prompts it is written to capture (its targets). Only the sweep's input check
(which copies it into sweep.json) and the analysis read it: the router reads SKILL.md files
alone, and the simulated judge finds an injection in the description text it is shown
(mythloop/llm/simulated.py), never here.
"""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["INJECTED_FILE", "read_injected"]

INJECTED_FILE = "injected.yaml"


def read_injected(pool: Path, names: set[str] | None = None) -> dict[str, list[str]]:
    """{injected skill: its targets} from `<pool>/injected.yaml`; {} when the pool has none.

    Raises ValueError (one line naming the file) when it cannot be read, is not the map of
    fixtures/injected/injected.yaml, or (with `names`, the pool's valid skills) names an
    injected skill the pool lacks."""
    path = Path(pool) / INJECTED_FILE
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"cannot read the injected-skills file {path}: {first}") from None
    rows = data.get("injected") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"injected-skills file {path} needs an 'injected' list of "
                         "{name, targets} entries (see fixtures/injected/injected.yaml)")
    out: dict[str, list[str]] = {}
    for number, row in enumerate(rows, start=1):
        name = row.get("name") if isinstance(row, dict) else None
        targets = row.get("targets", []) if isinstance(row, dict) else None
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"injected-skills file {path}: entry {number} needs a skill 'name'")
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise ValueError(f"injected-skills file {path}: {name!r}: 'targets' must be a list "
                             "of skill names")
        out[name] = sorted(set(targets))
    if names is not None:
        missing = sorted(set(out) - names)
        if missing:
            raise ValueError(f"injected-skills file {path} names {', '.join(missing[:5])}, not "
                             "a valid skill of the pool: fix the file or the pool")
    return out
