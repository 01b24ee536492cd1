"""mythloop.fileio.replacing: a named temp file that replaces its target only when whole."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mythloop.fileio import replacing


def test_replacing_renames_what_a_tool_wrote(tmp_path):
    target = tmp_path / "sub" / "out.mp4"
    with replacing(target) as tmp:
        assert tmp.parent == target.parent and tmp.suffix == ".mp4" and not tmp.exists()
        subprocess.run([sys.executable, "-c", f"open({str(tmp)!r}, 'w').write('new')"],
                       check=True)
    assert target.read_text() == "new"
    assert [p.name for p in target.parent.iterdir()] == ["out.mp4"]


def test_replacing_keeps_the_old_file_when_the_writer_fails(tmp_path):
    target = tmp_path / "out.wav"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the tool failed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.wav"]


def test_replacing_when_nothing_was_written(tmp_path):
    target = tmp_path / "out.png"
    target.write_text("old")
    with pytest.raises(FileNotFoundError), replacing(target):
        pass
    assert target.read_text() == "old"
