"""Compare two selections of benchmark records, figure by figure (A, B: a commit or a run label).
How it tells noise from a change: docs/performance.md, "Reading a figure"."""

import argparse
import sys
from pathlib import Path

import records
from report import latest, value

ALPHA = 0.05


def select(recs: list[dict], selection: str) -> dict[tuple[str, str], dict]:
    """The latest record of each figure the selection holds."""
    return latest([r for r in recs if r.get("run") == selection
                   or str(r.get("commit") or "").startswith(selection)])


def verdict(a: dict, b: dict) -> str:
    """Whether B differs from A beyond the noise of their repeated values."""
    if "text" in a or "text" in b:
        return "same" if a.get("text") == b.get("text") else "changed"
    xs, ys = a.get("values") or [], b.get("values") or []
    if len(xs) < 2 or len(ys) < 2:
        kept = "only a median and range kept" if a.get("summary") or b.get("summary") \
            else "fewer than 2 recorded values on a side"
        return f"cannot tell ({kept})"
    if len(set(xs)) == 1 and len(set(ys)) == 1:
        return "same" if xs[0] == ys[0] else "beyond noise (no spread on either side)"
    from scipy import stats  # noqa: PLC0415 (heavy; only for a comparison)

    p = stats.ttest_ind(xs, ys, equal_var=False).pvalue
    word = "beyond noise" if p < ALPHA else "within noise"
    ma, mb = records.central(a), records.central(b)
    change = f", {(mb - ma) / ma:+.1%}" if ma else ""
    return f"{word} (Welch t-test p={p:.3f}{change})"


def compare(recs: list[dict], a: str, b: str, part: str | None = None,
            show_all: bool = False) -> list[str]:
    left, right = select(recs, a), select(recs, b)
    if not left or not right:
        missing = a if not left else b
        return [f"compare: no records match {missing!r} (a commit prefix or a run label)"]
    keys = sorted(k for k in left.keys() & right.keys() if not part or k[0] == part)
    words = {k: verdict(left[k], right[k]) for k in keys}
    lines = [f"{k[0]} {k[1]}: {value(left[k])} -> {value(right[k])}: {word}"
             for k, word in words.items() if show_all or not word.startswith(("same", "cannot"))]
    return lines or ["compare: no figure both selections hold differs (--all lists them)"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--part", help="only this part's figures")
    parser.add_argument("--all", action="store_true", help="also figures that cannot be told "
                        "apart or did not change")
    parser.add_argument("--records", type=Path, default=records.RECORDS)
    args = parser.parse_args(argv)
    lines = compare(records.load(args.records), args.a, args.b, args.part, args.all)
    print("\n".join(lines))
    return 1 if lines[0].startswith("compare: no records") else 0


if __name__ == "__main__":
    sys.exit(main())
