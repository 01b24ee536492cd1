"""The one loader for mythloop's data folders (`agents/`, `fixtures/`, `deployments/`).

Where they are, first match wins:
1. `MYTHLOOP_DATA_ROOT`, when set: a folder holding copies of them (e.g. on a worker host);
2. installed from a wheel or an sdist: package data inside the package, `mythloop/_data/`
   (setup.py maps the repository's top-level folders there);
3. a source checkout (editable install, `make setup`): the top-level folders beside the
   `mythloop` package.
Both 2 and 3 are found through `importlib.resources`, from the `mythloop` package itself.
"""

from __future__ import annotations

import os
from importlib.resources import files
from pathlib import Path

__all__ = ["data_root", "data_path", "agents_dir", "data_origin"]

_FOLDERS = ("agents", "fixtures", "deployments")
_PACKAGED = "_data"


def _package_dir() -> Path:
    package = files("mythloop")
    if not isinstance(package, Path):  # a zip import: the loaders need real folders
        raise FileNotFoundError(f"mythloop is installed as {package}; install it unzipped "
                                "(pip install mythloop-*.whl) to read its data folders")
    return package


def data_root() -> Path:
    override = os.environ.get("MYTHLOOP_DATA_ROOT")
    if override:
        root = Path(override).expanduser().resolve()
        where = "MYTHLOOP_DATA_ROOT"
    else:
        package = _package_dir()
        root = package / _PACKAGED
        if not (root / "fixtures").is_dir():
            root = package.parent
        where = "the installed mythloop package"
    if not (root / "fixtures").is_dir():
        raise FileNotFoundError(
            f"mythloop data folders (agents/, fixtures/, deployments/) not found under {root} "
            f"({where}): set MYTHLOOP_DATA_ROOT to a folder holding them (a source checkout), "
            "or reinstall mythloop (pip install -e . from a checkout, or its wheel)"
        )
    return root


def data_path(folder: str, *parts: str) -> Path:
    if folder not in _FOLDERS:
        raise ValueError(f"unknown data folder {folder!r}; expected one of {_FOLDERS}")
    return data_root().joinpath(folder, *parts)


def agents_dir() -> Path:
    return data_path("agents")


def data_origin() -> str:
    """Which of the three places data_root() uses, in words (for `mythloop doctor`)."""
    if os.environ.get("MYTHLOOP_DATA_ROOT"):
        return "MYTHLOOP_DATA_ROOT"
    return "packaged" if data_root().name == _PACKAGED else "source checkout"
