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
from dataclasses import dataclass

from ioparallax.exporters.common.watch import engine
from ioparallax.exporters.common.watchdir import display_name, open_regular, stat_key, watched_directory
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
class SourceView(FileState):
    """A consistent snapshot of one file for the collector (:func:`engine.view`): its state, and
    whether it is still shown."""

    visible: bool = True


def run_end(result: DiskspdResult) -> float | None:
    """When the run ended: RunTime plus every time span's warm-up, test time and cool-down."""
    if result.run_time is None:
        return None
    total = 0.0
    for i, span in enumerate(result.spans):
        prof = result.profiles[i] if i < len(result.profiles) else None
        total += (prof.warmup_s + prof.cooldown_s if prof else 0.0) + span.test_time_s
    return result.run_time + total


class ResultFiles(engine.Watcher[FileState]):
    """Every DiskSPD result file under the watched paths, on the shared watch engine (finding,
    isolation, up/down, retention); thread-safe.

    Differs from the other watch exporters on purpose: DiskSPD writes its XML once, when the run
    ends, so a file is read whole whenever it changes (no tailing), a file cut off but modified
    within the settle time is a copy under way (``incomplete``), not an error, and every file is
    a finished run: it stays for the retention after the run's own end."""

    what = "DiskSPD result file"

    def new_source(self, path: str) -> FileState:
        return FileState(path=path, name=display_name(path))

    def read(self, state: FileState) -> None:
        self._read(state)

    def internal_error(self, state: FileState, detail: str) -> None:
        state.seen = None  # read again on the next poll
        super().internal_error(state, detail)

    def hide(self, state: FileState, reason: str) -> None:
        """The file is down: its data is no longer shown (never stale values as fresh)."""
        state.result = None

    def _read(self, state: FileState) -> None:
        try:
            st = os.stat(state.path)
        except OSError as exc:
            self.unreadable(state, exc)
            return
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device named as a file would block or never end
            self.down(state, "unreadable", "not a regular file")
            return
        seen = stat_key(st)
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
            state.seen = None
            self.unreadable(state, exc)
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
            self.down(state, exc.reason, str(exc))
            return
        except DiskspdError as exc:
            state.seen = seen
            state.incomplete = False
            self.down(state, exc.reason, str(exc))
            return
        state.seen = seen
        state.incomplete = False
        state.parses += 1
        self.up(state)
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

    def ended(self, state: FileState, now: float) -> bool:
        return True  # a result file is written when its run has ended

    def visible(self, state: FileState, ended: bool, now: float) -> bool:
        """For the retention after the run's end (or the file's mtime, if later: a copy of an
        old result shows for the retention after it arrived); retention 0: forever."""
        if self.config.retention_s > 0 and state.result is not None:
            end = max(run_end(state.result) or 0.0, state.mtime)
            return now - end <= self.config.retention_s
        return True

    def views(self) -> list[SourceView]:
        with self.lock:
            return [engine.view(SourceView, s, visible=visible) for s, _ended, visible in self.snapshot()]
