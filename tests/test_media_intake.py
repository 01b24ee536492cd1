"""What a render hands back is hostile too (docs/sandbox.md, "The parent's side of the boundary").

Hostile files, made here with ffmpeg, go to the intake (`sandbox.intake.take_over`, what a
render runs on its outputs) and to the stitch directly: each is refused with one line, and
no byte of the other film it names reaches any output. A benign mp4 and PNG come out as new
files of the parent's. The last test renders a scene that rewrites its own mp4 after manim
wrote it (verify skipped): the render is refused, the next one is fine (slow).
"""

from __future__ import annotations

import os
import resource
import shutil
import struct
import subprocess
import sys
import uuid
import zlib
from pathlib import Path

import pytest

from mythloop import mediacheck, procs
from mythloop.mediacheck import Bounds, MediaRejected
from mythloop.mythos.media.avmux import MuxError, concat_videos, duration_of, still_clip
from mythloop.mythos.sandbox import intake, render_pool, stage_tree
from mythloop.mythos.sandbox.render import _namespaces_work, render_scene

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")

CANARY = f"canary-{uuid.uuid4().hex}"  # in the other film's metadata
MARK = "left-by-the-scene"  # metadata of a benign file, bytes after a PNG's end


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", *args], check=True, timeout=60)


def with_edit_list(data: bytes, entries: int) -> bytes:
    """An mp4's bytes with its video track's edit list made ENTRIES copies of its first entry
    (the boxes above it resized; the mdat before the moov stays where it is)."""
    def walk(offset: int, end: int) -> bytes:
        out = b""
        while offset < end:
            size, box = struct.unpack(">I4s", data[offset:offset + 8])
            body = data[offset + 8:offset + size]
            if box in (b"moov", b"trak", b"edts"):
                body = walk(offset + 8, offset + size)
            elif box == b"elst":
                body = body[:4] + struct.pack(">I", entries) + body[8:20] * entries
            out += struct.pack(">I4s", 8 + len(body), box) + body
            offset += size
        return out
    return walk(0, len(data))


def png_header_claiming(width: int, height: int) -> bytes:
    """A PNG signature and an IHDR (valid CRC) for WIDTH x HEIGHT, then one tiny IDAT."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0"))
            + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> dict[str, Path]:
    """A benign scene mp4 and PNG, another film's video holding the canary, and the hostile
    files a scene could leave in their place."""
    root = tmp_path_factory.mktemp("intake-media")
    made = {name: root / name for name in ("scene.mp4", "scene.png", "other-film.mp4")}
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=1", "-c:v", "libx264",
            "-pix_fmt", "yuv420p", "-metadata", f"title={MARK}", str(made["scene.mp4"]))
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240", "-frames:v", "1",
            str(made["scene.png"]))
    with open(made["scene.png"], "ab") as fh:
        fh.write(MARK.encode())
    _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=320x240:rate=15:duration=1", "-c:v", "libx264",
            "-pix_fmt", "yuv420p", "-metadata", f"title={CANARY}", str(made["other-film.mp4"]))
    other = made["other-film.mp4"]

    def hostile(name: str, data: bytes) -> None:
        made[name] = root / name
        made[name].write_bytes(data)

    hostile("playlist.mp4", f"#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n"
                            f"#EXTINF:1.0,\n{other}\n#EXT-X-ENDLIST\n".encode())
    hostile("live-playlist.mp4", f"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXT-X-MEDIA-SEQUENCE:0"
                                 f"\n#EXTINF:1.0,\n{other}\n".encode())
    hostile("concat-list.mp4", f"ffconcat version 1.0\nfile '{other}'\n".encode())
    scene = made["scene.mp4"].read_bytes()
    hostile("edit-list-100.mp4", with_edit_list(scene, 100))
    hostile("truncated.mp4", scene[: len(scene) * 2 // 3])
    hostile("ftyp-then-playlist.mp4", scene[:32] + b"#EXTM3U\n" + str(other).encode())
    hostile("png-16000.png", png_header_claiming(16000, 16000))
    hostile("svg.png", b'<svg xmlns="http://www.w3.org/2000/svg"><image href="file://'
                       + str(other).encode() + b'"/></svg>')
    made["png-4000.png"] = root / "png-4000.png"
    _ffmpeg("-f", "lavfi", "-i", "color=c=white:size=4000x4000", "-frames:v", "1",
            str(made["png-4000.png"]))
    made["jpeg.png"] = root / "jpeg.png"
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240", "-frames:v", "1", "-f", "mjpeg",
            str(made["jpeg.png"]))
    made["streams-40.mp4"] = root / "streams-40.mp4"
    silence = [arg for _ in range(39) for arg in ("-f", "lavfi", "-i", "anullsrc=d=1")]
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=1", *silence,
            *[arg for i in range(40) for arg in ("-map", str(i))], "-c:v", "libx264",
            "-c:a", "aac", "-t", "1", str(made["streams-40.mp4"]))
    made["mpeg4.mp4"] = root / "mpeg4.mp4"
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=320x240:rate=15:duration=1", "-c:v", "mpeg4",
            str(made["mpeg4.mp4"]))
    made["link.mp4"] = root / "link.mp4"
    made["link.mp4"].symlink_to(other)
    return made


HOSTILE = {  # file -> words of the one line that refuses it
    "playlist.mp4": "not an mp4",
    "live-playlist.mp4": "not an mp4",
    "concat-list.mp4": "not an mp4",
    "edit-list-100.mp4": "edit list of 100 entries",
    "truncated.mp4": "runs past the end of the file",
    "ftyp-then-playlist.mp4": "runs past the end of the file",
    "streams-40.mp4": "has 40 stream(s)",
    "mpeg4.mp4": "not H.264",
    "link.mp4": "not a regular file",
    "png-16000.png": "16000x16000 pixels",
    "png-4000.png": "4000x4000 pixels",
    "jpeg.png": "not a PNG",
    "svg.png": "not a PNG",
}


def _stage_of(tmp_path: Path, media: dict[str, Path], name: str) -> Path:
    """NAME placed where a render leaves its output (a link is kept a link)."""
    folder = tmp_path / "stage" / "media" / "videos" / "scene" / "480p15"
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / ("Scene" + Path(name).suffix)
    if media[name].is_symlink():
        target.symlink_to(media[name].readlink())
    else:
        shutil.copyfile(media[name], target)
    return target


def _no_canary_left(*roots: Path) -> None:
    for root in roots:
        for path, st in stage_tree.walk_files(root, max_depth=32):
            if st.st_size < (64 << 20) and path.is_file() and not path.is_symlink():
                assert CANARY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_output_is_refused_with_one_line(media, tmp_path, state_dir, name):
    target = _stage_of(tmp_path, media, name)
    kind, message = intake.take_over([target], quality="l", max_bytes=512 << 20,
                                     namespaced=_namespaces_work())
    assert kind == "scene_error"
    assert HOSTILE[name] in message and "\n" not in message and CANARY not in message
    assert message.startswith("scene error: a file the render handed back was refused: "
                              f"{target.name}")
    # nothing of the other film was copied anywhere: not beside the file, not in the
    # parent's staging folders (the intake's own is gone)
    _no_canary_left(tmp_path / "stage", state_dir / "render-stage")


def test_every_hostile_file_fails_the_check_by_itself(media):
    for name, words in HOSTILE.items():
        kind = "video" if name.endswith(".mp4") else "image"
        with pytest.raises(MediaRejected, match=words.replace("(", r"\(").replace(")", r"\)")):
            mediacheck.check(media[name], kind, Bounds.for_quality("l"))


def test_a_benign_video_and_still_come_back_as_new_files_of_the_parent(media, tmp_path):
    video = _stage_of(tmp_path, media, "scene.mp4")
    still = _stage_of(tmp_path, media, "scene.png")
    assert all(MARK.encode() in p.read_bytes() for p in (video, still))
    assert intake.take_over([video, still], quality="l", max_bytes=512 << 20,
                            namespaced=_namespaces_work()) == ("ok", "")
    for path in (video, still):  # new files, written by the parent, nothing of the scene's
        assert MARK.encode() not in path.read_bytes()  # container or metadata left
        assert path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o777 == 0o644
    info = mediacheck.check(video, "video")
    assert (info.width, info.height, info.frames) == (320, 240, 15)
    assert abs(duration_of(video) - 1.0) < 0.1
    assert mediacheck.check(still, "image").width == 320
    assert not list(video.parent.glob(".*"))  # no temp file left beside it


def test_a_larger_frame_than_the_quality_makes_is_refused(media, tmp_path):
    """A 320x240 video fits quality l; so would no 1000x1000 one, even with the bytes right."""
    big = tmp_path / "big.mp4"
    _ffmpeg("-f", "lavfi", "-i", "testsrc=size=1000x1000:rate=15:duration=0.2", "-c:v",
            "libx264", "-pix_fmt", "yuv420p", str(big))
    with pytest.raises(MediaRejected, match="1000x1000 pixels"):
        mediacheck.check(big, "video", Bounds.for_quality("l"))
    assert mediacheck.check(big, "video", Bounds.for_quality("h")).width == 1000


@pytest.mark.parametrize("name", ["playlist.mp4", "live-playlist.mp4", "edit-list-100.mp4",
                                  "concat-list.mp4", "link.mp4"])
def test_the_stitch_reads_no_hostile_scene_video(media, tmp_path, name):
    with pytest.raises(RuntimeError, match="could not stitch scene 2"):
        concat_videos([media["scene.mp4"], media[name]], tmp_path / "film.mp4")
    assert not (tmp_path / "film.mp4").exists()
    assert not list(tmp_path.glob(".film*"))  # no list, link or partial film left
    _no_canary_left(tmp_path)


@pytest.mark.parametrize("step", ["hold", "poster", "luma", "mux"])
def test_the_film_steps_read_a_scene_video_only_as_an_mp4(media, tmp_path, step):
    """A scene-cache entry kept before the intake existed could be a playlist: every later
    step forces the mp4 demuxer, so it fails there instead of reading the other film."""
    from mythloop.mythos.media.avmux import hold_last_frame, luma_profile, mux_film, poster_frame

    playlist = media["playlist.mp4"]
    run = {"hold": lambda: hold_last_frame(playlist, 1.0, tmp_path / "held.mp4"),
           "poster": lambda: poster_frame(playlist, tmp_path / "poster.png", at=0.5),
           "luma": lambda: luma_profile(playlist),
           "mux": lambda: mux_film(playlist, tmp_path / "film.mp4")}[step]
    with pytest.raises(MuxError):
        run()
    assert not [p for p in tmp_path.iterdir() if p.suffix in (".mp4", ".png")]
    _no_canary_left(tmp_path)


def test_a_still_clip_refuses_a_huge_png_before_decoding_it(media, tmp_path):
    with pytest.raises(MuxError, match="16000x16000"):
        still_clip(media["png-16000.png"], 2.0, tmp_path / "still.mp4")
    assert not (tmp_path / "still.mp4").exists()


def test_a_tool_run_with_limits_gets_them(tmp_path):
    limits = mediacheck.tool_limits(cpu_s=7, write_bytes=3 << 20, memory_bytes=1 << 30)
    done = procs.run([sys.executable, "-c", "import resource as r; print(*(r.getrlimit(x)[1] "
                      "for x in (r.RLIMIT_AS, r.RLIMIT_CPU, r.RLIMIT_FSIZE)))"],
                     timeout=30, limits=limits)
    assert done.stdout.split() == [str(1 << 30), "7", str(3 << 20)]
    # a write past the size limit ends the tool (SIGXFSZ), it does not fill the disk
    big = tmp_path / "big.bin"
    done = procs.run([sys.executable, "-c", f"open({str(big)!r}, 'wb').write(b'x' * (8 << 20))"],
                     timeout=30, limits=limits)
    assert done.returncode != 0 and big.stat().st_size <= 3 << 20
    assert limits[resource.RLIMIT_CORE] == 0


# --- a render whose scene rewrites its own output -------------------------------------------
REWRITE = '''from manim import *
import struct

OTHER = {other!r}


def with_edit_list(data, entries):
    def walk(offset, end):
        out = b""
        while offset < end:
            size, box = struct.unpack(">I4s", data[offset:offset + 8])
            body = data[offset + 8:offset + size]
            if box in (b"moov", b"trak", b"edts"):
                body = walk(offset + 8, offset + size)
            elif box == b"elst":
                body = body[:4] + struct.pack(">I", entries) + body[8:20] * entries
            out += struct.pack(">I4s", 8 + len(body), box) + body
            offset += size
        return out
    return walk(0, len(data))


def rewrite():
    # after manim wrote the mp4: through numpy, which verify's audit hook lets write here
    path = "media/videos/rewrite/480p15/Rewrite.mp4"
    source = getattr(np, "lib").npyio.DataSource(None)
    with source.open(path, "rb") as fh:
        data = fh.read()
    payload = {payload}
    with source.open(path, "wb") as fh:
        fh.write(payload)


class Rewrite(Scene):
    def construct(self):
        self.play(Create(Square()), run_time=0.3)

    def render(self, *args, **kwargs):  # manim has written the mp4 when this returns
        done = super().render(*args, **kwargs)
        rewrite()
        return done
'''
PAYLOADS = {
    "playlist": ('("#EXTM3U\\n#EXT-X-TARGETDURATION:2\\n#EXTINF:1.0,\\n" + OTHER + '
                 '"\\n#EXT-X-ENDLIST\\n").encode()', "not an mp4"),
    "edit-list": ("with_edit_list(data, 100)", "edit list of 100 entries"),
}


@pytest.mark.slow
@pytest.mark.skipif(not _namespaces_work(), reason="the sandbox needs bubblewrap and root")
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_a_scene_that_rewrites_its_mp4_is_refused_and_the_next_render_is_fine(
        media, tmp_path, payload):
    code, words = PAYLOADS[payload]
    scene = tmp_path / "rewrite.py"
    scene.write_text(REWRITE.format(other=str(media["other-film.mp4"]), payload=code))
    before = intake.stats()["files"]
    result = render_scene(scene, out_dir=tmp_path / "out", quality="l", timeout=120)
    assert not result.ok and result.kind == "scene_error", result.message
    assert words in result.message and "\n" not in result.message
    assert result.log_tail.endswith(result.message)  # what the film's repair prompt reads
    assert result.video_path is None and not list((tmp_path / "out").rglob("*.mp4"))
    assert intake.stats()["files"] == before + 1
    _no_canary_left(tmp_path / "out")
    benign = tmp_path / "benign.py"
    benign.write_text("from manim import *\n\nclass Benign(Scene):\n    def construct(self):\n"
                      "        self.play(Create(Square()), run_time=0.3)\n")
    worker = render_pool.current_pool()
    after = render_scene(benign, out_dir=tmp_path / "next", quality="l", timeout=120)
    assert after.ok, after.message
    assert render_pool.current_pool() is worker  # the same warm pool served it
    info = mediacheck.check(after.video_path, "video", Bounds.for_quality("l"))
    assert info.frames >= 4 and not list((tmp_path / "next").rglob(".*intake*"))


def test_the_refusal_line_carries_no_control_character_or_markup_from_the_file(tmp_path):
    """The file's first bytes and a name the scene chose reach the message only as printable
    ASCII without markdown brackets: the line goes to terminals, logs and Prefect artifacts."""
    folder = tmp_path / "stage" / "media" / "images" / "scene"
    folder.mkdir(parents=True)
    forged = folder / "Still_ManimCE_v\x1b]0;owned\x07[x](http:evil).png"
    forged.write_bytes(b"\x1b[2J`[a](http://x)`\x07")
    kind, message = intake.take_over([forged], quality="l", max_bytes=1 << 20,
                                     namespaced=_namespaces_work())
    assert kind == "scene_error" and "not a PNG" in message
    assert all(" " <= ch <= "~" for ch in message), message
    assert "[" not in message and "](" not in message and "`[" not in message


@pytest.mark.skipif(os.geteuid() != 0 or not _namespaces_work(),
                    reason="the helper sandboxes run as nobody only as root with namespaces")
def test_the_checks_of_a_scene_hold_while_nobody_runs_many_processes(media, tmp_path):
    """RLIMIT_NPROC counts all of `nobody`'s processes on the machine, other renders' too:
    with 200 of them alive (a busy render elsewhere), the frame check and the intake of
    this scene's outputs still run (render.HELPER_NPROC), where a bound of 64 made them
    fail as `unchecked`."""
    from mythloop.mythos.sandbox.layout_frames import sample_frames
    from mythloop.mythos.sandbox.render import HELPER_NPROC, _nobody

    uid, gid = _nobody()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("needs setpriv (util-linux)")
    others = [subprocess.Popen([setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
                                "sleep", "120"], start_new_session=True) for _ in range(200)]
    try:
        assert HELPER_NPROC > 200 + 64
        samples = sample_frames(media["scene.mp4"])
        assert not isinstance(samples, str), samples
        assert len(samples) >= 2 and samples[0].first.shape[2] == 3
        video = _stage_of(tmp_path, media, "scene.mp4")
        assert intake.take_over([video], quality="l", max_bytes=512 << 20,
                                namespaced=True) == ("ok", "")
    finally:
        for proc in others:
            proc.kill()
        for proc in others:
            proc.wait()
