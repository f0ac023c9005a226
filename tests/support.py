"""Helpers for tests that start real processes: free ports, waiting for HTTP, promtool.

Every process a test starts binds to 127.0.0.1 on a port picked here, and is stopped by PID
(``ManagedProcess.stop``) when the test ends.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent
BUILD = REPO / ".build"
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, timeout: float = 30.0, proc: ManagedProcess | None = None) -> requests.Response:
    """Poll ``url`` until it answers (any status) or fail with what the process printed."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited with {proc.popen.returncode}: {proc.output()}")
        try:
            return requests.get(url, timeout=2)
        except requests.RequestException as exc:
            last = exc
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not answer within {timeout} s: {last}"
                       + (f"\n{proc.output()}" if proc else ""))


class ManagedProcess:
    """A subprocess whose output goes to a log file and which is stopped by PID."""

    def __init__(self, name: str, argv: list[str], log_dir: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None):
        self.name = name
        self.log_path = Path(log_dir) / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.popen = subprocess.Popen(
            argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        self._log.flush()
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def wait_for_output(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        """Wait until the process prints a line matching ``pattern`` (e.g. its listen URL)."""
        deadline = time.monotonic() + timeout
        rx = re.compile(pattern)
        while time.monotonic() < deadline:
            m = rx.search(self.output())
            if m:
                return m
            if self.popen.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.popen.returncode}: {self.output()}")
            time.sleep(0.05)
        raise TimeoutError(f"{self.name} did not print {pattern!r} in {timeout} s: {self.output()}")

    def stop(self, timeout: float = 5.0) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(timeout)
        self._log.close()


def venv_tool(name: str) -> str:
    """A console entry point installed in the same environment as the running Python."""
    path = VENV_BIN / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} is not installed: run `make deps`")
    return found


def promtool_check_metrics(text: str) -> subprocess.CompletedProcess:
    """Run ``promtool check metrics`` on an exposition; returns the completed process.

    promtool exits non-zero on format errors and on lint problems (e.g. counters without
    ``_total``); callers assert on returncode and show stdout/stderr."""
    return subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True, timeout=30)
