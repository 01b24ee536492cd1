"""Would other signals, or a catalog that explores, carry C4's learning loop on MetaTool further?
How it measures: docs/performance.md, "bench/metatool_replica.py" (about a minute)."""

from common import part_main
from metatool_cold import replica

VARIANTS = {"c4": {}, "c4 + body": {"body": 0.2}, "c4 + vote": {"vote": 0.5},
            "c4 + body + vote": {"body": 0.2, "vote": 0.5},
            "c4, exploring catalog": {"page": True},
            "c4 + body, exploring catalog": {"body": 0.2, "page": True}}


def run(seeds: tuple[int, ...] = (0, 1)) -> dict:
    """Each variant's dev hit@1 / hit@5 by round (means over the seeds), every tool warm."""
    res = replica(VARIANTS, tuple(seeds), fraction=0)
    return {"rounds": {name: [r["warm"] for r in res[name]] for name in VARIANTS},
            "seeds": list(seeds), "data": res["data"]}


if __name__ == "__main__":  # the harness runs it
    part_main("metatool_replica")
