"""Incremental reading of fio output files (the transport layer of the fio exporter).

A :class:`FileTailer` remembers, per file, the byte offset read so far and the document being
written; each read takes only the bytes appended since, in 1 MiB chunks, so following a running
fio costs O(new bytes) and memory stays bounded whatever the file holds. A file is read again from
the start when it was rewritten: a new inode (rotation), a size below what was read (fio truncates
its ``--output`` when a new run starts), or a first 64 KiB that changed (rewritten in place with
content as long or longer). An unchanged file (same inode, size and mtime) is not even opened.

A :class:`Watcher` finds the files under the watched paths (files given by name, and files
matching a glob inside watched directories), tails each, and keeps the latest state per file for
the collector: the last two records, counters of what was skipped or rejected, whether the run
finished, and why the file is down. Each file is read in isolation: nothing one file holds (an
unreadable file, garbage, a value fio cannot write, a bug it triggers) affects the others.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ioparallax.exporters.common.watchdir import list_files, open_regular, watched_directory, why_reread
from ioparallax.exporters.fio.parse import (
    DEFAULT_MAX_DOCUMENT_BYTES,
    DocumentStream,
    FioRecord,
    InvalidValue,
    NotFioDocument,
    parse_document,
)

log = logging.getLogger(__name__)

#: Bytes read from one file per poll at most; the rest is read on the next poll.
MAX_READ_BYTES = 64 * 1024 * 1024

#: Bytes read (and decoded into documents) at a time.
CHUNK_BYTES = 1024 * 1024

#: The first bytes of a file, compared at each read to find a file rewritten in place.
PREFIX_BYTES = 64 * 1024

#: Why a file is down (the ``reason`` label of ``fio_source_error_info``).
REASONS = ("unreadable", "corrupt", "invalid_value", "too_large", "truncated", "internal_error")

#: Why a document was rejected (the ``reason`` label of ``fio_source_rejected_documents_total``).
REJECT_REASONS = ("invalid_value", "too_large")


@dataclass
class TailResult:
    documents: list[Any]  # dicts or FioDocument (see parse.DocumentStream)
    new_bytes: int
    reset: str | None = None  # why the file was read again from the start, if it was
    skipped: int = 0  # bytes of backlog skipped (see FileTailer.skip_backlog)


class FileTailer:
    """Follows one file: new bytes since the last read, decoded into fio documents."""

    def __init__(
        self,
        path: str,
        max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
        skip_backlog: bool = True,
        within: str | None = None,
    ):
        self.path = path
        #: the watched directory the file was found in: it is read only if it lies inside it
        #: (watchdir.open_regular); None for a file named directly
        self.within = within
        self.max_document_bytes = max_document_bytes
        #: With more than MAX_READ_BYTES unread (an exporter started late on a long stream), jump
        #: to the last 2 documents' worth of bytes: records are cumulative, so the latest two hold
        #: everything exported, and the first scrape shows current values, not ones from the
        #: middle of the file. Off for ``convert``, which counts every record.
        self.skip_backlog = skip_backlog
        self.offset = 0
        self.identity: tuple[int, int] | None = None  # (st_dev, st_ino)
        self.mtime: float | None = None
        self.size = 0
        self.stream = DocumentStream(max_document_bytes, typed=True)
        self._seen: tuple[int, int, int, int] | None = None  # (dev, ino, size, mtime_ns) last read
        self._prefix = b""  # the file's first bytes, up to PREFIX_BYTES

    def _restart(self) -> None:
        counts = self.stream.counts
        self.offset = 0
        self._prefix = b""
        self.stream = DocumentStream(self.max_document_bytes, typed=True)
        self.stream.counts = counts  # counters are cumulative over the file's lifetime

    def read_new(self, max_bytes: int = MAX_READ_BYTES) -> TailResult:
        """Read what was appended since the last call. Raises OSError if the file cannot be read."""
        out = TailResult(documents=[], new_bytes=0)
        for part in self.read_chunks(max_bytes):
            out.documents.extend(part.documents)
            out.new_bytes += part.new_bytes
            out.reset = out.reset or part.reset
        return out

    def read_chunks(self, max_bytes: int = MAX_READ_BYTES) -> Iterator[TailResult]:
        """Like :meth:`read_new`, one result per chunk read, so that the caller can handle the
        documents of a chunk before the next is read (bounded memory on a large backlog)."""
        st = os.stat(self.path)
        seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if seen == self._seen:
            return  # unchanged since the last read: nothing to do
        with open_regular(self.path, self.within) as fh:
            st = os.fstat(fh.fileno())
            identity = (st.st_dev, st.st_ino)
            reset = why_reread(fh, self.identity, self.offset, self._prefix)
            if reset:
                self._restart()
            self.identity = identity
            self.mtime = st.st_mtime
            self.size = st.st_size
            self._seen = None  # set again once the read succeeded
            skipped = 0
            window = 2 * self.max_document_bytes + CHUNK_BYTES
            if self.skip_backlog and st.st_size - self.offset > max(max_bytes, window):
                if len(self._prefix) < PREFIX_BYTES:
                    fh.seek(0)
                    self._prefix = fh.read(PREFIX_BYTES)
                skipped = st.st_size - window - self.offset
                self.offset = st.st_size - window
                self.stream.resync()
            fh.seek(self.offset)
            budget = max_bytes
            while budget > 0:
                data = fh.read(min(CHUNK_BYTES, budget))
                if not data:
                    break
                if len(self._prefix) < PREFIX_BYTES and self.offset == len(self._prefix):
                    self._prefix += data[: PREFIX_BYTES - len(self._prefix)]
                self.offset += len(data)
                budget -= len(data)
                yield TailResult(documents=self.stream.feed(data), new_bytes=len(data), reset=reset, skipped=skipped)
                reset, skipped = None, 0
            if self.offset >= st.st_size:  # else more to read on the next poll
                self._seen = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if reset:
                yield TailResult(documents=[], new_bytes=0, reset=reset)


@dataclass
class SourceState:
    """What the exporter knows about one fio output file."""

    path: str
    tailer: FileTailer
    latest: FioRecord | None = None
    previous: FioRecord | None = None
    records: int = 0
    read_errors: int = 0
    reason: str | None = None  # why the file is down (one of REASONS); None: up
    detail: str | None = None  # the cause in words, as logged
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REJECT_REASONS, 0))
    corrupt_seen: int = 0  # the stream's corrupt_documents when last looked at
    skipped_bytes: int = 0  # backlog skipped unread (FileTailer.skip_backlog)
    resets: int = 0
    last_growth: float = 0.0  # wall time the file last grew (mtime)
    record_spacing_s: float | None = None  # seconds between the last two records
    process_running: bool | None = None  # wrapper mode: is the fio writing it still running?

    @property
    def up(self) -> bool:
        return self.reason is None

    @property
    def last_error(self) -> str | None:
        """The cause of the file being down, in words (None while it is up)."""
        return self.detail if self.reason is not None else None


@dataclass
class WatchConfig:
    paths: list[str]
    pattern: str = "*.json"
    retention_s: float = 15 * 60.0  # finished jobs stay visible this long after they ended
    idle_s: float = 10.0  # a file idle this long (and 3 record spacings) is finished
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES  # larger documents are skipped
    skip_backlog: bool = True  # see FileTailer.skip_backlog


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
    visible: bool  # False once a finished run is older than the retention
    reason: str | None = None  # why the file is down (REASONS)
    rejected: dict[str, int] = field(default_factory=dict)  # REJECT_REASONS -> documents
    skipped_bytes: int = 0


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
        found, missing = list_files(self.config.paths, self.config.pattern, lambda p: p in self.process_running)
        for m in missing:
            if m not in self._logged_missing:
                log.warning("watched path cannot be read: %s", m)
        self._logged_missing = set(missing)
        self.missing_paths = missing
        return found

    # ---- reading
    def poll(self) -> None:
        """Read what every file gained since the last poll. One file's failure, whatever it is,
        marks only that file down."""
        with self._lock:
            present = self._discover()
            for gone in set(self.sources) - set(present):
                log.info("fio output file is gone, forgetting it: %s", gone)
                del self.sources[gone]
            for path in present:
                state = self.sources.get(path)
                if state is None:
                    state = self.sources[path] = SourceState(
                        path=path,
                        tailer=FileTailer(
                            path,
                            self.config.max_document_bytes,
                            self.config.skip_backlog,
                            within=watched_directory(path, self.config.paths),
                        ),
                    )
                running = self.process_running.get(path)
                try:
                    state.process_running = running() if running is not None else None
                    self._read(state)
                except Exception as exc:  # a bug must cost only this file, never the scrape
                    log.exception("reading fio output file %s failed", path)
                    self._down(state, "internal_error", f"{type(exc).__name__}: {exc}", logged=True)

    def finish(self) -> None:
        """End of input (``convert``): a document left incomplete at the end of a file means the
        file was cut off; the file is then down with reason ``truncated``."""
        with self._lock:
            for state in self.sources.values():
                stream = state.tailer.stream
                try:
                    docs = stream.finish()
                    state.records += len(docs)
                    if stream.cut_off_at is not None:
                        state.corrupt_seen += 1  # reported below as truncated, not as corrupt
                    self._records(state, docs, stream)
                except Exception as exc:
                    log.exception("reading fio output file %s failed", state.path)
                    self._down(state, "internal_error", f"{type(exc).__name__}: {exc}", logged=True)
                    continue
                if stream.cut_off_at is not None:
                    self._down(
                        state,
                        "truncated",
                        f"the document starting at byte {stream.cut_off_at} "
                        "is cut off (fio killed, or the file truncated)",
                    )

    def mark_failed(self, path: str, reason: str, detail: str) -> None:
        """The collector could not expose the file's latest record: down until a new one comes."""
        with self._lock:
            state = self.sources.get(path)
            if state is not None:
                self._down(state, reason, detail, logged=True)

    def _down(self, state: SourceState, reason: str, detail: str, logged: bool = False) -> None:
        """The file is down: its data is no longer shown (never stale values as fresh)."""
        if (reason, detail) != (state.reason, state.detail) and not logged:
            if reason == "unreadable":
                log.warning("cannot read fio output file %s: %s", state.path, detail)
            else:
                log.warning("fio output file %s is down (%s): %s", state.path, reason, detail)
        state.reason, state.detail = reason, detail
        if reason != "unreadable":  # an unreadable file keeps its place; its data is hidden
            state.latest = state.previous = None

    def _up(self, state: SourceState) -> None:
        if state.reason is not None:
            if state.reason == "unreadable":
                log.info("fio output file readable again: %s", state.path)
            else:
                log.info("fio output file %s is up again (was down: %s)", state.path, state.reason)
        state.reason = state.detail = None

    def _read(self, state: SourceState) -> None:
        tailer = state.tailer
        try:
            chunks = tailer.read_chunks()
            first = next(chunks, None)
        except OSError as exc:
            state.read_errors += 1
            self._down(state, "unreadable", exc.strerror or str(exc))
            return
        if state.reason == "unreadable":
            self._up(state)
        parts = [] if first is None else [first]
        # Records are cumulative: of what this read brings, only the last two documents matter
        # (the latest state and the per-interval differences). Earlier ones are decoded (to find
        # where documents end) and counted, but not checked or kept: memory stays at two
        # documents whatever the backlog, and a catch-up costs a decode per document, not a parse.
        tail: list[Any] = []
        error: OSError | None = None
        try:
            for part in _chain(parts, chunks):
                if part.reset:
                    log.info("fio output file %s %s: reading it again from the start", state.path, part.reset)
                    state.resets += 1
                    state.latest = state.previous = None
                    state.record_spacing_s = None
                    tail = []
                    if state.reason not in (None, "unreadable"):
                        self._up(state)  # judged again on the new content
                if part.skipped:
                    state.skipped_bytes += part.skipped
                    log.info(
                        "fio output file %s: skipped %d bytes of backlog to read its latest records "
                        "(records are cumulative)",
                        state.path,
                        part.skipped,
                    )
                state.records += len(part.documents)
                tail = (tail + part.documents)[-2:]
        except OSError as exc:
            error = exc
        self._records(state, tail, tailer.stream)
        if error is not None:
            state.read_errors += 1
            self._down(state, "unreadable", error.strerror or str(error))
            return
        if tailer.mtime is not None:
            state.last_growth = tailer.mtime

    def _records(self, state: SourceState, documents: list[Any], stream: DocumentStream) -> None:
        """Documents of one chunk, in order: the latest valid one is the file's state; a rejected
        one after it takes the file down until a valid one follows."""
        oversized = stream.counts.oversized_documents - state.rejected["too_large"]
        corrupt = stream.counts.corrupt_documents - state.corrupt_seen
        state.corrupt_seen = stream.counts.corrupt_documents
        for doc in documents:
            try:
                record = parse_document(doc)
            except NotFioDocument:
                stream.counts.not_fio_documents += 1
                continue
            except InvalidValue as exc:
                state.rejected["invalid_value"] += 1
                self._down(state, "invalid_value", f"document rejected: {exc}")
                continue
            state.previous, state.latest = state.latest, record
            if state.reason is not None and state.reason != "unreadable":
                self._up(state)
        if oversized > 0:
            state.rejected["too_large"] += oversized
        garbage = stream.garbage_since_last_document
        if garbage == "too_large" and oversized > 0:
            self._down(
                state,
                "too_large",
                f"a document above {stream.max_document_bytes} bytes (--fio.max-document-size) was skipped unread",
            )
        elif garbage == "corrupt" and corrupt > 0:
            self._down(
                state,
                "corrupt",
                "the latest document cannot be decoded as JSON (garbled, "
                "cut off, a number of over 4300 digits or nesting too deep)",
            )
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
                out.append(
                    SourceView(
                        path=path,
                        up=s.up,
                        latest=s.latest,
                        previous=s.previous,
                        finished=finished,
                        end_time=end_time,
                        records=s.records,
                        read_errors=s.read_errors,
                        non_json_lines=c.non_json_lines,
                        corrupt_documents=c.corrupt_documents,
                        not_fio_documents=c.not_fio_documents,
                        resets=s.resets,
                        visible=visible,
                        reason=s.reason,
                        rejected=dict(s.rejected),
                        skipped_bytes=s.skipped_bytes,
                    )
                )
        return out


def _chain(first: list[TailResult], rest: Iterator[TailResult]) -> Iterator[TailResult]:
    yield from first
    yield from rest
