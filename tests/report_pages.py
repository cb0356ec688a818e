"""Checks of a job's report.html: that it is self-contained (`assert_self_contained`), and what a reader sees when
it is opened in a real browser: headless Chromium from Debian's packages (`apt install chromium`). Tests that need
the browser call `require_chromium()`, which skips them, saying why, where it is not installed."""
from __future__ import annotations

import re
import shutil
import struct
import subprocess
from html import unescape
from pathlib import Path

import pytest

TIMEOUT_S = 120


def require_chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        pytest.skip("headless Chromium not found (Debian: apt install chromium); report.html is not rendered")
    return path


def _run(page: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    # --no-sandbox: tests may run as root, where Chromium refuses its sandbox. A fresh profile directory keeps runs
    # apart from each other and from any user profile.
    cmd = [require_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--user-data-dir={tmp / 'chromium-profile'}", *args, Path(page).resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def rendered_text(page: Path, tmp: Path) -> str:
    """The page's DOM after Chromium has parsed and laid it out, as plain text (tags dropped, whitespace folded)."""
    dom = _run(page, tmp, "--dump-dom").stdout
    body = re.sub(r"(?s)<(style|head)\b.*?</\1>", " ", dom)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", body)).split())


def screenshot(page: Path, png: Path, tmp: Path, size: tuple[int, int] = (1200, 2400)) -> tuple[int, int]:
    """Write a screenshot of the page to `png`; returns its (width, height) from the PNG header."""
    _run(page, tmp, f"--screenshot={png}", f"--window-size={size[0]},{size[1]}")
    data = Path(png).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def assert_self_contained(out_dir: Path, *expected: str) -> str:
    """OUT/report.html exists, fetches nothing (no script, no remote or relative reference, plots as data: URIs)
    and holds each `expected` string; returns its text."""
    doc = (Path(out_dir) / "report.html").read_text()
    assert doc.startswith("<!DOCTYPE html>")
    assert not re.search(r"https?://|<script|@import|url\(|<link", doc, re.IGNORECASE)
    assert all(s.startswith("data:image/png;base64,") for s in re.findall(r'src="([^"]*)"', doc))
    for s in expected:
        assert s in doc, s
    return doc
