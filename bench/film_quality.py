"""Film quality of rendered films, from their run dirs: what a viewer gets, measured.
How it measures: docs/performance.md, "bench/film_quality.py"."""

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

from common import part_main

from mythloop.mythos.sandbox.layout import check_layout, scene_zooms

_CUE = re.compile(r"(\d\d:\d\d:\d\d,\d{3}) --> (\d\d:\d\d:\d\d,\d{3})\n(.+)")
_BLACK = re.compile(r"black_start:([\d.]+) black_end:([\d.]+) black_duration:([\d.]+)")


def _secs(stamp: str) -> float:
    hours, minutes, rest = stamp.split(":")
    whole, millis = rest.split(",")
    return int(hours) * 3600 + int(minutes) * 60 + int(whole) + int(millis) / 1000


def rejudged(run: Path, scenes: list[dict]) -> tuple[Counter, Counter] | None:
    """(findings by kind with the planned zooms, without them), or None without probe records."""
    heeded, ignored = Counter(), Counter()
    for index, scene in enumerate(scenes, start=1):
        path = run / "render" / (scene.get("label") or f"scene-{index:02d}") / "media" / \
            "layout.json"
        if not path.is_file():
            return None
        record = json.loads(path.read_text(encoding="utf-8"))
        heeded.update(f.kind for f in check_layout(record, scene_zooms(run, index, len(scenes))))
        ignored.update(f.kind for f in check_layout(record))
    return heeded, ignored


def measure(run: Path) -> dict:
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    film = run / "film.mp4"
    duration = float(subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries",
         "stream=duration", "-of", "csv=p=0", str(film)],
        capture_output=True, text=True, check=True).stdout.strip())
    scenes = manifest["scenes"]
    spans = manifest["film"]["scene_spans"]
    edges = [sum(spans[:i]) for i in range(len(spans) + 1)]
    cues = [(_secs(a), _secs(b), text.strip())
            for a, b, text in _CUE.findall((run / "film.srt").read_text(encoding="utf-8"))]
    inside = 0
    for start, end, text in cues:
        owner = [i for i, s in enumerate(scenes) if text in (s.get("narration") or "")]
        if owner and edges[owner[0]] - 0.01 <= start < end <= edges[owner[0] + 1] + 0.01:
            inside += 1
    words = [round(len((s.get("narration") or "").split()) / span, 2)
             for s, span in zip(scenes, spans, strict=True)]
    judged = rejudged(run, scenes)
    kinds = judged[0] if judged else Counter(f["kind"] for s in scenes
                                             for f in (s.get("layout") or []))
    probe = subprocess.run(["ffmpeg", "-v", "info", "-i", str(film), "-vf",
                            "blackdetect=d=1:pix_th=0.10:pic_th=0.995", "-an", "-f", "null", "-"],
                           capture_output=True, text=True)
    black = [tuple(float(v) for v in m) for m in _BLACK.findall(probe.stderr)]
    return {"run": run.name, "prompt": manifest.get("prompt"),
            "layout_repair": bool((manifest.get("request") or {}).get("layout_repair")),
            "duration_s": round(duration, 1), "scenes": len(scenes),
            "cues_inside": inside, "cues": len(cues), "words_per_s": words,
            "findings": dict(sorted(kinds.items())), "findings_total": sum(kinds.values()),
            "findings_from": "probe records" if judged else "manifest",
            "clipped_zooms_ignored": judged[1].get("clipped", 0) if judged else None,
            "kept_after_failed_repair": sum(1 for s in scenes if s.get("failed_repair")),
            "black_stretches": black}


def run(runs: tuple = ()) -> dict:
    """The figures of each film run dir."""
    if not runs:
        raise SystemExit("film_quality: pass the run dirs: --set 'runs=[\"DIR\", ...]'")
    return {Path(r).name: measure(Path(r)) for r in runs}


if __name__ == "__main__":  # the harness runs it
    part_main("film_quality")
