"""Headless Debian Chromium for UI checks: the rendered DOM of a page, and a screenshot.

Flags: no sandbox (tests run as root in CI), no GPU, and no background networking, which a
closed network would refuse many times over. Every call gets a fresh profile folder.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["find_chromium", "chromium_render", "visible_text"]

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars", "--window-size=1400,1000"]


def find_chromium() -> str | None:
    """Debian's chromium (or CHROMIUM=path), or None."""
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")


def _run(chromium: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="mythloop-chromium-") as profile:
        return subprocess.run([chromium, *_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, timeout=timeout, start_new_session=True)


def chromium_render(chromium: str, url: str, screenshot: Path | None = None,
                    budget_ms: int = 15_000) -> str:
    """The page's DOM after its scripts ran for `budget_ms` of virtual time; with
    `screenshot`, a 1400x1000 PNG of the same render is written there too."""
    args = [f"--virtual-time-budget={budget_ms}", "--dump-dom"]
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.unlink(missing_ok=True)
        args.append(f"--screenshot={screenshot}")
    done = _run(chromium, [*args, url], timeout=budget_ms / 1000 + 120)
    if screenshot is not None and not screenshot.exists():
        raise RuntimeError(f"chromium wrote no screenshot of {url}: "
                           f"{done.stderr.decode(errors='replace')[-800:]}")
    return done.stdout.decode("utf-8", errors="replace")


def visible_text(dom: str) -> str:
    """The DOM's text without scripts, styles and tags, whitespace collapsed."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    text = re.sub(r"<[^>]+>", " ", text)
    return " ".join(html.unescape(text).split())
