"""Reading fio output files as they grow (the reader room of the fio exporter): framing the text
into documents, following each file, keeping its state.

:class:`DocumentStream` is fed bytes as they arrive and returns finished documents; it decodes
only when a document can have ended (a ``}`` at the start of a line, which in fio's pretty output
only the top-level closing brace has) and drops foreign lines (``note: ...``, ``fio: io_u error``)
as they arrive, counted, so reading costs O(new bytes) plus one decode per finished document, and
memory is bounded by the largest document allowed. :func:`read_text` reads a complete text
(``convert``) into records with :func:`~ioparallax.exporters.fio.parse.parse_document`.

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

import json
import logging
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from ioparallax.exporters.common.watch import engine
from ioparallax.exporters.common.watchdir import read_chunks, reopened, stat_key, watched_directory
from ioparallax.exporters.fio.parse import (
    FioDocument,
    FioRecord,
    InvalidValue,
    NotFioDocument,
    _decode_document,
    parse_document,
)

log = logging.getLogger(__name__)

_decoder = json.JSONDecoder()

# --------------------------------------------------------------------------------------------
# text -> documents

#: Default bound on one document's size (bytes). fio's largest ordinary documents are json+
#: results of many jobs (about 16 KB per job: 64 jobs 1 MB); a document above the bound is
#: skipped and counted, so one file cannot make the exporter hold hundreds of MB.
DEFAULT_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024

#: Input is scanned in slices of this size, so a large ``feed`` never builds large temporaries.
_SLICE = 1024 * 1024

# A line that can appear in fio's pretty-printed JSON starts (after indentation) with one of these.
_JSON_LINE = re.compile(rb'[ \t]*(?:["{}\[\],:\-0-9]|true|false|null|\r?$)')
# Inside a document, the lines that need a look: a top-level brace at column 0 (a document's end,
# or the start of the next one after a cut-off record) and lines that are not JSON. Each pattern
# comes twice: anchored at a line start, and after a newline (a literal first byte lets the regex
# engine skip ahead fast; a '^' in MULTILINE mode is tried at every byte, three times slower).
# A line opening with a blank is taken as JSON without a look at the rest (fio's error lines
# start at column 0; an indented foreign line makes its document corrupt, as any garbled line).
_SPECIAL = rb'(?:[{}]|(?![ \t"\[\],:\-0-9]|true|false|null|\r?$))'
_SPECIAL_IN_DOCUMENT = (re.compile(_SPECIAL, re.MULTILINE), re.compile(rb"\n" + _SPECIAL, re.MULTILINE))
_DOCUMENT_START = (re.compile(rb"\{"), re.compile(rb"\n\{"))
_BRACE_LINE = (re.compile(rb"[{}]"), re.compile(rb"\n[{}]"))
_NON_BLANK_LINE = re.compile(rb"^[ \t\r\f\v]*[^\s]", re.MULTILINE)

_OUTSIDE, _IN_DOCUMENT, _SKIPPING = 0, 1, 2


@dataclass
class StreamCounts:
    """What a :class:`DocumentStream` has seen so far (all cumulative)."""

    documents: int = 0
    non_json_lines: int = 0  # lines skipped because they are not JSON (note:, fio: io_u error...)
    corrupt_documents: int = 0  # documents that could not be decoded and were dropped
    not_fio_documents: int = 0  # valid JSON that is not fio output
    oversized_documents: int = 0  # documents above the size bound, skipped unread


class DocumentStream:
    """Splits fio's output into JSON documents as it arrives, in time linear in the input and
    memory bounded by ``max_document_bytes``.

    ``feed(data)`` (bytes or text) returns the documents completed by ``data``; ``finish()`` ends
    the input. A document starts with ``{`` at the start of a line and, in fio's pretty output,
    ends with the ``}`` that opens a line (inner braces are indented); a compact document on one
    line is read too. Lines that are not JSON (fio writes error lines into the same stream, even
    inside a record, at column 0) are dropped as they arrive, so each document is decoded once; a
    line opening with a blank is taken as JSON (an indented foreign line makes its document
    corrupt). A ``{`` opening
    a line inside a document means the document was cut off (fio killed, then a new run appended):
    it is dropped and counted as corrupt. Outside documents only a line's first byte is kept, so
    garbage costs no memory; a document above ``max_document_bytes`` is skipped to its end and
    counted in ``oversized_documents``.
    """

    def __init__(self, max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES, typed: bool = False) -> None:
        self.counts = StreamCounts()
        self.max_document_bytes = max_document_bytes
        #: Documents that pass come out as :class:`FioDocument` (numbers checked as decoded),
        #: the others as dicts; either goes to :func:`parse_document`.
        self.typed = typed
        self.cut_off_at: int | None = None  # finish(): byte offset of a document left incomplete
        self.garbage_since_last_document: str | None = None  # 'corrupt' or 'too_large'
        self._state = _OUTSIDE
        self._doc: list[bytes] = []  # the document being written (JSON lines only)
        self._doc_len = 0
        self._doc_start = 0  # byte offset of its first line in the stream
        self._partial: list[bytes] = []  # the line being written, when it must be kept
        self._partial_len = 0
        self._dropping_line = False  # the line being written is foreign and not kept
        self._dropped_nonblank = False
        self._count_dropped = False
        self._offset = 0  # bytes consumed so far (complete lines)
        self._resync_from: int | None = None  # where input resumed after resync(), until a start

    @property
    def pending(self) -> int:
        """Bytes held back: the document (and line) still being written."""
        return self._doc_len + self._partial_len

    def feed(self, data: bytes | str) -> list[Any]:
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        docs: list[Any] = []
        for i in range(0, len(data), _SLICE):
            self._feed(data[i : i + _SLICE], docs)
        self._try_partial(docs)
        return docs

    def resync(self) -> None:
        """The input continues somewhere else (the reader skipped ahead): drop the document and
        the line being read; the next document starts at the next ``{`` opening a line."""
        self._drop_document()
        self._state = _OUTSIDE
        self._partial, self._partial_len = [], 0
        self._dropping_line, self._count_dropped, self._dropped_nonblank = True, False, False
        self._resync_from = self._offset

    def finish(self) -> list[Any]:
        docs: list[Any] = []
        if self._dropping_line:
            if self._count_dropped and self._dropped_nonblank:
                self.counts.non_json_lines += 1
            self._dropping_line = False
            self._partial, self._partial_len = [], 0
        elif self._partial:
            line = b"".join(self._partial)
            self._partial, self._partial_len = [], 0
            self._line(line, docs)
        if self._state == _IN_DOCUMENT:
            self._corrupt()  # cut off: fio killed, or the file truncated
            self.cut_off_at = self._doc_start
        self._drop_document()
        self._state = _OUTSIDE
        return docs

    # ---- scanning
    def _feed(self, data: bytes, docs: list[Any]) -> None:
        if self._dropping_line or self._partial:
            nl = data.find(b"\n")
            if nl < 0:
                self._hold(data)
                return
            head, data = data[:nl], data[nl + 1 :]
            if self._dropping_line:
                if self._count_dropped and (self._dropped_nonblank or head.strip()):
                    self.counts.non_json_lines += 1
                self._offset += self._partial_len + nl + 1
                self._dropping_line = self._dropped_nonblank = False
                self._partial, self._partial_len = [], 0
            else:
                line = b"".join(self._partial) + head
                self._partial, self._partial_len = [], 0
                self._line(line, docs)
                self._offset += len(line) + 1
        pos = self._block(data, docs)
        if pos < len(data):
            self._hold(data[pos:])

    def _hold(self, piece: bytes) -> None:
        """Keep (or drop) a piece of the line still being written. Only lines that can matter
        are kept: inside a document, one that may start a document, one that may end a skipped
        one; foreign lines outside documents are counted when they end, never stored."""
        if not self._dropping_line and not self._partial:
            first = piece[:1]
            if self._state == _OUTSIDE and first != b"{":
                self._drop_line(count=True)
            elif self._state == _SKIPPING and first not in (b"{", b"}"):
                self._drop_line(count=False)
        if not self._dropping_line:
            held = self._partial_len + len(piece)
            if self._state == _IN_DOCUMENT:
                held += self._doc_len
            if held > self.max_document_bytes:
                if self._state != _SKIPPING:
                    self._oversized()  # a document (or one-line document) too large
                self._drop_line(count=False)
        if self._dropping_line:
            self._dropped_nonblank = self._dropped_nonblank or bool(piece.strip())
            self._partial_len += len(piece)
            return
        self._partial.append(piece)
        self._partial_len += len(piece)

    def _drop_line(self, count: bool) -> None:
        self._dropping_line, self._count_dropped = True, count
        self._dropped_nonblank = any(p.strip() for p in self._partial)
        self._partial = []

    def _block(self, buf: bytes, docs: list[Any]) -> int:
        """Consume the complete lines of ``buf`` (which starts at a line start); returns where the
        line still being written begins."""
        pos, n = 0, len(buf)
        while pos < n:
            if self._state == _IN_DOCUMENT:
                stop = _next_line(_SPECIAL_IN_DOCUMENT, buf, pos)
                if stop != pos:  # plain JSON lines: kept as one block
                    if stop < 0:
                        last = buf.rfind(b"\n", pos, n)
                        if last < 0:
                            return pos
                        stop = last + 1
                    self._append(buf[pos:stop])
                    self._offset += stop - pos
                    pos = stop
                    continue
            elif self._state == _OUTSIDE:
                stop = _next_line(_DOCUMENT_START if self._resync_from is None else _BRACE_LINE, buf, pos)
                if stop != pos:  # foreign lines between documents
                    if stop < 0:
                        last = buf.rfind(b"\n", pos, n)
                        if last < 0:
                            return pos
                        stop = last + 1
                    self.counts.non_json_lines += sum(1 for _ in _NON_BLANK_LINE.finditer(buf, pos, stop))
                    self._offset += stop - pos
                    pos = stop
                    continue
                if self._resync_from is None:
                    end = self._whole_document(buf, pos, docs)
                    if end:
                        self._offset += end - pos
                        pos = end
                        continue
            else:  # skipping an oversized document
                stop = _next_line(_BRACE_LINE, buf, pos)
                if stop != pos:
                    if stop < 0:
                        last = buf.rfind(b"\n", pos, n)
                        if last < 0:
                            return pos
                        stop = last + 1
                    self._offset += stop - pos
                    pos = stop
                    continue
            eol = buf.find(b"\n", pos)
            if eol < 0:
                return pos
            self._line(buf[pos:eol], docs)
            self._offset += eol + 1 - pos
            pos = eol + 1
        return pos

    def _whole_document(self, buf: bytes, pos: int, docs: list[Any]) -> int:
        """fio's ordinary case at once: from the ``{`` opening the line at ``pos`` to the first
        line that is ``}`` alone, with no line opening with ``{`` between, decoded as one
        document. If that decodes (valid JSON: every line in it is a JSON line, none foreign),
        the line-by-line way would have read the same document and nothing else, so it is taken
        without looking at each line; returns where the next line starts, or 0 to read line by
        line (no such end in ``buf``, above the size bound, or not valid JSON)."""
        end = self._document_end(buf, pos)
        if end < 0 or end + 3 - pos > self.max_document_bytes:
            return 0
        try:
            doc = _decode_document(buf[pos : end + 3], self.typed)
        except (msgspec.DecodeError, RecursionError):
            return 0
        if not isinstance(doc, (dict, FioDocument)):
            return 0
        self._doc_start = self._offset
        self._emit([doc], docs)
        return end + 3

    @staticmethod
    def _document_end(buf: bytes, pos: int) -> int:
        """Where the first line that is ``}`` alone after ``pos`` starts (its newline), or -1 if
        a line opening with ``{`` comes first or there is none. One scan for a brace opening a
        line (a regex with a literal first byte), not two ``find`` calls that stop at every
        newline."""
        search = _BRACE_LINE[1].search
        m = search(buf, pos)
        while m is not None:
            at = m.start()
            if buf[at + 1] == 0x7B:  # '{'
                return -1
            if buf[at + 2 : at + 3] == b"\n":
                return at
            m = search(buf, at + 2)
        return -1

    def _line(self, line: bytes, docs: list[Any]) -> None:
        """One complete line (without its newline) that needs a decision."""
        first = line[:1]
        if self._state == _SKIPPING:
            if first == b"}":
                self._state = _OUTSIDE
                return
            if first != b"{":
                return
            self._state = _OUTSIDE
        elif self._state == _IN_DOCUMENT:
            if first == b"{":
                self._corrupt()  # the document before was cut off
                self._drop_document()
                self._state = _OUTSIDE
            elif first == b"}":
                if self._append(line + b"\n"):
                    self._close(docs, compact=False)
                else:
                    self._state = _OUTSIDE
                return
            elif _JSON_LINE.match(line):
                self._append(line + b"\n")
                return
            else:
                self.counts.non_json_lines += 1  # blank lines match _JSON_LINE
                return
        if first == b"}" and self._resync_from is not None:
            # the end of a document whose start was skipped: if more than the bound of it was
            # after the jump, it was too large (a 222 MB single result, say)
            if self._offset - self._resync_from > self.max_document_bytes:
                self._oversized()
            self._resync_from = None
            return
        if first == b"{":
            self._resync_from = None
            self._state = _IN_DOCUMENT
            self._doc_start = self._offset
            if self._append(line + b"\n") and line.rstrip().endswith(b"}"):
                self._close(docs, compact=True)
        elif line.strip():
            self.counts.non_json_lines += 1

    def _append(self, block: bytes) -> bool:
        if self._doc_len + len(block) > self.max_document_bytes:
            self._oversized()
            return False
        self._doc.append(block)
        self._doc_len += len(block)
        return True

    def _oversized(self) -> None:
        """The document being read is above the bound: drop it and skip to its end (a one-line
        document ends with its line)."""
        self.counts.oversized_documents += 1
        self.garbage_since_last_document = "too_large"
        self._state = _SKIPPING if self._state == _IN_DOCUMENT else _OUTSIDE
        self._drop_document()

    def _corrupt(self) -> None:
        self.counts.corrupt_documents += 1
        self.garbage_since_last_document = "corrupt"

    def _drop_document(self) -> None:
        self._doc, self._doc_len = [], 0

    def _close(self, docs: list[Any], compact: bool) -> None:
        """Decode the document that a closing line (or a one-line document) may have ended."""
        decoded = _decode(b"".join(self._doc), self.typed)
        if decoded is None:
            if compact:
                return  # a '}' ended an inner object: read on
            self._corrupt()
        else:
            found, trailing = decoded
            self._emit(found, docs)
            if trailing:
                self.counts.non_json_lines += 1
        self._drop_document()
        self._state = _OUTSIDE

    def _emit(self, found: list[Any], docs: list[Any]) -> None:
        self.counts.documents += len(found)
        self.garbage_since_last_document = None
        docs.extend(found)

    def _try_partial(self, docs: list[Any]) -> None:
        """A last line without its newline that can end a document (a file written without a
        final newline): decode now rather than wait for a newline that may never come."""
        if not self._partial or self._dropping_line:
            return
        first = self._partial[0][:1]
        last = self._partial[-1].rstrip()[-1:]
        if last != b"}" or not (
            (self._state == _IN_DOCUMENT and first == b"}") or (self._state == _OUTSIDE and first == b"{")
        ):
            return
        line = b"".join(self._partial)
        decoded = _decode(b"".join(self._doc) + line, self.typed)
        if decoded is None or decoded[1]:
            return
        if self._state == _OUTSIDE:
            self._doc_start = self._offset
        self._offset += len(line)
        self._partial, self._partial_len = [], 0
        self._drop_document()
        self._state = _OUTSIDE
        self._emit(decoded[0], docs)


def _next_line(patterns: tuple[re.Pattern[bytes], re.Pattern[bytes]], buf: bytes, pos: int) -> int:
    """Start of the first line at or after ``pos`` (a line start) that the patterns match, or -1."""
    at_start, after_newline = patterns
    if at_start.match(buf, pos):
        return pos
    m = after_newline.search(buf, pos)
    return m.start() + 1 if m else -1


def _decode(raw: bytes, typed: bool = False) -> tuple[list[Any], bool] | None:
    """The document(s) in ``raw`` (which starts with ``{``) and whether non-JSON text followed
    them; None if ``raw`` does not start with a complete document. Never raises: numbers beyond
    Python's digit limit and nesting beyond its recursion limit are undecodable like any garbage.

    One whole document (fio's ordinary case) is decoded by msgspec, in C, about 2x faster than
    the json module, with the same values (integers of any size up to Python's digit limit, floats
    rounded alike; orjson, as fast, turns integers beyond 64 bits into floats). Anything msgspec
    refuses (several documents or trailing text, NaN, infinity, invalid UTF-8, deep nesting) goes
    the json module's way, so what is read and what is rejected is the json module's, as before
    (tests/exporters/fio/test_fio_reader_fast.py). ``typed``: see :func:`_decode_document`."""
    try:
        doc = _decode_document(raw, typed)
    except (msgspec.DecodeError, RecursionError):
        pass
    else:
        if isinstance(doc, (dict, FioDocument)):
            return [doc], False
    text = raw.decode("utf-8", "replace")
    found: list[Any] = []
    pos, n = 0, len(text)
    while True:
        try:
            doc, end = _decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            if not found:
                return None
            return found, True
        if isinstance(doc, dict):
            found.append(doc)
        while end < n and text[end] in " \t\r\n":
            end += 1
        if end >= n:
            return found, False
        if text[end] != "{":
            return found, True
        pos = end


@dataclass
class ReadResult:
    """Everything read from one complete text (a finished result file, ``convert``)."""

    records: list[FioRecord]
    counts: StreamCounts


def parse_documents(docs: Iterable[Any], counts: StreamCounts | None = None) -> list[FioRecord]:
    """Decoded documents -> records; documents that are not fio output are counted and skipped."""
    records = []
    for doc in docs:
        try:
            records.append(parse_document(doc))
        except NotFioDocument:
            if counts is not None:
                counts.not_fio_documents += 1
    return records


def read_text(text: str) -> ReadResult:
    """All records of a complete fio output text (any form above), in order. The text is fed a
    slice at a time and each slice's documents made records at once, while they are fresh in the
    CPU's caches, and dropped (a 10-minute status stream's 600 decoded documents are never held
    all at once)."""
    stream = DocumentStream(typed=True)
    records: list[FioRecord] = []
    for i in range(0, len(text), _SLICE):
        records.extend(parse_documents(stream.feed(text[i : i + _SLICE]), stream.counts))
    records.extend(parse_documents(stream.finish(), stream.counts))
    return ReadResult(records=records, counts=stream.counts)


# --------------------------------------------------------------------------------------------
# following files

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
        self.seen: tuple[int, int, int, int] | None = None  # watchdir.stat_key of the last read to the end
        self.prefix = b""  # the file's first bytes, up to PREFIX_BYTES

    def restart(self) -> None:
        counts = self.stream.counts
        self.offset = 0
        self.prefix = b""
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
        with reopened(self) as opened:
            if opened is None:
                return  # unchanged since the last read: nothing to do
            fh, st, reset = opened
            skipped = 0
            window = 2 * self.max_document_bytes + CHUNK_BYTES
            if self.skip_backlog and st.st_size - self.offset > max(max_bytes, window):
                if len(self.prefix) < PREFIX_BYTES:
                    fh.seek(0)
                    self.prefix = fh.read(PREFIX_BYTES)
                skipped = st.st_size - window - self.offset
                self.offset = st.st_size - window
                self.stream.resync()
            fh.seek(self.offset)
            for data in read_chunks(fh, self, max_bytes, CHUNK_BYTES, PREFIX_BYTES):
                yield TailResult(documents=self.stream.feed(data), new_bytes=len(data), reset=reset, skipped=skipped)
                reset, skipped = None, 0
            if self.offset >= st.st_size:  # else more to read on the next poll
                self.seen = stat_key(st)
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
class SourceView(SourceState):
    """A consistent snapshot of one source for the collector (:func:`engine.view`): its state
    (``rejected`` copied), what its document stream counted, whether its run ended (and when)
    and whether it is still shown. ``tailer`` is the watcher's own: not for the collector."""

    counts: StreamCounts = field(default_factory=StreamCounts)
    finished: bool = False
    end_time: float | None = None
    visible: bool = True  # False once a finished run is older than the retention


class Watcher(engine.Watcher[SourceState]):
    """Tails every fio output file under the watched paths, on the shared watch engine (finding,
    isolation, up/down, writer ended); thread-safe."""

    what = "fio output file"
    unreadable_in_own_words = True

    # ---- reading
    def new_source(self, path: str) -> SourceState:
        return SourceState(
            path=path,
            tailer=FileTailer(
                path,
                self.config.max_document_bytes,
                self.config.skip_backlog,
                within=watched_directory(path, self.config.paths),
            ),
        )

    def read(self, state: SourceState) -> None:
        running = self.process_running.get(state.path)
        state.process_running = running() if running is not None else None
        self._read(state)

    def finish_source(self, state: SourceState) -> None:
        """End of input (``convert``): a document left incomplete at the end of a file means the
        file was cut off; the file is then down with reason ``truncated``."""
        stream = state.tailer.stream
        try:
            docs = stream.finish()
            state.records += len(docs)
            if stream.cut_off_at is not None:
                state.corrupt_seen += 1  # reported below as truncated, not as corrupt
            self._records(state, docs, stream)
        except Exception as exc:
            log.exception("reading fio output file %s failed", state.path)
            self.down(state, "internal_error", f"{type(exc).__name__}: {exc}", logged=True)
            return
        if stream.cut_off_at is not None:
            self.down(
                state,
                "truncated",
                f"the document starting at byte {stream.cut_off_at} is cut off (fio killed, or the file truncated)",
            )

    def hide(self, state: SourceState, reason: str) -> None:
        """The file is down: its data is no longer shown (never stale values as fresh)."""
        if reason != "unreadable":  # an unreadable file keeps its place; its data is hidden
            state.latest = state.previous = None

    def _read(self, state: SourceState) -> None:
        tailer = state.tailer
        try:
            chunks = tailer.read_chunks()
            first = next(chunks, None)
        except OSError as exc:
            self.unreadable(state, exc)
            return
        if state.reason == "unreadable":
            self.up(state)
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
                        self.up(state)  # judged again on the new content
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
            self.unreadable(state, error)
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
                self.down(state, "invalid_value", f"document rejected: {exc}")
                continue
            state.previous, state.latest = state.latest, record
            if state.reason is not None and state.reason != "unreadable":
                self.up(state)
        if oversized > 0:
            state.rejected["too_large"] += oversized
        garbage = stream.garbage_since_last_document
        if garbage == "too_large" and oversized > 0:
            self.down(
                state,
                "too_large",
                f"a document above {stream.max_document_bytes} bytes (--fio.max-document-size) was skipped unread",
            )
        elif garbage == "corrupt" and corrupt > 0:
            self.down(
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
    def spacing(self, state: SourceState) -> float | None:
        return state.record_spacing_s

    @staticmethod
    def end_time(state: SourceState) -> float:
        """When a finished run ended: the last record's own time (fio writes it as the run ends),
        else the file's mtime."""
        if state.latest is not None and state.latest.timestamp is not None:
            return state.latest.timestamp
        return state.last_growth

    def visible(self, state: SourceState, ended: bool, now: float) -> bool:
        # fio differs on purpose: retention counts from the run's end as fio wrote it in the last
        # record (a result copied in keeps its own end), not from when the exporter found it
        return engine.retained(now, ended, self.end_time(state), self.config.retention_s)

    def views(self) -> list[SourceView]:
        with self.lock:
            return [
                engine.view(
                    SourceView,
                    s,
                    rejected=dict(s.rejected),
                    counts=replace(s.tailer.stream.counts),
                    finished=finished,
                    end_time=self.end_time(s) if finished else None,
                    visible=visible,
                )
                for s, finished, visible in self.snapshot()
            ]


def _chain(first: list[TailResult], rest: Iterator[TailResult]) -> Iterator[TailResult]:
    yield from first
    yield from rest
