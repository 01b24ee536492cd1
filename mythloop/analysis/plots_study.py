"""noise_curve.png: each condition minus the baseline at the last round, by noise level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mythloop.analysis.conclusion import enough
from mythloop.analysis.plots import _STYLES, _colour, _save, plt

__all__ = ["draw_noise_curve"]


def draw_noise_curve(study: dict[str, Any], path: Path) -> Path:
    """One panel per study metric; one line per treated condition with its 95% interval
    as error bars (none where there is no interval); a dotted line at 0."""
    metrics = study["metrics"]
    levels = study["levels"]
    names = list(dict.fromkeys(n for e in study["table"].values() for n in e["differences"]))
    fig, axes = plt.subplots(1, len(metrics), figsize=(3.0 * len(metrics), 3.6), sharey=True)
    fig.subplots_adjust(left=0.06, right=0.99, top=0.80, bottom=0.2, wspace=0.08)
    axes = list(axes) if len(metrics) > 1 else [axes]
    step = min((b - a for a, b in zip(levels, levels[1:], strict=False)), default=0.1)
    dodge = 0.08 * step
    conds = study["conditions"]
    for ax, metric in zip(axes, metrics, strict=True):
        ax.axhline(0.0, color="black", linestyle=":", linewidth=1)
        for i, name in enumerate(names):
            treated = name.split("-")[0]
            ci = conds.index(treated) if treated in conds else i
            shift = (i - (len(names) - 1) / 2) * dodge
            xs, ys, lo, hi, xs_small, ys_small = [], [], [], [], [], []
            for lvl, entry in study["table"].items():
                d = entry["differences"].get(name, {}).get(metric["key"])
                if not d:
                    continue
                if enough(d):
                    xs.append(float(lvl) + shift)
                    ys.append(d["mean"])
                    lo.append(d["mean"] - d["lo"])
                    hi.append(d["hi"] - d["mean"])
                else:
                    xs_small.append(float(lvl) + shift)
                    ys_small.append(d["mean"])
            style, marker = _STYLES[ci % len(_STYLES)]
            colour = _colour(treated, ci)
            label = f"{treated.upper()} - {(study['baseline'] or '?').upper()}"
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], color=colour, linestyle=style, marker=marker,
                            capsize=3, label=label)
            if xs_small:
                ax.plot(xs_small, ys_small, color=colour, linestyle="none", marker=marker,
                        fillstyle="none", label=f"{label} (no interval)")
        ax.set_title(metric["label"], fontsize=9)
        ax.set_xlabel("judge noise")
        ax.set_ylim(-1.05, 1.05)
        ax.set_xticks(levels, [f"{x:g}" for x in levels])
    axes[0].set_ylabel("difference at the last round")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=8, ncols=len(handles))
    fig.suptitle("Difference to the baseline by judge noise (bars: the report's 95% interval)",
                 x=0.01, ha="left", fontsize=10)
    _save(fig, path)
    return path
