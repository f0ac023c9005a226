"""Incremental reading of fio output files (the transport layer of the fio exporter).

A :class:`FileTailer` remembers, per file, the byte offset read so far and the document being
written; each :meth:`FileTailer.read_new` reads only the bytes appended since, so following a
running fio costs O(new bytes). A file that shrank (fio truncates its ``--output`` when a new run
starts) or was replaced (rotation: a new inode) is read again from the start.

A :class:`Watcher` finds the files under the watched paths (files given by name, and files
matching a glob inside watched directories), tails each, and keeps the latest state per file for
the collector: the last two records, counters of what was skipped, whether the run finished.
"""

from __future__ import annotations

import codecs
import fnmatch
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from exporters.fio.reader import DocumentStream, FioRecord, NotFioDocument, parse_document

log = logging.getLogger(__name__)

#: Bytes read from one file per poll at most; the rest is read on the next poll.
MAX_READ_BYTES = 64 * 1024 * 1024


@dataclass
class TailResult:
    documents: list[dict]
    new_bytes: int
    reset: str | None = None       # why the file was read again from the start, if it was


class FileTailer:
    """Follows one file: new bytes since the last read, decoded into fio documents."""

    def __init__(self, path: str):
        self.path = path
        self.offset = 0
        self.identity: tuple[int, int] | None = None   # (st_dev, st_ino)
        self.mtime: float | None = None
        self.size = 0
        self.stream = DocumentStream()
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def _restart(self) -> None:
        self.offset = 0
        self.stream = DocumentStream()
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def read_new(self, max_bytes: int = MAX_READ_BYTES) -> TailResult:
        """Read what was appended since the last call. Raises OSError if the file cannot be read."""
        with open(self.path, "rb") as fh:
            st = os.fstat(fh.fileno())
            identity = (st.st_dev, st.st_ino)
            reset = None
            if self.identity is not None and identity != self.identity:
                reset = "replaced by a new file"
            elif st.st_size < self.offset:
                reset = f"truncated from {self.offset} to {st.st_size} bytes"
            if reset:
                self._restart()
            self.identity = identity
            self.mtime = st.st_mtime
            self.size = st.st_size
            fh.seek(self.offset)
            data = fh.read(max_bytes)
        self.offset += len(data)
        docs = self.stream.feed(self._text.decode(data)) if data else []
        return TailResult(documents=docs, new_bytes=len(data), reset=reset)


@dataclass
class SourceState:
    """What the exporter knows about one fio output file."""

    path: str
    tailer: FileTailer
    latest: FioRecord | None = None
    previous: FioRecord | None = None
    records: int = 0
    read_errors: int = 0
    last_error: str | None = None
    resets: int = 0
    last_growth: float = 0.0          # wall time the file last grew (mtime)
    record_spacing_s: float | None = None   # seconds between the last two records
    process_running: bool | None = None     # wrapper mode: is the fio writing it still running?

    @property
    def up(self) -> bool:
        return self.last_error is None


@dataclass
class WatchConfig:
    paths: list[str]
    pattern: str = "*.json"
    retention_s: float = 15 * 60.0     # finished jobs stay visible this long after they ended
    idle_s: float = 10.0               # a file idle this long (and 3 record spacings) is finished


@dataclass
class SourceView:
    """A consistent snapshot of one source for the collector."""

    path: str
    up: bool
    latest: FioRecord | None
    previous: FioRecord | None
    finished: bool
    end_time: float | None
    records: int
    read_errors: int
    non_json_lines: int
    corrupt_documents: int
    not_fio_documents: int
    resets: int
    visible: bool                     # False once a finished run is older than the retention


class Watcher:
    """Tails every fio output file under the watched paths; thread-safe."""

    def __init__(self, config: WatchConfig, clock: Callable[[], float] = time.time):
        self.config = config
        self.clock = clock
        self.sources: dict[str, SourceState] = {}
        self.missing_paths: list[str] = []
        self._lock = threading.Lock()
        self._logged_missing: set[str] = set()
        # wrapper mode: path -> "is the fio writing it still running?" (asked before each read, so a
        # run is only called finished after its last bytes were read)
        self.process_running: dict[str, Callable[[], bool]] = {}

    # ---- discovery
    def _discover(self) -> list[str]:
        found: list[str] = []
        missing: list[str] = []
        for path in self.config.paths:
            if os.path.isdir(path):
                try:
                    names = sorted(os.listdir(path))
                except OSError as exc:
                    missing.append(f"{path}: {exc.strerror or exc}")
                    continue
                for name in names:
                    full = os.path.join(path, name)
                    if fnmatch.fnmatch(name, self.config.pattern) and os.path.isfile(full):
                        found.append(full)
            elif os.path.exists(path):
                found.append(path)
            elif path in self.process_running:
                continue   # the wrapper's fio has not created its output file yet
            else:
                missing.append(f"{path}: no such file or directory")
        for m in missing:
            if m not in self._logged_missing:
                log.warning("watched path cannot be read: %s", m)
        self._logged_missing = set(missing)
        self.missing_paths = missing
        return found

    # ---- reading
    def poll(self) -> None:
        """Read what every file gained since the last poll."""
        with self._lock:
            present = self._discover()
            for gone in set(self.sources) - set(present):
                log.info("fio output file is gone, forgetting it: %s", gone)
                del self.sources[gone]
            for path in present:
                state = self.sources.get(path)
                if state is None:
                    state = self.sources[path] = SourceState(path=path, tailer=FileTailer(path))
                running = self.process_running.get(path)
                state.process_running = running() if running is not None else None
                self._read(state)

    def _read(self, state: SourceState) -> None:
        try:
            result = state.tailer.read_new()
        except OSError as exc:
            cause = exc.strerror or str(exc)
            state.read_errors += 1
            if state.last_error != cause:
                log.warning("cannot read fio output file %s: %s", state.path, cause)
            state.last_error = cause
            return
        if state.last_error is not None:
            log.info("fio output file readable again: %s", state.path)
        state.last_error = None
        if result.reset:
            log.info("fio output file %s %s: reading it again from the start", state.path, result.reset)
            state.resets += 1
            state.latest = state.previous = None
        if state.tailer.mtime is not None:
            state.last_growth = state.tailer.mtime
        # Only the last two documents are needed (latest state and per-interval differences);
        # earlier ones of the same poll are cumulative and superseded.
        for doc in result.documents[-2:]:
            try:
                record = parse_document(doc)
            except NotFioDocument:
                state.tailer.stream.counts.not_fio_documents += 1
                continue
            state.previous, state.latest = state.latest, record
        state.records += len(result.documents)
        if state.latest and state.previous and state.latest.timestamp and state.previous.timestamp:
            spacing = state.latest.timestamp - state.previous.timestamp
            if spacing > 0:
                state.record_spacing_s = spacing

    # ---- state for the collector
    def _finished(self, state: SourceState, now: float) -> bool:
        if state.process_running is not None:
            return not state.process_running
        idle = self.config.idle_s
        if state.record_spacing_s:
            idle = max(idle, 3 * state.record_spacing_s)
        return now - state.last_growth > idle

    def views(self) -> list[SourceView]:
        now = self.clock()
        out = []
        with self._lock:
            for path in sorted(self.sources):
                s = self.sources[path]
                finished = self._finished(s, now)
                end_time = None
                if finished:
                    # the last record's own time (fio writes it as the run ends), else the mtime
                    end_time = s.last_growth
                    if s.latest is not None and s.latest.timestamp is not None:
                        end_time = s.latest.timestamp
                visible = not (finished and end_time is not None and now - end_time > self.config.retention_s)
                c = s.tailer.stream.counts
                out.append(SourceView(
                    path=path, up=s.up, latest=s.latest, previous=s.previous, finished=finished,
                    end_time=end_time, records=s.records, read_errors=s.read_errors,
                    non_json_lines=c.non_json_lines, corrupt_documents=c.corrupt_documents,
                    not_fio_documents=c.not_fio_documents, resets=s.resets, visible=visible,
                ))
        return out
