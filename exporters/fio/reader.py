"""Reading fio's JSON output into plain records (pure functions, no I/O).

Every form fio 3.x writes is read here (see docs/fio.md and the fio-output reference):

- ``--output-format=json`` / ``json+``: one document; ``json+`` adds ``clat_ns.bins``.
- ``--status-interval=N``: concatenated pretty-printed documents, each cumulative since job start.
- client/server (``fio --client``): ``client_stats`` instead of ``jobs``, with ``hostname`` and
  ``port`` per entry and an ``"All clients"`` aggregate entry; interim snapshots appended to
  ``client_stats`` when ``--status-interval`` was given.
- ``unified_rw_reporting``: a ``mixed`` direction instead of read/write/trim.

Lines that are not JSON (``note: ...`` on stdout, ``fio: io_u error ...`` even inside ``--output``
files) are skipped and counted, wherever they are; one bad document never loses the others.

:class:`DocumentStream` is fed text as it arrives and returns finished documents; it only tries to
decode when a document can have ended (a ``}`` at the start of a line, which in fio's pretty output
only the top-level closing brace has), so reading a growing stream costs O(new bytes) plus one
decode per finished document.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

#: fio prints INT_MAX as ``eta`` before it can estimate one.
ETA_UNKNOWN = 2147483647

#: Directions as fio names them; ``mixed`` replaces the others under ``unified_rw_reporting``.
DIRECTIONS = ("read", "write", "trim", "mixed")

#: Name of the aggregate entry fio adds to ``client_stats`` in client/server mode.
ALL_CLIENTS = "All clients"

_decoder = json.JSONDecoder()

# A line that can appear in fio's pretty-printed JSON starts (after indentation) with one of these.
_JSON_LINE = re.compile(r'[ \t]*(?:["{}\[\],:\-0-9]|true|false|null|$)')


@dataclass(frozen=True, slots=True)
class Latency:
    """One of fio's ``slat_ns``/``clat_ns``/``lat_ns`` blocks, in nanoseconds."""

    count: int                               # N
    min_ns: float
    max_ns: float
    mean_ns: float
    stddev_ns: float
    percentiles: tuple[tuple[float, float], ...] = ()   # (quantile 0-1, value in ns), fio's own
    bins: dict[str, int] | None = None      # json+ only: bucket midpoint (ns, as a string) -> count

    @property
    def sum_ns(self) -> float:
        """Total latency of the ``count`` I/Os (mean x N), as a histogram's ``_sum`` needs."""
        return self.mean_ns * self.count


@dataclass(frozen=True, slots=True)
class DirectionStats:
    """Cumulative numbers of one direction (read, write, trim or mixed) of one job."""

    io_bytes: int
    total_ios: int
    short_ios: int
    drop_ios: int
    iops: float            # fio's average since the job started
    bw_bytes: float        # B/s, fio's average since the job started
    runtime_ms: int
    clat: Latency | None   # None: absent (no completions timed, e.g. gtod_reduce=1)
    slat: Latency | None
    lat: Latency | None


@dataclass(slots=True)
class JobRecord:
    """One job entry of a document. Identified by position, name and host, never by name alone."""

    jobid: int                     # position among the jobs of its document (per host in client mode)
    name: str
    options: dict[str, str]        # global options merged with the job's own (job wins)
    job_options: dict[str, str]    # the job's own options as fio printed them
    directions: dict[str, DirectionStats]
    hostname: str | None = None    # client/server mode only
    port: int | None = None
    groupid: int | None = None
    error: int = 0
    eta_s: int | None = None       # None while fio prints INT_MAX, or absent (client mode)
    elapsed_s: int | None = None
    job_runtime_ms: int | None = None
    usr_cpu: float | None = None   # percent, as fio prints it
    sys_cpu: float | None = None
    ctx: int | None = None
    majf: int | None = None
    minf: int | None = None
    iodepth_level: dict[str, float] = field(default_factory=dict)  # depth bucket -> percent

    @property
    def host(self) -> str | None:
        """``hostname:port`` in client/server mode, else None (the caller supplies the local host)."""
        if self.hostname is None:
            return None
        return f"{self.hostname}:{self.port}" if self.port is not None else self.hostname


@dataclass(slots=True)
class FioRecord:
    """One fio JSON document: a final result or one cumulative status record."""

    version: str | None
    timestamp: float | None        # seconds since the epoch (timestamp_ms if present)
    global_options: dict[str, str]
    jobs: list[JobRecord]
    client_mode: bool = False
    client_aggregates: list[JobRecord] = field(default_factory=list)  # "All clients" entries
    interim_snapshots: int = 0     # client mode with --status-interval: snapshots before the last


class NotFioDocument(ValueError):
    """A JSON document that is not fio output (no ``jobs`` nor ``client_stats`` list)."""


# --------------------------------------------------------------------------------------------
# documents -> records

def _num(value: Any, default: float = 0.0) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return default


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return default


def _opt_int(value: Any) -> int | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    return None


def _opt_num(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def parse_latency(block: Any) -> Latency | None:
    """A latency block, or None when fio timed nothing (``N`` 0 or missing): absent, not zero."""
    if not isinstance(block, dict):
        return None
    n = _int(block.get("N"))
    if n <= 0:
        return None
    pct = block.get("percentile")
    percentiles: tuple[tuple[float, float], ...] = ()
    if isinstance(pct, dict):
        items = []
        for key, value in pct.items():
            try:
                items.append((float(key) / 100.0, float(value)))
            except (TypeError, ValueError):
                continue
        percentiles = tuple(sorted(items))
    bins = block.get("bins")
    return Latency(
        count=n, min_ns=_num(block.get("min")), max_ns=_num(block.get("max")),
        mean_ns=_num(block.get("mean")), stddev_ns=_num(block.get("stddev")),
        percentiles=percentiles, bins=bins if isinstance(bins, dict) else None,
    )


def parse_direction(block: Any) -> DirectionStats | None:
    if not isinstance(block, dict):
        return None
    return DirectionStats(
        io_bytes=_int(block.get("io_bytes")), total_ios=_int(block.get("total_ios")),
        short_ios=_int(block.get("short_ios")), drop_ios=_int(block.get("drop_ios")),
        iops=_num(block.get("iops")), bw_bytes=_num(block.get("bw_bytes")),
        runtime_ms=_int(block.get("runtime")),
        clat=parse_latency(block.get("clat_ns")), slat=parse_latency(block.get("slat_ns")),
        lat=parse_latency(block.get("lat_ns")),
    )


def _options(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def parse_job(entry: dict[str, Any], jobid: int, global_options: dict[str, str]) -> JobRecord:
    """One entry of ``jobs``/``client_stats``; global options are merged under the job's own."""
    job_options = _options(entry.get("job options"))
    directions = {}
    for d in DIRECTIONS:
        stats = parse_direction(entry.get(d))
        if stats is not None:
            directions[d] = stats
    eta = _opt_int(entry.get("eta"))
    port = _opt_int(entry.get("port"))
    hostname = entry.get("hostname")
    level = entry.get("iodepth_level")
    return JobRecord(
        jobid=jobid, name=str(entry.get("jobname", "")),
        options={**global_options, **job_options}, job_options=job_options,
        directions=directions,
        hostname=str(hostname) if hostname is not None else None, port=port,
        groupid=_opt_int(entry.get("groupid")), error=_int(entry.get("error")),
        eta_s=None if eta is None or eta >= ETA_UNKNOWN else eta,
        elapsed_s=_opt_int(entry.get("elapsed")), job_runtime_ms=_opt_int(entry.get("job_runtime")),
        usr_cpu=_opt_num(entry.get("usr_cpu")), sys_cpu=_opt_num(entry.get("sys_cpu")),
        ctx=_opt_int(entry.get("ctx")), majf=_opt_int(entry.get("majf")), minf=_opt_int(entry.get("minf")),
        iodepth_level={str(k): _num(v) for k, v in level.items()} if isinstance(level, dict) else {},
    )


def _is_aggregate(entry: dict[str, Any]) -> bool:
    return entry.get("jobname") == ALL_CLIENTS and "job options" not in entry


def _client_period(entries: list[dict[str, Any]], anchor: int | None) -> int:
    """How many entries one snapshot of one client has.

    fio appends interim snapshots to ``client_stats`` in client mode with ``--status-interval``;
    nothing marks where one ends except (sometimes) an "All clients" entry after the first one.
    Without that anchor, the smallest period whose names repeat and whose ``job_runtime`` grows
    strictly at every position is taken (entries of one snapshot are sampled at the same moment,
    so the same job in the next snapshot has run longer); failing that, all entries are jobs.
    """
    n = len(entries)
    names = [e.get("jobname") for e in entries]
    runtimes = [_int(e.get("job_runtime"), -1) for e in entries]

    def fits(k: int) -> bool:
        if k <= 0 or n % k:
            return False
        for i in range(k, n):
            if names[i] != names[i - k] or runtimes[i] <= runtimes[i - k]:
                return False
        return True

    if anchor and fits(anchor):
        return anchor
    for k in range(1, n):
        if n % k == 0 and fits(k):
            return k
    return n


def _client_jobs(entries: list[Any], global_options: dict[str, str]) -> tuple[list[JobRecord], list[JobRecord], int]:
    by_host: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    before_aggregate: dict[tuple[Any, Any], int] = {}
    aggregates: list[JobRecord] = []
    seen_aggregate = False
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        key = (entry.get("hostname"), entry.get("port"))
        if _is_aggregate(entry):
            if not seen_aggregate:
                for k, lst in by_host.items():
                    before_aggregate[k] = len(lst)
            seen_aggregate = True
            aggregates.append(parse_job(entry, len(aggregates), {}))
            continue
        by_host.setdefault(key, []).append(entry)
    jobs: list[JobRecord] = []
    interim = 0
    for key, lst in by_host.items():
        k = _client_period(lst, before_aggregate.get(key))
        interim = max(interim, len(lst) // k - 1)
        for pos, entry in enumerate(lst[-k:]):
            jobs.append(parse_job(entry, pos, global_options))
    return jobs, aggregates, interim


def parse_document(doc: Any) -> FioRecord:
    """A decoded fio JSON document -> :class:`FioRecord`. Raises :class:`NotFioDocument`."""
    if not isinstance(doc, dict):
        raise NotFioDocument(f"expected a JSON object, got {type(doc).__name__}")
    global_options = _options(doc.get("global options"))
    ts_ms = doc.get("timestamp_ms")
    ts = doc.get("timestamp")
    timestamp = (_num(ts_ms) / 1000.0 if isinstance(ts_ms, (int, float)) and not isinstance(ts_ms, bool)
                 else _opt_num(ts))
    version = doc.get("fio version")
    version = str(version) if version is not None else None
    if isinstance(doc.get("jobs"), list):
        jobs = [parse_job(e, i, global_options)
                for i, e in enumerate(e for e in doc["jobs"] if isinstance(e, dict))]
        return FioRecord(version=version, timestamp=timestamp, global_options=global_options, jobs=jobs)
    if isinstance(doc.get("client_stats"), list):
        jobs, aggregates, interim = _client_jobs(doc["client_stats"], global_options)
        return FioRecord(version=version, timestamp=timestamp, global_options=global_options, jobs=jobs,
                         client_mode=True, client_aggregates=aggregates, interim_snapshots=interim)
    raise NotFioDocument("neither 'jobs' nor 'client_stats' is a list: not fio JSON output")


# --------------------------------------------------------------------------------------------
# text -> documents

@dataclass
class StreamCounts:
    """What a :class:`DocumentStream` has seen so far (all cumulative)."""

    documents: int = 0
    non_json_lines: int = 0      # lines skipped because they are not JSON (note:, fio: io_u error...)
    corrupt_documents: int = 0   # documents that could not be decoded and were dropped
    not_fio_documents: int = 0   # valid JSON that is not fio output


class DocumentStream:
    """Splits fio's output text into JSON documents as it arrives.

    ``feed(text)`` returns the documents completed by ``text``; ``finish()`` ends the input and
    counts what is left as skipped. Documents start with ``{`` at the start of a line; anything
    else between documents is a non-JSON line. A non-JSON line *inside* a document (fio writes
    error lines into the same stream) is cut out and the document decoded again.
    """

    #: Bound on the non-JSON lines cut out of one document before it is given up as corrupt.
    MAX_REPAIRS = 1000

    def __init__(self) -> None:
        self.counts = StreamCounts()
        self._buf = ""          # unconsumed text; starts at a document start or a line start
        self._scan = 0          # where the search for a possible document end continues
        self._repairs = 0

    @property
    def pending(self) -> int:
        """Characters held back: the document (or line) still being written."""
        return len(self._buf)

    def feed(self, text: str) -> list[dict[str, Any]]:
        if text:
            self._buf += text
        return self._drain(final=False)

    def finish(self) -> list[dict[str, Any]]:
        docs = self._drain(final=True)
        rest = self._buf
        if rest.strip():
            if rest.lstrip().startswith("{"):
                self.counts.corrupt_documents += 1  # a document cut off (fio killed, file truncated)
            else:
                self.counts.non_json_lines += sum(1 for ln in rest.splitlines() if ln.strip())
        self._buf, self._scan = "", 0
        return docs

    def _skip_to_document(self, buf: str, pos: int, final: bool) -> tuple[int | None, int]:
        """From ``pos`` (a line start), skip non-JSON lines up to a document start.

        Returns (start, pos): ``start`` is the index of a ``{`` opening a line, or None when
        there is none yet; then ``pos`` is where the unconsumed (incomplete) line begins."""
        n = len(buf)
        while pos < n:
            if buf[pos] == "{":
                return pos, pos
            eol = buf.find("\n", pos)
            if eol < 0:
                if not final:
                    return None, pos          # a line still being written: keep it
                if buf[pos:].strip():
                    self.counts.non_json_lines += 1
                return None, n
            if buf[pos:eol].strip():
                self.counts.non_json_lines += 1
            pos = eol + 1
        return None, n

    def _drain(self, final: bool) -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = []
        buf = self._buf
        pos = 0
        scan = self._scan
        while True:
            start, pos = self._skip_to_document(buf, pos, final)
            if start is None:
                scan = pos
                break
            scan = max(scan, pos)
            # Only try to decode if the document can have ended: a '}' opening a line (fio's
            # top-level closing brace; inner ones are indented) or, for compact JSON, a text
            # ending with '}'. This keeps a growing stream at O(new text) per feed.
            if not final and buf.find("\n}", max(scan - 1, pos)) < 0 and not _ends_with_brace(buf):
                scan = len(buf)
                break
            try:
                doc, end = _decoder.raw_decode(buf, pos)
            except json.JSONDecodeError as exc:
                outcome = self._repair(buf, pos, exc.pos, final)
                if outcome is None:           # incomplete: wait for more text
                    scan = len(buf)
                    break
                buf, pos = outcome
                scan = pos
                continue
            self._repairs = 0
            pos = scan = end
            if isinstance(doc, dict):
                self.counts.documents += 1
                docs.append(doc)
            else:
                self.counts.not_fio_documents += 1
        self._buf = buf[pos:]
        self._scan = max(0, scan - pos)
        return docs

    def _repair(self, buf: str, start: int, err: int, final: bool) -> tuple[str, int] | None:
        """After a decode error at ``err`` in the document at ``start``: cut a non-JSON line out
        and retry, wait for more text, or drop the document. Returns (buf, pos) or None to wait."""
        if err >= _content_end(buf) and not final:
            return None
        line_start = buf.rfind("\n", start, err) + 1
        line_end = buf.find("\n", err)
        line = buf[line_start: line_end if line_end >= 0 else len(buf)]
        if line_start > start and self._repairs < self.MAX_REPAIRS and not _JSON_LINE.match(line):
            if line_end < 0 and not final:
                return None                   # the foreign line is still being written
            self._repairs += 1
            self.counts.non_json_lines += 1
            return buf[:line_start] + buf[line_end + 1 if line_end >= 0 else len(buf):], start
        # Not repairable (cut-off document followed by another one, garbage inside a line...):
        # drop this document's first line; the lines after it are skipped up to the next start.
        self._repairs = 0
        self.counts.corrupt_documents += 1
        nl = buf.find("\n", start)
        if nl < 0:
            return buf, len(buf)
        return buf, nl + 1


def _content_end(buf: str) -> int:
    """Length of ``buf`` without trailing whitespace (without copying it)."""
    i = len(buf)
    while i > 0 and buf[i - 1] in " \t\r\n":
        i -= 1
    return i


def _ends_with_brace(buf: str) -> bool:
    i = _content_end(buf)
    return i > 0 and buf[i - 1] == "}"


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
    """All records of a complete fio output text (any form above), in order."""
    stream = DocumentStream()
    docs = stream.feed(text)
    docs.extend(stream.finish())
    records = parse_documents(docs, stream.counts)
    return ReadResult(records=records, counts=stream.counts)
