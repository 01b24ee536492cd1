"""The read-only preview server: types, byte ranges, confinement to its folders, discovery."""

from __future__ import annotations

import httpx
import pytest

from mythloop.preview import PreviewServer, preview_base_url, preview_url_for


@pytest.fixture()
def folders(tmp_path):
    runs, results, secret = tmp_path / "runs", tmp_path / "results", tmp_path / "secret"
    (runs / "mythos" / "film one").mkdir(parents=True)
    results.mkdir()
    secret.mkdir()
    (secret / "key.txt").write_text("do not serve")
    video = runs / "mythos" / "film one" / "film.mp4"
    video.write_bytes(bytes(range(256)) * 40)
    (runs / "mythos" / "film one" / "poster.png").write_bytes(b"\x89PNG\r\n\x1a\nfake")
    (runs / "escape").symlink_to(secret)
    return {"runs": runs, "results": results, "video": video}


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


def test_serves_video_with_type_and_ranges(folders, tmp_path):
    log = tmp_path / "access.log"
    with PreviewServer({"runs": folders["runs"], "results": folders["results"]},
                       access_log=log) as server:
        url = f"{server.url}/runs/mythos/film%20one/film.mp4"
        whole = httpx.get(url)
        assert whole.status_code == 200 and whole.headers["content-type"] == "video/mp4"
        assert whole.content == folders["video"].read_bytes()
        part = httpx.get(url, headers={"Range": "bytes=10-19"})
        assert part.status_code == 206 and part.content == bytes(range(10, 20))
        assert part.headers["content-range"] == f"bytes 10-19/{256 * 40}"
        tail = httpx.get(url, headers={"Range": "bytes=-5"})
        assert tail.content == bytes(range(251, 256))
        assert httpx.get(url, headers={"Range": "bytes=99999-"}).status_code == 416
        assert httpx.head(url).headers["content-length"] == str(256 * 40)
        png = httpx.get(f"{server.url}/runs/mythos/film%20one/poster.png")
        assert png.headers["content-type"] == "image/png"
        httpx.get(f"{server.url}/runs/nothing.png")
    lines = log.read_text().splitlines()
    assert "GET /runs/mythos/film%20one/poster.png 200" in lines
    assert "GET /runs/nothing.png 404" in lines and len(lines) == 7


def test_refuses_writes_listings_and_escapes(folders):
    with PreviewServer({"runs": folders["runs"]}) as server:
        base = server.url
        assert httpx.post(f"{base}/runs/mythos/film%20one/film.mp4", content=b"x").status_code == 405
        assert httpx.get(f"{base}/runs/mythos/").status_code == 404  # no directory listing
        assert httpx.get(f"{base}/runs/escape/key.txt").status_code == 404  # symlink out
        assert httpx.get(f"{base}/runs/../secret/key.txt").status_code == 404
        assert httpx.get(f"{base}/runs/%2e%2e/secret/key.txt").status_code == 404
        assert httpx.get(f"{base}/other/film.mp4").status_code == 404


def test_discovery_file_gives_film_links(folders, tmp_path, monkeypatch):
    monkeypatch.setenv("MYTHLOOP_STATE_DIR", str(tmp_path / "state"))
    assert preview_base_url() is None and preview_url_for(folders["video"]) is None
    server = PreviewServer({"runs": folders["runs"]}).start(record=True)
    try:
        link = preview_url_for(folders["video"])
        assert link == f"{server.url}/runs/mythos/film%20one/film.mp4"
        assert httpx.get(link).status_code == 200
        assert preview_url_for(tmp_path / "elsewhere.mp4") is None
    finally:
        server.stop()
    assert preview_base_url() is None  # the record goes with the server
    assert not (tmp_path / "state" / "preview.json").exists()
