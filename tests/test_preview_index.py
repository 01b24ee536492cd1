"""The preview server's index pages: /runs/ and /results/ list each run, newest first, with its
prompt (or sweep), state, duration and links; other folders are still never listed."""

from __future__ import annotations

import json

import httpx
import pytest

from mythloop.preview import PreviewServer


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def _film(runs, name, prompt, **manifest):
    run = runs / "mythos" / name
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"prompt": prompt, **manifest}))
    return run


def test_runs_and_results_index_pages_newest_first(tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    old = _film(runs, "20261201-100000-the-heat-equation", "the heat equation",
                created_utc="2026-12-01T10:00:00+00:00",
                completed_utc="2026-12-01T10:02:30+00:00", film={"duration": 74.3})
    (old / "film.mp4").write_bytes(b"video")
    (old / "film.srt").write_text("1\n")
    _film(runs, "20261202-100000-euler-s-identity", "Euler's <identity>",
          created_utc="2026-12-02T10:00:00+00:00", failed={"error": "boom"})
    sweep = results / "20261203-090000"
    sweep.mkdir(parents=True)
    (sweep / "sweep.json").write_text(json.dumps({
        "judge": "simulated", "conditions": ["c0", "c3"], "rounds": 6, "replicates": 3,
        "started_utc": "2026-12-03T09:00:00+00:00",
        "finished_utc": "2026-12-03T09:01:00+00:00"}))
    (sweep / "report.md").write_text("# report\n")
    with PreviewServer({"runs": runs, "results": results}) as server:
        page = httpx.get(f"{server.url}/runs/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        text = page.text
        assert text.index("euler-s-identity") < text.index("the-heat-equation")  # newest first
        assert "Euler&#x27;s &lt;identity&gt;" in text and "failed" in text  # escaped
        assert "completed" in text and "150 s" in text and "film 74.3 s" in text
        link = "/runs/mythos/20261201-100000-the-heat-equation/film.mp4"
        assert f'href="{link}"' in text and "film.vtt" not in text  # only files that exist
        assert httpx.get(f"{server.url}{link}").content == b"video"
        assert httpx.head(f"{server.url}/runs").status_code == 200
        sweeps = httpx.get(f"{server.url}/results/").text
        assert "simulated judge, conditions c0, c3, 6 rounds x 3 replicates" in sweeps
        assert "completed" in sweeps and "60 s" in sweeps and "report.md" in sweeps
        # folders below the two roots are still not listed
        assert httpx.get(f"{server.url}/runs/mythos/").status_code == 404
