"""What the parent does with a render's stage, treating it as hostile data (fast, no render):
deep and over-long trees are walked and removed without recursion, stale-stage cleanup
is not wedged by one bad stage, logs are read as a bounded tail, and the error classifier
stays linear on lines built to make a regex backtrack."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mythloop.mythos.sandbox import render, stage_tree
from mythloop.mythos.sandbox.sandbox_classify import classify


def _chain(root, depth: int, name: str = "d") -> None:
    """DEPTH nested folders under ROOT (made with dir fds: the path outgrows PATH_MAX)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as fh:
            fh.write("x")
    finally:
        os.close(fd)


def test_remove_tree_takes_any_depth_and_any_path_length(tmp_path):
    deep, long = tmp_path / "deep", tmp_path / "long"
    deep.mkdir()
    long.mkdir()
    _chain(deep, 1500)  # recursion: os.walk / rglob / shutil.rmtree of 3.11 fail here
    _chain(long, 40, "n" * 200)  # 8,000-character paths: past PATH_MAX
    (long / "link").symlink_to("/etc")  # never followed
    assert stage_tree.remove_tree(deep) and not deep.exists()
    assert stage_tree.remove_tree(long) and not long.exists()
    assert os.path.isdir("/etc")


def test_walks_stop_at_their_depth_and_never_follow_links(tmp_path):
    _chain(tmp_path, 100)
    (tmp_path / "up").symlink_to(tmp_path)
    files = list(stage_tree.walk_files(tmp_path, max_depth=10))
    assert [p.name for p, _ in files] == ["up"]  # the link itself, not what it points to
    assert len(list(stage_tree.walk_dirs(tmp_path, max_depth=10))) == 10


def test_stale_stage_cleanup_survives_a_deep_stage(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that no process has any more
    bad = tmp_path / f"{render.STAGE_PREFIX}{dead.pid}-abc"
    other = tmp_path / f"{render.STAGE_PREFIX}{dead.pid}-def"
    for stage in (bad, other):
        stage.mkdir()
    _chain(bad, 1500)
    old = time.time() - 7 * 3600
    for stage in (bad, other):
        os.utime(stage, (old, old))
    render._clean_stale_stages(tmp_path)
    assert not bad.exists() and not other.exists()


def test_read_tail_keeps_the_end_and_bounds_memory(tmp_path):
    log = tmp_path / "render.log"
    with open(log, "w") as fh:
        for i in range(200_000):
            fh.write(f"line {i}\n")
    tail = stage_tree.read_tail(log, 4096)
    assert tail.endswith("line 199999\n") and len(tail) <= 4096
    assert tail.startswith("line ")  # the cut first line is dropped
    (tmp_path / "link").symlink_to(log)
    assert stage_tree.read_tail(tmp_path / "link") == ""


_CLASSIFY = """
import sys
from mythloop.mythos.sandbox.sandbox_classify import classify
log = ('File "' * 200_000) + "\\n" + ("a." * 500_000) + "\\n" + ("x" * 300_000 + "Error") + "\\n"
log += 'File "/tmp/mythloop-render/s.py", line 7, in construct\\nValueError: boom\\n'
print(classify(returncode=1, timed_out=False, timeout=60, video=False, log=log,
               scene_file="s.py", limits_text="")[1])
"""


def test_classifier_is_linear_on_lines_built_to_backtrack():
    # the old classifier took ~90 s on the first line alone (quadratic); the bound here is
    # only a hang guard, far above what a linear pass needs
    out = subprocess.run([sys.executable, "-c", _CLASSIFY], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ValueError: boom (scene line 7)" in out.stdout


def test_classifier_reads_only_a_bounded_tail():
    noise = "MemoryError: not the last error\n" + "filler line\n" * 100_000
    kind, message = classify(returncode=1, timed_out=False, timeout=60, video=False,
                             log=noise + "ValueError: real one\n", scene_file="s.py",
                             limits_text="")
    assert kind == "scene_error" and "real one" in message
