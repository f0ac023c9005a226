"""Finding and reading DiskSPD result files (the transport layer of the DiskSPD exporter).

DiskSPD writes its ``-Rxml`` document once, at the end of the run, and the files usually arrive on
the collector host by copy (``scp``, SMB, a CI artifact). A :class:`ResultFiles` lists the watched
paths at each poll (shared code: ioparallax.exporters.common.watchdir), parses a file only when it
changed (same device, inode, size and mtime: not even opened), and keeps per file either the
parsed result or why it is down. A file that ends early and was modified within ``settle_s`` is a
copy still under way: shown as incomplete (not an error) until it settles. Each file is read in
isolation: nothing one file holds affects the others.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ioparallax.exporters.common.watchdir import display_name, list_files, open_regular, watched_directory
from ioparallax.exporters.diskspd.parse import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DiskspdError,
    DiskspdResult,
    TooLarge,
    Truncated,
    parse_bytes,
)

log = logging.getLogger(__name__)

#: Why a file is down (the ``reason`` label of ``diskspd_source_error_info``).
REASONS = (
    "unreadable",
    "corrupt",
    "truncated",
    "not_diskspd",
    "invalid_value",
    "forbidden_markup",
    "too_large",
    "internal_error",
)


@dataclass
class WatchConfig:
    paths: list[str]
    pattern: str = "*.xml"
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    settle_s: float = 5.0  # a cut-off file modified this recently is a copy under way
    retention_s: float = 3600.0  # a run stays visible this long after it ended / arrived; 0: forever


@dataclass
class FileState:
    path: str  # as the file system gives it (may hold surrogate escapes)
    name: str  # display_name(path): the ``source`` label
    result: DiskspdResult | None = None
    reason: str | None = None  # one of REASONS; None: up
    detail: str | None = None
    incomplete: bool = False  # cut off but recently modified: a copy under way
    mtime: float = 0.0
    parses: int = 0
    read_errors: int = 0
    seen: tuple[int, int, int, int] | None = None  # (dev, ino, size, mtime_ns) last parsed

    @property
    def up(self) -> bool:
        return self.reason is None


@dataclass
class SourceView:
    """A consistent snapshot of one file for the collector."""

    path: str
    name: str
    up: bool
    reason: str | None
    detail: str | None
    result: DiskspdResult | None
    incomplete: bool
    mtime: float
    read_errors: int
    visible: bool


def run_end(result: DiskspdResult) -> float | None:
    """When the run ended: RunTime plus every time span's warm-up, test time and cool-down."""
    if result.run_time is None:
        return None
    total = 0.0
    for i, span in enumerate(result.spans):
        prof = result.profiles[i] if i < len(result.profiles) else None
        total += (prof.warmup_s + prof.cooldown_s if prof else 0.0) + span.test_time_s
    return result.run_time + total


class ResultFiles:
    """Every DiskSPD result file under the watched paths; thread-safe."""

    def __init__(self, config: WatchConfig, clock: Callable[[], float] = time.time):
        self.config = config
        self.clock = clock
        self.files: dict[str, FileState] = {}
        self.missing_paths: list[str] = []
        self._logged_missing: set[str] = set()
        self._lock = threading.Lock()

    def poll(self) -> None:
        with self._lock:
            found, missing = list_files(self.config.paths, self.config.pattern)
            for m in missing:
                if m not in self._logged_missing:
                    log.warning("watched path cannot be read: %s", display_name(m))
            self._logged_missing = set(missing)
            self.missing_paths = [display_name(m) for m in missing]
            for gone in set(self.files) - set(found):
                log.info("DiskSPD result file is gone, forgetting it: %s", self.files[gone].name)
                del self.files[gone]
            for path in found:
                state = self.files.get(path)
                if state is None:
                    state = self.files[path] = FileState(path=path, name=display_name(path))
                try:
                    self._read(state)
                except Exception as exc:  # a bug must cost only this file, never the scrape
                    log.exception("reading DiskSPD result file %s failed", state.name)
                    state.seen = None
                    self._down(state, "internal_error", f"{type(exc).__name__}: {exc}", logged=True)

    def _read(self, state: FileState) -> None:
        try:
            st = os.stat(state.path)
        except OSError as exc:
            state.read_errors += 1
            self._down(state, "unreadable", exc.strerror or str(exc))
            return
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device named as a file would block or never end
            self._down(state, "unreadable", "not a regular file")
            return
        seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        recent = self.clock() - st.st_mtime < self.config.settle_s
        if seen == state.seen and not (state.incomplete and not recent):
            return  # unchanged since it was parsed
        state.mtime = st.st_mtime
        try:
            if st.st_size > self.config.max_document_bytes:
                raise TooLarge(
                    f"{st.st_size} bytes, above the bound of {self.config.max_document_bytes} "
                    "(--diskspd.max-file-size); skipped unread"
                )
            # never blocks, even if swapped for a FIFO; never leaves the watched directory
            with open_regular(state.path, watched_directory(state.path, self.config.paths)) as fh:
                data = fh.read(self.config.max_document_bytes + 1)
            result = parse_bytes(data, self.config.max_document_bytes)
        except OSError as exc:
            state.read_errors += 1
            state.seen = None
            self._down(state, "unreadable", exc.strerror or str(exc))
            return
        except Truncated as exc:
            state.seen = seen
            if recent:
                if not state.incomplete:
                    log.info("DiskSPD result file %s is incomplete, waiting for it to settle: %s", state.name, exc)
                state.incomplete, state.result = True, None
                state.reason = state.detail = None
                return
            state.incomplete = False
            self._down(state, exc.reason, str(exc))
            return
        except DiskspdError as exc:
            state.seen = seen
            state.incomplete = False
            self._down(state, exc.reason, str(exc))
            return
        state.seen = seen
        state.incomplete = False
        state.parses += 1
        if state.reason is not None:
            log.info("DiskSPD result file %s is up again (was down: %s)", state.name, state.reason)
        state.reason = state.detail = None
        state.result = result
        log.info(
            "read DiskSPD result %s: host=%s version=%s time spans=%d",
            state.name,
            display_name(result.computer_name) or "-",
            result.version or "-",
            len(result.spans),
        )
        for note in result.notes:
            log.warning("DiskSPD result file %s: %s", state.name, note)

    def _down(self, state: FileState, reason: str, detail: str, logged: bool = False) -> None:
        """The file is down: its data is no longer shown (never stale values as fresh)."""
        if (reason, detail) != (state.reason, state.detail) and not logged:
            log.warning("DiskSPD result file %s is down (%s): %s", state.name, reason, detail)
        state.reason, state.detail = reason, detail
        state.result = None

    def mark_failed(self, path: str, reason: str, detail: str) -> None:
        """The collector could not expose the file: down until it changes."""
        with self._lock:
            state = self.files.get(path)
            if state is not None:
                self._down(state, reason, detail, logged=True)

    def views(self) -> list[SourceView]:
        now = self.clock()
        out = []
        with self._lock:
            for path in sorted(self.files):
                s = self.files[path]
                visible = True
                if self.config.retention_s > 0 and s.result is not None:
                    end = max(run_end(s.result) or 0.0, s.mtime)
                    visible = now - end <= self.config.retention_s
                out.append(
                    SourceView(
                        path=s.path,
                        name=s.name,
                        up=s.up,
                        reason=s.reason,
                        detail=s.detail,
                        result=s.result,
                        incomplete=s.incomplete,
                        mtime=s.mtime,
                        read_errors=s.read_errors,
                        visible=visible,
                    )
                )
        return out
