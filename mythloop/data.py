"""The one loader for mythloop's data folders (`agents/`, `fixtures/`, `deployments/`).

They live at the root of the source checkout, beside the `mythloop` package
(mythloop is installed from a checkout with `pip install -e .`).
`MYTHLOOP_DATA_ROOT` points elsewhere, e.g. at a copy on a worker host.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["data_root", "data_path", "agents_dir"]

_FOLDERS = ("agents", "fixtures", "deployments")


def data_root() -> Path:
    override = os.environ.get("MYTHLOOP_DATA_ROOT")
    root = Path(override).expanduser().resolve() if override else Path(__file__).resolve().parents[1]
    if not (root / "fixtures").is_dir():
        raise FileNotFoundError(
            f"mythloop data folders not found under {root}: install mythloop from its source "
            "checkout with `pip install -e .`, or set MYTHLOOP_DATA_ROOT to a checkout"
        )
    return root


def data_path(folder: str, *parts: str) -> Path:
    if folder not in _FOLDERS:
        raise ValueError(f"unknown data folder {folder!r}; expected one of {_FOLDERS}")
    return data_root().joinpath(folder, *parts)


def agents_dir() -> Path:
    return data_path("agents")
