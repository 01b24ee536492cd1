"""Scenes that attack the layout check (verify skipped): each overwrites the probe's record
after the probe wrote it (numpy's DataSource, a write the audit hook allows inside the render
dir). A forged "clean" record, a 50 MB one, 20,000 texts and a number where a string goes:
each is a finding, with no traceback and the parent's memory bounded. Real renders (slow).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mythloop.mythos.sandbox.render import _namespaces_work

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not _namespaces_work(), reason="the sandbox needs bubblewrap and root")]

# Each scene shows what the layout check must see (a formula cut by the right edge, two
# captions on top of each other), then replaces the record the probe just wrote.
FORGING = '''from manim import *
import json
import numpy as np


def overwrite(text):
    with getattr(np, "lib").npyio.DataSource(None).open("media/layout.json", "w") as fh:
        fh.write(text)


def record(items, t=1.0):
    return {"scene": "X", "pixel_height": 480, "probe_version": 5, "sample_s": 0.25,
            "snapshots": [{"at": "end", "t": t, "camera": [1, 0, 0, 0, 0, 0],
                           "frame": [14.2222, 8.0], "items": items}]}


class Bad(Scene):
    def construct(self):
        self.add(MathTex(r"u_t = \\alpha u_{xx}", font_size=72).shift(6 * RIGHT))
        self.add(Text("one caption", font_size=30).shift(2 * DOWN))
        self.add(Text("another caption", font_size=30).shift(2.05 * DOWN))
        self.wait(1)

'''
CLI_SCENES = '''
class ForgedEmpty(Bad):  # claims nothing is on screen
    def tear_down(self):
        super().tear_down()
        overwrite(json.dumps(record([])))


class ForgedMoved(Bad):  # claims small texts apart, safely inside the frame
    def tear_down(self):
        super().tear_down()
        overwrite(json.dumps(record([
            {"kind": "text", "label": "a", "box": [-1, 2, 0, 2.5], "em_px": 20, "zoom": 1},
            {"kind": "text", "label": "b", "box": [1, 2, 2, 2.5], "em_px": 20, "zoom": 1}])))


class NumberLabel(Bad):  # a number where the label's string goes
    def tear_down(self):
        super().tear_down()
        overwrite(json.dumps(record([
            {"kind": "text", "label": 12345, "box": [-1, 2, 0, 2.5], "em_px": 20}])))

'''
BIG_SCENES = '''
class Huge(Bad):  # 50 MB of well-formed record
    def tear_down(self):
        super().tear_down()
        snap = json.dumps(record([{"kind": "text", "label": "x" * 60,
                                    "box": [0, 0, 1, 1], "em_px": 20}])["snapshots"][0])
        with getattr(np, "lib").npyio.DataSource(None).open("media/layout.json", "w") as fh:
            fh.write('{"pixel_height": 480, "probe_version": 5, "snapshots": [')
            fh.write(",".join([snap] * (50_000_000 // len(snap))))
            fh.write("]}")


class Crowd(Bad):  # 20,000 small texts in one snapshot, two of them on top of each other
    def tear_down(self):
        super().tear_down()
        items = [{"kind": "text", "label": f"t{n}", "em_px": 20, "zoom": 1,
                   "box": [-7 + (n % 200) * 0.07, -2.5 + (n // 200) * 0.05,
                           -6.96 + (n % 200) * 0.07, -2.47 + (n // 200) * 0.05]}
                 for n in range(20_000)]
        items += [{"kind": "text", "label": "twin", "box": [0, 3, 1, 3.3], "em_px": 20}] * 2
        overwrite(json.dumps(record(items)))
'''

_PEAK = """
import json, sys
from mythloop.mythos.sandbox.render import render_scene
out = {}
for name in sys.argv[3:]:
    r = render_scene(sys.argv[1], scene=name, out_dir=sys.argv[2] + "/" + name, timeout=240,
                     layout=True)
    out[name] = {"ok": r.ok, "message": r.message,
                 "findings": [f.as_dict() for f in r.layout_findings or []]}
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM")][0].split()[1]
print(json.dumps({"peak_kb": int(hwm), "scenes": out}))
"""


def _scene_file(folder, scenes: str):
    path = folder / "forging.py"
    path.write_text(FORGING + scenes, encoding="utf-8")
    return path


def test_a_forged_clean_record_still_fails_strict(tmp_path, state_dir):
    """`render --layout --strict`: the forged records (nothing on screen; texts moved apart)
    and a number in a label are each reported, exit 1, no traceback."""
    proc = subprocess.run(
        [sys.executable, "-m", "mythloop_app.cli", "render", str(_scene_file(tmp_path, CLI_SCENES)),
         "--quiet", "--layout", "--strict", "--out", str(tmp_path / "out")],
        env={**os.environ, "MYTHLOOP_STATE_DIR": str(state_dir)},
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()

    def kinds(scene: str) -> set[str]:
        return {ln.split()[2] for ln in lines if ln.startswith(f"layout: {scene} ")}

    # the honest record's findings would be off_frame and overlap; the frames show the edge
    for forged in ("ForgedEmpty", "ForgedMoved"):
        assert {"edge", "unexplained"} <= kinds(forged), lines
    assert "edge" in kinds("NumberLabel") and "unchecked" in kinds("NumberLabel")
    [number] = [ln for ln in lines if ln.startswith("layout: NumberLabel unchecked")]
    assert "items[0].label" in number and "string" in number


def test_a_huge_record_and_20000_texts_keep_the_parent_small(tmp_path, state_dir):
    scene_file = _scene_file(tmp_path, BIG_SCENES)
    proc = subprocess.run([sys.executable, "-c", _PEAK, str(scene_file), str(tmp_path),
                           "Huge", "Crowd"],
                          env={**os.environ, "MYTHLOOP_STATE_DIR": str(state_dir)},
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["peak_kb"] < 300 * 1024, report["peak_kb"]
    huge, crowd = report["scenes"]["Huge"], report["scenes"]["Crowd"]
    assert huge["ok"] and crowd["ok"], (huge["message"], crowd["message"])
    [too_large] = [f for f in huge["findings"] if f["kind"] == "unchecked"]
    assert too_large["detail"].startswith("layout record too large")
    assert "edge" in {f["kind"] for f in huge["findings"]}  # the frames still judged
    assert any(f["kind"] == "overlap" and "'twin' and 'twin'" in f["what"]
               for f in crowd["findings"])
    assert len(crowd["findings"]) <= 50
