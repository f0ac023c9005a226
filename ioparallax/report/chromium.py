"""Headless Chromium (Debian package ``chromium``): the report's PDF, and the browser checks of the tests.

Chromium prints exactly what the HTML shows in a browser (the same CSS engine, the same SVG), so the
PDF needs no second layout. Chromium's own background requests (update checks, network time,
sign-in) are switched off where a flag exists, and the rest is sent to a proxy on a closed loopback
port: nothing leaves the machine.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-domain-reliability",
    "--disable-client-side-phishing-detection",
    "--no-pings",
    "--disable-breakpad",
    "--disable-features=Translate,OptimizationHints,MediaRouter,NetworkTimeServiceQuerying",
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]


def executable() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise RuntimeError("no chromium on PATH (Debian: apt-get install chromium; `make deps` installs it)")


def run(url: str, *extra: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Chromium on one URL with a fresh profile; raises RuntimeError naming the URL on failure."""
    with tempfile.TemporaryDirectory(prefix="ioparallax-chromium-") as profile:
        argv = [executable(), *FLAGS, f"--user-data-dir={profile}", *extra, url]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"chromium did not finish with {url} in {timeout:g} s") from None
    if done.returncode != 0:
        raise RuntimeError(f"chromium failed on {url} (exit {done.returncode}): {done.stderr[-400:]}")
    return done


def print_pdf(html_path: Path, pdf_path: Path, timeout: float = 120.0) -> None:
    pdf_path.parent.mkdir(parents=True, exist_ok=True)
    run(
        html_path.resolve().as_uri(),
        "--no-pdf-header-footer",
        "--run-all-compositor-stages-before-draw",
        f"--print-to-pdf={pdf_path.resolve()}",
        timeout=timeout,
    )
    if not pdf_path.exists() or pdf_path.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no PDF for {html_path}")


def screenshot(url: str, png: Path, width: int = 1400, height: int = 1000, timeout: float = 120.0) -> None:
    png.parent.mkdir(parents=True, exist_ok=True)
    run(url, f"--window-size={width},{height}", f"--screenshot={png.resolve()}", timeout=timeout)
