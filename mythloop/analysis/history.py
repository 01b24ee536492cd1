"""Sweeps across nights: one history file in the state dir, one row per condition and metric.

    <state>/history.jsonl           a row per (night, condition, headline metric): the last
                                    round's mean, interval, n, per-replicate values and
                                    per-prompt values (`units`: compare pairs two nights by
                                    prompt), and what makes two nights comparable (`series`)

Crash-safe and one writer at a time: a night's rows are appended under an exclusive file lock
(`history.jsonl.lock`) as one write, fsynced. Each row says how many rows its night has; a
night cut short by a kill (fewer rows, or a torn last line) is left out when read, and the
next append starts on a fresh line. A results dir is one night: appending it again adds
nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt  # Agg: the package's __init__ (-> plots.py) chose it first

from mythloop.analysis.compute import HEADLINE
from mythloop.analysis.metrics import metric_range
from mythloop.analysis.report import fmt
from mythloop.fileio import jsonl_text, read_jsonl, replacing
from mythloop.settings import get_settings
from mythloop.sweep.records import SweepRecord

__all__ = ["HISTORY_FILE", "Night", "append_night", "draw_history", "history_path", "last_comparable",
           "night_rows", "prompt_set_hash", "read_nights", "series_of", "trend_rows"]

HISTORY_FILE = "history.jsonl"
# The configuration that makes two nights comparable (replicates and seed may differ).
SERIES_FIELDS = ("prompt_set", "pool", "judge", "noise", "model", "embedder", "rounds",
                 "conditions")


def history_path(state_root: Path | None = None) -> Path:
    if state_root is None:
        state_root = get_settings().state_root
    return Path(state_root) / HISTORY_FILE


def prompt_set_hash(prompts: dict[str, Any]) -> str:
    """sha256 (first 16 hex) of the prompt ids with their kind, gold and twin."""
    canon = json.dumps({pid: [p.get("kind"), p.get("expected_skill"), p.get("poisoned_twin")]
                        for pid, p in sorted(prompts.items())}, sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def sweep_record(metrics: dict[str, Any]) -> SweepRecord:
    """The sweep.json copy in metrics.json, read through its model (SweepRecordError, one
    line, when it is not one)."""
    return SweepRecord.from_json(metrics.get("sweep") or {}, "metrics.json's sweep record")


def sweep_fields(metrics: dict[str, Any]) -> dict[str, Any]:
    """The configuration of a sweep as compare and the history name it."""
    sweep = sweep_record(metrics)
    return {
        "prompt_set": prompt_set_hash(metrics.get("prompts") or {}),
        "prompts_file": sweep.prompts_file,
        "pool": sweep.pool,
        "judge": sweep.judge,
        "noise": sweep.judge_options.get("noise"),
        **({"persuade": persuade} if (persuade := sweep.judge_options.get("persuade")) else {}),
        "model": sweep.model,
        "embedder": sweep.embedder,
        "rounds": sweep.rounds,
        "replicates": sweep.replicates,
        "conditions": list(metrics.get("conditions") or []),
        "seed": sweep.seed,
        "replicate_seeds": sweep.seeds_by_replicate(),  # older sweep.json: a list
    }


def series_of(fields: dict[str, Any]) -> str:
    canon_fields = {k: fields.get(k) for k in SERIES_FIELDS}
    if fields.get("persuade"):  # an attacked sweep (--judge-persuade) is a series of its own;
        canon_fields["persuade"] = fields["persuade"]  # the others' series are as they were
    canon = json.dumps(canon_fields, sort_keys=True, default=str)
    return hashlib.sha256(canon.encode()).hexdigest()[:12]


def night_rows(metrics: dict[str, Any], results_dir: Path | str,
               *, sweep_key: str | None = None) -> list[dict[str, Any]]:
    """One row per condition and headline metric at the sweep's last round."""
    sweep = sweep_record(metrics)
    fields = sweep_fields(metrics)
    night = sweep.finished_utc or sweep.started_utc or ""
    last = metrics.get("last_round", 0)
    # One night per results dir: rerunning a finished sweep's analysis adds nothing.
    base = {"night": night, "night_id": str(Path(results_dir)),
            "results_dir": str(results_dir), "sweep_key": sweep_key,
            "series": series_of(fields), **fields, "last_round": last}
    rows = []
    for cond in metrics.get("conditions") or []:
        summaries = (metrics.get("per_round") or {}).get(cond, {}).get(str(last), {})
        for key, label in HEADLINE:
            s = summaries.get(key)
            if not s:
                continue
            units = ((metrics.get("last_round_units") or {}).get(cond) or {}).get(key)
            rows.append({**base, "cond": cond, "metric": key, "label": label,
                         "mean": s["mean"], "lo": s["lo"], "hi": s["hi"], "n": s["n"],
                         "method": s.get("method"),
                         "replicate_ids": s.get("replicates") or [],
                         "values": s.get("values") or [],
                         # per prompt x replicate: compare pairs two nights by prompt
                         "units": units})
    for row in rows:
        row["rows_in_night"] = len(rows)
    return rows


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock beside PATH: one writer at a time, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def append_night(rows: list[dict[str, Any]], path: Path | None = None) -> bool:
    """Append a night's rows as one fsynced write under the lock; False when that night is
    already there (or has no rows)."""
    if not rows:
        return False
    path = path or history_path()
    with _locked(path):
        if any(n.night_id == rows[0]["night_id"] for n in read_nights(path)):
            return False
        token = secrets.token_hex(6)  # this write: a torn earlier try of the night stays apart
        text = jsonl_text([{**row, "write": token} for row in rows])
        with open(path, "ab") as fh:
            if path.stat().st_size > 0:
                with open(path, "rb") as tail:
                    tail.seek(-1, os.SEEK_END)
                    if tail.read(1) != b"\n":  # a torn line from a kill: start a fresh one
                        text = "\n" + text
            fh.write(text.encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())
    return True


@dataclass
class Night:
    night_id: str
    night: str
    results_dir: str
    series: str
    rows: list[dict[str, Any]]

    @property
    def fields(self) -> dict[str, Any]:
        return self.rows[0]


def read_nights(path: Path | None = None) -> list[Night]:
    """Every complete night, oldest first (torn lines and nights cut short left out)."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in read_jsonl(path or history_path()):
        if isinstance(row, dict) and {"night_id", "rows_in_night", "write"} <= set(row):
            grouped.setdefault(row["write"], []).append(row)
    nights: dict[str, Night] = {}
    for rows in grouped.values():
        first = rows[0]
        if len(rows) == first["rows_in_night"] and first["night_id"] not in nights:
            nights[first["night_id"]] = Night(first["night_id"], first["night"],
                                              first["results_dir"], first["series"], rows)
    return sorted(nights.values(), key=lambda n: n.night)


def last_comparable(nights: list[Night], series: str, *, exclude_dir: str | None = None,
                    on_date: str | None = None) -> Night | None:
    """The latest night of that series (on that UTC date, YYYY-MM-DD, when given), other than
    the results dir being compared."""
    found = [n for n in nights if n.series == series and n.results_dir != exclude_dir
             and (on_date is None or n.night.startswith(on_date))]
    return found[-1] if found else None


def draw_history(nights: list[Night], path: Path) -> Path:
    """history.png: each headline metric per night (one panel each), one line per condition,
    every condition of a night at that night's x (its own marker), with the report's 95%
    interval where there is one; the y-axis spans the metric's range."""
    fig = history_figure(nights)
    try:
        with replacing(path) as tmp:
            fig.savefig(tmp, format="png", dpi=90, metadata={"Software": None})
    finally:
        plt.close(fig)
    return path


def history_figure(nights: list[Night]) -> Any:
    """The figure of `draw_history` (not saved, not closed)."""
    fig, axes = plt.subplots(3, 3, figsize=(13, 9), sharex=True)
    conds = sorted({r["cond"] for n in nights for r in n.rows})
    labels = [n.night[5:16].replace("T", " ") for n in nights]
    markers = ("o", "s", "^", "D", "v")
    for ax, (key, label) in zip(axes.flat, HEADLINE, strict=True):
        for i, cond in enumerate(conds):
            xs, ys, lo, hi = [], [], [], []
            for x, night in enumerate(nights):
                row = next((r for r in night.rows if r["cond"] == cond and r["metric"] == key),
                           None)
                if row is None:
                    continue
                xs.append(x)
                ys.append(row["mean"])
                ok = row.get("lo") is not None and row.get("hi") is not None
                lo.append(max(row["mean"] - row["lo"], 0.0) if ok else 0.0)
                hi.append(max(row["hi"] - row["mean"], 0.0) if ok else 0.0)
            if xs:
                ax.errorbar(xs, ys, yerr=[lo, hi], marker=markers[i % len(markers)],
                            fillstyle="none" if i else "full", capsize=3, label=cond)
        low, high = metric_range(key)
        if low is not None and high is not None:
            pad = 0.05 * (high - low)
            ax.set_ylim(low - pad, high + pad)
        ax.set_xlim(-0.5, max(len(nights) - 0.5, 0.5))
        ax.set_title(label, fontsize=9)
        ax.set_xticks(range(len(nights)), labels, rotation=45, ha="right", fontsize=7)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("last round per night: mean with its 95% interval (prompts x replicates, "
                 "as in report.md); every condition of a night at the same x", fontsize=10)
    fig.tight_layout()
    return fig


def trend_rows(nights: list[Night]) -> list[dict[str, str]]:
    """The history as table rows (the Prefect table artifact): a row per night and condition."""
    out = []
    for night in nights:
        by = {(r["cond"], r["metric"]): r for r in night.rows}
        for cond in sorted({r["cond"] for r in night.rows}):
            out.append({"night": night.night[:19], "condition": cond,
                        **{label: fmt(by.get((cond, key)), digits=2) for key, label in HEADLINE},
                        "results dir": night.results_dir})
    return out
