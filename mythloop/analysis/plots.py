"""The four figures of the report, drawn headless (Agg) and written atomically."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from mythloop.analysis.metrics import TIERS, VERDICTS  # noqa: E402
from mythloop.analysis.stats import INTERVAL_METHODS  # noqa: E402
from mythloop.fileio import replacing  # noqa: E402

__all__ = ["FIGURES", "draw_figures"]

FIGURES = ("hit_at_3.png", "trap_win_rate.png", "poisoned_rank.png", "verdict_mix.png")
_COLOURS = {"c0": "#7f7f7f", "c3": "#1f77b4", "c4": "#2ca02c", "c5": "#d62728"}
# Equal lines stay visible: each condition has its own dash and marker, and is shifted a
# little along x (DODGE rounds apart per condition), so one never hides another.
_STYLES = (("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (1, 1)), "v"))
_DODGE = 0.06
_FALLBACK = ("#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
_VERDICT_COLOURS = {"HELPFUL": "#2ca02c", "NEUTRAL": "#bdbdbd", "HARMFUL": "#d62728"}
# The footer under a by-round figure: 7 pt text wrapped to the figure's width (about 118
# characters of 7 pt DejaVu Sans fit 6.4 in; 110 leaves room), the axes raised to make room
# for its lines.
_FOOTER_CHARS = 110
_FOOTER_LINE = 0.03  # figure fraction per footer line (7 pt at 4.2 in)


def _colour(cond: str, index: int) -> str:
    return _COLOURS.get(cond, _FALLBACK[index % len(_FALLBACK)])


def _save(fig: Figure, path: Path) -> None:
    """Write the PNG beside its final name, then rename it into place."""
    try:
        with replacing(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100, metadata={"Software": None})
    finally:
        plt.close(fig)


def _by_round(
    metrics: dict[str, Any],
    key: str,
    title: str,
    ylabel: str,
    note: str,
    *,
    invert: bool = False,
    ylim: tuple[float, float] | None = None,
) -> Figure:
    """One line per condition with its 95% interval band (the report's own intervals, which
    stay inside the metric's range), over rounds: a band only where an interval exists, and
    the caption names the method(s) used, or says there is no band."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    drawn = False
    methods: set[str] = set()
    conds = metrics["conditions"]
    for i, cond in enumerate(conds):
        points = sorted(
            (int(r), s[key]) for r, s in metrics["per_round"].get(cond, {}).items() if key in s
        )
        if not points:
            continue
        shift = (i - (len(conds) - 1) / 2) * _DODGE
        xs = [r + 1 + shift for r, _ in points]  # rounds labelled from 1
        n = max(int(s.get("n_replicates") or 0) if not isinstance(s.get("n_replicates"), list)
                else 0 for _, s in points)
        colour = _colour(cond, i)
        style, marker = _STYLES[i % len(_STYLES)]
        ax.plot(
            xs,
            [s["mean"] for _, s in points],
            marker=marker,
            linestyle=style,
            color=colour,
            alpha=0.9,
            label=f"{cond.upper()} ({n} replicate{'s' if n != 1 else ''})",
        )
        banded = [(x, s) for x, (_, s) in zip(xs, points, strict=True)
                  if s.get("lo") is not None]
        if banded:
            ax.fill_between([x for x, _ in banded], [s["lo"] for _, s in banded],
                            [s["hi"] for _, s in banded], color=colour, alpha=0.2)
            methods.update(str(s.get("method", "none")) for _, s in banded)
            if any("prompt variation only" in str(s.get("covers", "")) for _, s in banded):
                methods.add("prompts-only")
        drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    ax.set_xlabel("round (1 = before any learning)")
    ax.set_ylabel(ylabel)
    ax.xaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]  # MaxNLocator
    if ylim:
        ax.set_ylim(*ylim)
    if invert:
        ax.invert_yaxis()
    if drawn:
        ax.legend(loc="best")
    footer = textwrap.wrap(_band_note(methods) + note, _FOOTER_CHARS)
    fig.subplots_adjust(left=0.12, right=0.97, top=0.91,
                        bottom=0.15 + _FOOTER_LINE * len(footer))
    fig.text(0.01, 0.01, "\n".join(footer), fontsize=7, ha="left", va="bottom",
             linespacing=1.2)
    return fig


def _band_note(methods: set[str]) -> str:
    """What the bands are, from the methods actually drawn."""
    if not methods:
        return "no band: no 95% interval could be computed (see report.md)"
    only = "prompts-only" in methods
    shown = sorted(methods - {"prompts-only"})
    text = "bands: 95% " + " / ".join(INTERVAL_METHODS.get(m, m) for m in shown)
    return text + ("; 1 replicate: prompt variation only" if only else "")


def _verdict_mix(metrics: dict[str, Any]) -> Figure:
    """Stacked bars: the share of each verdict per tier, one bar per condition."""
    conds = metrics["conditions"]
    fig, ax = plt.subplots(figsize=(7.2, 4.4))
    fig.subplots_adjust(left=0.1, right=0.98, top=0.84, bottom=0.16)
    width = 0.8 / max(1, len(conds))
    drawn = False
    for ci, cond in enumerate(conds):
        mix = metrics["verdict_mix"].get(cond, {})
        bottoms = [0.0] * len(TIERS)
        for verdict in VERDICTS:
            totals = [sum(mix.get(t, {}).values()) for t in TIERS]
            shares = [
                mix.get(t, {}).get(verdict, 0) / tot if tot else 0.0
                for t, tot in zip(TIERS, totals, strict=True)
            ]
            xs = [ti + (ci - (len(conds) - 1) / 2) * width for ti in range(len(TIERS))]
            ax.bar(
                xs,
                shares,
                width * 0.95,
                bottom=bottoms,
                color=_VERDICT_COLOURS[verdict],
                edgecolor="white",
                label=verdict if ci == 0 else None,
            )
            bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
            drawn = drawn or any(totals)
        for ti, tot in enumerate(sum(mix.get(t, {}).values()) for t in TIERS):
            x = ti + (ci - (len(conds) - 1) / 2) * width
            ax.text(x, 1.01, f"{cond.upper()}\nn={tot}", ha="center", va="bottom", fontsize=7,
                    transform=ax.get_xaxis_transform())
    if not drawn:
        ax.text(0.5, 0.5, "no verdicts", ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks(range(len(TIERS)), [t for t in TIERS])
    ax.set_ylim(0, 1)
    ax.set_ylabel("share of verdicts")
    ax.set_title("Verdict mix per tier (all rounds and replicates)", pad=28)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.07), fontsize=7, ncols=3)
    return fig


def draw_figures(metrics: dict[str, Any], out_dir: Path) -> list[Path]:
    """Draw the four figures into out_dir; returns their paths in FIGURES order."""
    figs = [
        _by_round(
            metrics,
            "in_distribution.hit@3",
            "hit@3 by round (in-distribution prompts)",
            "hit@3",
            "",  # _by_round says what the bands are
            ylim=(-0.05, 1.05),
        ),
        _by_round(
            metrics,
            "trap.trap_win_rate",
            "Trap-win rate by round (gold above its poisoned twin)",
            "trap-win rate",
            "; a twin or gold outside the top 10 counts as rank 11; ties lose",
            ylim=(-0.05, 1.05),
        ),
        _by_round(
            metrics,
            "trap.twin_rank",
            "Rank of the poisoned twin on its trap prompt",
            "mean rank (1 = top)",
            "; outside the top 10 counts as rank 11",
            invert=True,
            ylim=(0.5, 11.5),
        ),
        _verdict_mix(metrics),
    ]
    paths = []
    for fig, name in zip(figs, FIGURES, strict=True):
        path = out_dir / name
        _save(fig, path)
        paths.append(path)
    return paths
