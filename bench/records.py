"""Benchmark records: one JSON line per measured figure, appended, never rewritten: its part,
name, unit, every repeated value (`values`; a carried-over figure's kept `summary`, with its
`source`) or a `text`, and where it was measured (commit, date, load before and after, cores,
machine, package versions, command, `run` label). bench/RESULTS.md is generated from them."""

import json
import math
import statistics
from pathlib import Path

RECORDS = Path(__file__).resolve().parent / "records"
SKIP = {"load_before", "load_after", "machine", "loads", "load_start", "load_end",
        "tail", "log", "plot"}
NAMES = ("skills", "scene", "workers")  # a list of dicts: each item named by its first of these
UNITS = (("_ms", "ms"), ("_s", "s"), ("_mb", "MB"), ("_gb", "GB"), ("seconds", "s"),
         ("_over_", "x"), ("ratio", "x"), ("speedup", "x"), ("_pct", "%"))


def unit_of(path: list[str]) -> str:
    """The unit a figure's key names (`wall_s` -> s), the nearest key that names one."""
    for key in reversed(path):
        key = f"_{key.lower()}"
        for suffix, unit in UNITS:
            if key.endswith(suffix) or (suffix.startswith("_over") and suffix in key):
                return unit
    return ""


def _summary(d: dict) -> dict | None:
    if d.keys() >= {"median", "min", "max"} and all(
            isinstance(d[k], (int, float)) or d[k] is None for k in ("median", "min", "max")):
        return {"median": d["median"], "min": d["min"], "max": d["max"], "n": d.get("n")}
    if d.keys() >= {"p50_ms", "min_ms", "max_ms"}:
        return {"median": d["p50_ms"], "min": d["min_ms"], "max": d["max_ms"], "n": d.get("n")}
    return None


def flatten(obj: object, path: list[str] | None = None) -> list[dict]:
    """A part's figures as record bodies: a stats dict, number, list, flag or short string each."""
    path = path or []
    name = ".".join(path)
    if isinstance(obj, dict):
        summary = _summary(obj)
        if summary is not None:
            body = {"figure": name, "unit": "ms" if "p50_ms" in obj else unit_of(path)}
            if obj.get("values"):
                return [{**body, "values": list(obj["values"])}]
            return [{**body, "summary": summary}] if summary["median"] is not None else []
        out = []
        for key, value in obj.items():
            if str(key) not in SKIP:
                out += flatten(value, [*path, str(key)])
        return out
    if isinstance(obj, bool):
        return [{"figure": name, "unit": "", "text": str(obj)}]
    if isinstance(obj, (int, float)):
        if isinstance(obj, float) and not math.isfinite(obj):
            return []
        return [{"figure": name, "unit": unit_of(path), "values": [obj]}]
    if isinstance(obj, list):
        if obj and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in obj):
            return [{"figure": name, "unit": unit_of(path), "values": list(obj)}]
        out = []
        for i, item in enumerate(obj):
            key = next((k for k in NAMES if isinstance(item, dict) and k in item), None)
            out += flatten(item, [*path, f"{key}={item[key]}" if key else str(i)])
        return out
    if isinstance(obj, str) and obj and len(obj) <= 160:
        return [{"figure": name, "unit": "", "text": obj}]
    return []


def provenance(part: str, machine: dict, load_before: object, load_after: object,
               command: str, quick: bool = False) -> dict:
    """Where and when a part's figures were measured, from `common.machine_info()`."""
    date = machine["date_utc"][:16] + " UTC"  # when the part started
    return {"part": part, "commit": machine["git"], "date": date, "load_before": load_before,
            "load_after": load_after, "cores": machine["cores_usable"],
            "packages": machine["packages"],
            "machine": {k: machine[k] for k in ("cpu", "cores", "memory_gb", "os", "python")},
            "command": command, "quick": quick,
            "run": f"{part} {machine['git']} {date[:16]}" + (" (quick)" if quick else "")}


def append(records: list[dict], directory: Path = RECORDS) -> None:
    """Add records to their part's file (bench/records/<part>.jsonl), one line each."""
    directory.mkdir(parents=True, exist_ok=True)
    by_part: dict[str, list[str]] = {}
    for rec in records:
        by_part.setdefault(rec["part"], []).append(json.dumps(rec, sort_keys=True))
    for part, lines in by_part.items():
        with open(directory / f"{part}.jsonl", "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")


def load(directory: Path = RECORDS) -> list[dict]:
    """Every record, in file order (parts by name)."""
    out = []
    for path in sorted(directory.glob("*.jsonl")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                out.append({**json.loads(line), "_at": f"{path.name}:{n}"})
    return out


def central(rec: dict) -> float | None:
    """The figure's one number: the median of its values, or its kept median."""
    if rec.get("values"):
        return statistics.median(rec["values"])
    return (rec.get("summary") or {}).get("median")


def spread(rec: dict) -> tuple[float, float, int | None] | None:
    """min, max and n of a repeated figure (n None: a ratio's range); None for one value or text"""
    if rec.get("values") and len(rec["values"]) > 1:
        return min(rec["values"]), max(rec["values"]), len(rec["values"])
    s = rec.get("summary")
    if s and s["min"] is not None and s["max"] is not None and (s.get("n") or 2) > 1 \
            and s["min"] != s["max"]:
        return s["min"], s["max"], s.get("n")
    return None


def busy(rec: dict) -> bool:
    """Measured at a load above the machine's cores (1-minute average, before or after)."""
    cores = rec.get("cores") or 2
    loads = [x[0] if isinstance(x, list) else x
             for x in (rec.get("load_before"), rec.get("load_after")) if x is not None]
    return any(load > cores for load in loads)
