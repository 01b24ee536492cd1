"""Walk, read and remove what a render left in its stage, treating it as hostile data.

A scene controls its stage: it can leave a folder chain thousands of levels deep, paths
longer than PATH_MAX, a log of hundreds of MiB, links and special files. Nothing here
recurses (no RecursionError at any depth), nothing builds a full path below the stage root
(no ENAMETOOLONG): removal works with directory descriptors, one level at a time, holding
at most two open at once; walks stop at a depth manim never uses; log reads keep a bounded
tail. Each is called only after every process of the render is gone.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

__all__ = ["remove_tree", "walk_files", "read_tail", "MAX_WALK_DEPTH", "LOG_TAIL_BYTES"]

MAX_WALK_DEPTH = 32  # manim's media tree is about 6 levels deep
LOG_TAIL_BYTES = 1 << 20  # what the parent reads of a render log (classification, repair)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _entries(fd: int) -> list[tuple[str, bool]]:
    """(name, is a real directory) for each entry of the open directory FD."""
    with os.scandir(fd) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


def remove_tree(path: str | os.PathLike) -> bool:
    """Remove PATH and everything under it, whatever its depth; True when it is gone.

    Iterative and descriptor-relative: descend into the first subfolder left (closing the
    parent), come back up through `..` when a folder is empty. Never follows a link. An
    entry that cannot be removed is skipped (the rest still goes); never raises OSError.
    """
    path = os.fspath(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(path)
            return True
        except OSError:
            return False
    try:
        fd = os.open(path, _DIR_FLAGS)
    except OSError:
        return False
    names: list[str] = []  # the folder names from PATH down to fd
    stuck: list[set[str]] = [set()]  # per level: subfolders that could not be removed
    try:
        while True:
            try:
                entries = _entries(fd)
            except OSError:
                entries = []
            sub = None
            for name, is_dir in entries:
                if not is_dir:
                    try:
                        os.unlink(name, dir_fd=fd)
                    except OSError:
                        pass
                elif sub is None and name not in stuck[-1]:
                    sub = name
            if sub is not None:
                try:
                    child = os.open(sub, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    try:  # perhaps an empty folder we may not open
                        os.rmdir(sub, dir_fd=fd)
                    except OSError:
                        stuck[-1].add(sub)
                    continue
                os.close(fd)
                fd = child
                names.append(sub)
                stuck.append(set())
                continue
            if not names:
                break
            name = names.pop()
            stuck.pop()
            parent = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                stuck[-1].add(name)
    except OSError:
        pass
    finally:
        os.close(fd)
    try:
        os.rmdir(path)
    except OSError:
        pass
    return not os.path.lexists(path)


def walk_files(root: Path, *, max_depth: int = MAX_WALK_DEPTH,
               skip_dirs: frozenset[str] = frozenset()) -> Iterator[tuple[Path, os.stat_result]]:
    """(path, lstat) of every non-directory under ROOT down to MAX_DEPTH folders, never
    following links; iterative; entries it cannot stat are left out."""
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 < max_depth and entry.name not in skip_dirs:
                    stack.append((Path(entry.path), depth + 1))
            else:
                yield Path(entry.path), st


def walk_dirs(root: Path, *, max_depth: int = MAX_WALK_DEPTH) -> Iterator[Path]:
    """ROOT and every folder under it down to MAX_DEPTH, never following links; iterative."""
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        yield folder
        if depth + 1 >= max_depth:
            continue
        try:
            with os.scandir(folder) as it:
                subs = [Path(e.path) for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        stack.extend((s, depth + 1) for s in subs)


def read_tail(path: Path, limit: int = LOG_TAIL_BYTES) -> str:
    """The last LIMIT bytes of PATH as text ('' when missing, a link or not a file); memory
    stays bounded whatever the file's size. A cut first line is dropped."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        start = max(0, st.st_size - limit)
        chunks, left = [], min(limit, st.st_size)
        os.lseek(fd, start, os.SEEK_SET)
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if start and b"\n" in data:
        data = data.split(b"\n", 1)[1]
    return data.decode("utf-8", errors="replace")
