"""Reading fio's JSON output into plain records (pure functions, no I/O).

Every form fio 3.x writes is read here (see docs/fio.md, "How fio's output is read"):

- ``--output-format=json`` / ``json+``: one document; ``json+`` adds ``clat_ns.bins``.
- ``--status-interval=N``: concatenated pretty-printed documents, each cumulative since job start.
- client/server (``fio --client``): ``client_stats`` instead of ``jobs``, with ``hostname`` and
  ``port`` per entry and an ``"All clients"`` aggregate entry; interim snapshots appended to
  ``client_stats`` when ``--status-interval`` was given.
- ``unified_rw_reporting``: a ``mixed`` direction instead of read/write/trim.

Lines that are not JSON (``note: ...`` on stdout, ``fio: io_u error ...`` even inside ``--output``
files) are skipped and counted, wherever they are; one bad document never loses the others.

Framing the text into documents (:class:`~ioparallax.exporters.fio.reader.DocumentStream`) is the
reader's job (``reader.py``); this module turns a decoded document into records. Every number is
checked: a document with a value fio cannot write (NaN, infinity, negative counts, beyond 2^64)
raises :class:`InvalidValue` in :func:`parse_document`.

Two ways read a document, with the same records and the same rejections:

- typed (``DocumentStream(typed=True)``, what ``reader.read_text`` and the exporter's reader use):
  msgspec decodes fio's ordinary ``jobs`` document straight into :class:`FioDocument`, checking
  the type and range of every number in C as it decodes (``msgspec.Meta`` bounds), and
  :func:`parse_document` only builds the records. A document that does not pass (a value out of
  range or of another type, client/server ``client_stats``, keys not seen before) is decoded
  again as plain dicts and goes the field-by-field way below, which decides and names the field;
- plain dicts (any decoder): every number checked field by field (a block at a time when fine).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

import msgspec

#: fio prints INT_MAX as ``eta`` before it can estimate one.
ETA_UNKNOWN = 2147483647

#: Directions as fio names them; ``mixed`` replaces the others under ``unified_rw_reporting``.
DIRECTIONS = ("read", "write", "trim", "mixed")

#: Name of the aggregate entry fio adds to ``client_stats`` in client/server mode.
ALL_CLIENTS = "All clients"

_msgspec_decode = msgspec.json.Decoder().decode


@dataclass(frozen=True, slots=True)
class Latency:
    """One of fio's ``slat_ns``/``clat_ns``/``lat_ns`` blocks, in nanoseconds."""

    count: int  # N
    min_ns: float
    max_ns: float
    mean_ns: float
    stddev_ns: float
    percentiles: tuple[tuple[float, float], ...] = ()  # (quantile 0-1, value in ns), fio's own
    bins: dict[str, int] | None = None  # json+ only: bucket midpoint (ns, as a string) -> count

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
    iops: float  # fio's average since the job started
    bw_bytes: float  # B/s, fio's average since the job started
    runtime_ms: int
    clat: Latency | None  # None: absent (no completions timed, e.g. gtod_reduce=1)
    slat: Latency | None
    lat: Latency | None


@dataclass(slots=True)
class JobRecord:
    """One job entry of a document. Identified by position, name and host, never by name alone."""

    jobid: int  # position among the jobs of its document (per host in client mode)
    name: str
    options: dict[str, str]  # global options merged with the job's own (job wins)
    job_options: dict[str, str]  # the job's own options as fio printed them
    directions: dict[str, DirectionStats]
    hostname: str | None = None  # client/server mode only
    port: int | None = None
    groupid: int | None = None
    error: int = 0
    eta_s: int | None = None  # None while fio prints INT_MAX, or absent (client mode)
    elapsed_s: int | None = None
    job_runtime_ms: int | None = None
    usr_cpu: float | None = None  # percent, as fio prints it
    sys_cpu: float | None = None
    ctx: int | None = None
    majf: int | None = None
    minf: int | None = None
    iodepth_level: dict[str, float] = field(default_factory=dict)  # depth bucket -> percent

    @property
    def host(self) -> str | None:
        """``hostname:port`` in client/server mode, else None (the caller supplies the local host).

        A hostname holding ``:`` (an IPv6 address) or starting with ``[`` is bracketed, as in URLs,
        so that no two (hostname, port) pairs give the same label: host ``a:1`` without a port is
        ``[a:1]``, host ``a`` port 1 is ``a:1``, and ``::1`` port 8765 is ``[::1]:8765``."""
        if self.hostname is None:
            return None
        name = self.hostname
        if ":" in name or name.startswith("["):
            name = f"[{name}]"
        return f"{name}:{self.port}" if self.port is not None else name


@dataclass(slots=True)
class FioRecord:
    """One fio JSON document: a final result or one cumulative status record."""

    version: str | None
    timestamp: float | None  # seconds since the epoch (timestamp_ms if present)
    global_options: dict[str, str]
    jobs: list[JobRecord]
    client_mode: bool = False
    client_aggregates: list[JobRecord] = field(default_factory=list)  # "All clients" entries
    interim_snapshots: int = 0  # client mode with --status-interval: snapshots before the last


class NotFioDocument(ValueError):
    """A JSON document that is not fio output (no ``jobs`` nor ``client_stats`` list)."""


class InvalidValue(ValueError):
    """A fio document holding a value fio cannot write: NaN or infinity, a negative count or
    time, a number beyond 2^64 (fio's counters are 64-bit). The document is rejected whole; the
    message names the field (``jobs[0].read.total_ios = -5: negative``)."""


#: fio's counters and times are unsigned 64-bit integers (doubles for averages); anything larger
#: is not fio output.
MAX_VALUE = 2**64


# --------------------------------------------------------------------------------------------
# documents -> records (every number checked here, at the edge)


def _shown(value: Any) -> str:
    if isinstance(value, int) and abs(value) > MAX_VALUE:
        return f"a {len(str(abs(value)))}-digit number"
    return repr(value)


def _checked(value: Any, where: str, limit: float = MAX_VALUE) -> float | int | None:
    """A number fio can have written, or None when the field is absent or not a number."""
    kind = type(value)
    if (kind is int or kind is float) and 0 <= value <= limit:  # what fio writes (NaN fails 0 <= NaN)
        return value
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidValue(f"{where} = {value!r}: not a finite number")
    if value < 0:
        raise InvalidValue(f"{where} = {_shown(value)}: negative")
    if value > limit:
        raise InvalidValue(f"{where} = {_shown(value)}: above {limit:g}, more than fio can write")
    return value


def _num(value: Any, where: str, default: float = 0.0) -> float:
    v = _checked(value, where)
    return default if v is None else float(v)


def _int(value: Any, where: str, default: int = 0) -> int:
    v = _checked(value, where)
    return default if v is None else int(v)


def _opt_int(value: Any, where: str, limit: float = MAX_VALUE) -> int | None:
    v = _checked(value, where, limit)
    return None if v is None else int(v)


def _opt_num(value: Any, where: str) -> float | None:
    v = _checked(value, where)
    return None if v is None else float(v)


# Fast paths: fio's ordinary values checked a block at a time with C-level calls (a 64-job json+
# result holds ~10,000 numbers). When a block is not plainly fine (a value missing, of another
# type, out of range), it goes the field-by-field way above, which decides and names the field,
# so what is accepted and every message are the same either way.
_INT = frozenset({int})
_NUMBER = frozenset({int, float})


def _fine(values: tuple[Any, ...] | Any, kinds: frozenset[type] = _NUMBER) -> bool:
    """Every value of a type in ``kinds`` (never bool, nor None: absent), 0 <= value <= 2^64
    and not NaN."""
    try:
        if not set(map(type, values)) <= kinds or min(values) < 0 or max(values) > MAX_VALUE:
            return False
        total = sum(values)
        return bool(total == total)  # NaN, which compares false both ways with the bounds
    except (TypeError, ValueError):  # ValueError: empty
        return False


_LATENCY_STATS = ("min", "max", "mean", "stddev")
_DIRECTION_INTS = ("io_bytes", "total_ios", "short_ios", "drop_ios", "runtime")
_DIRECTION_NUMBERS = ("iops", "bw_bytes")
_JOB_INTS = ("groupid", "error", "eta", "elapsed", "job_runtime", "ctx", "majf", "minf")
_JOB_NUMBERS = ("usr_cpu", "sys_cpu")


def parse_latency(block: Any, where: str = "latency") -> Latency | None:
    """A latency block, or None when fio timed nothing (``N`` 0 or missing): absent, not zero."""
    if not isinstance(block, dict):
        return None
    n = block.get("N")
    if n is None or (n == 0 and type(n) is int):
        return None
    stats: tuple[Any, ...] = tuple(map(block.get, _LATENCY_STATS))
    fast = type(n) is int and 0 < n <= MAX_VALUE and _fine(stats)
    if not fast:
        n = _int(n, f"{where}.N")
        if n <= 0:
            return None
    pct = block.get("percentile")
    percentiles: tuple[tuple[float, float], ...] = ()
    if isinstance(pct, dict) and pct and _plain_percentiles(pct):
        if pct.keys() <= _PERCENTILE_KEYS.keys():
            quantiles: Iterable[float] = map(_PERCENTILE_KEYS.__getitem__, pct)
        else:
            quantiles = [float(k) / 100.0 for k in pct]
        percentiles = tuple(sorted(zip(quantiles, map(float, pct.values()))))
    elif isinstance(pct, dict):
        items = []
        for key, value in pct.items():
            try:
                q = float(key)
            except (TypeError, ValueError):
                continue  # not a percentile key: ignored, as before
            if not 0.0 <= q <= 100.0:  # also NaN
                raise InvalidValue(f"{where}.percentile key {key!r}: not a percentile (0-100)")
            v = _opt_num(value, f"{where}.percentile[{key!r}]")
            if v is not None:
                items.append((q / 100.0, v))
        percentiles = tuple(sorted(items))
    bins = block.get("bins")
    if isinstance(bins, dict) and bins:
        _check_bins(bins, f"{where}.bins")
    if fast:
        min_ns, max_ns, mean_ns, stddev_ns = map(float, stats)
    else:
        min_ns, max_ns, mean_ns, stddev_ns = (_num(block.get(k), f"{where}.{k}") for k in _LATENCY_STATS)
    return Latency(
        count=n,
        min_ns=min_ns,
        max_ns=max_ns,
        mean_ns=mean_ns,
        stddev_ns=stddev_ns,
        percentiles=percentiles,
        bins=bins if isinstance(bins, dict) else None,
    )


# Keys already proven fine, so that the records of a status stream, which repeat the same
# percentile and bin keys (fio's fixed latency buckets), are not checked key by key again. Bounded:
# beyond the bound keys are checked every time, as before.
_KNOWN_KEYS_LIMIT = 8192
_PERCENTILE_KEYS: dict[str, float] = {}  # "99.000000" -> 0.99
_BIN_KEYS: set[str] = set()


def _plain_percentiles(pct: dict[Any, Any]) -> bool:
    """fio's own form (keys ``"99.000000"``, values integer ns), checked with C-level calls; the
    per-item path handles (and rejects) anything else."""
    values = pct.values()
    try:
        if not (set(map(type, values)) == {int} and min(values) >= 0 and max(values) <= MAX_VALUE):
            return False
        if pct.keys() <= _PERCENTILE_KEYS.keys():
            return True
        fine = "".join(pct).replace(".", "").isdigit() and 0.0 <= min(map(float, pct)) and max(map(float, pct)) <= 100.0
    except (TypeError, ValueError):
        return False
    if fine and len(_PERCENTILE_KEYS) < _KNOWN_KEYS_LIMIT:
        _PERCENTILE_KEYS.update((k, float(k) / 100.0) for k in pct)
    return fine


def _check_bins(bins: dict[Any, Any], where: str) -> None:
    """json+ bins: latency (ns, a string key) -> count. Checked in bulk (thousands per record at
    every status interval); the slow per-bin look only finds the culprit for the message."""
    counts = bins.values()
    try:
        # fio writes integer nanoseconds as keys and integer counts: checked with C-level calls
        fine = set(map(type, counts)) == {int} and min(counts) >= 0 and max(counts) <= MAX_VALUE
        if fine and not bins.keys() <= _BIN_KEYS:
            fine = "".join(bins).isdigit() and max(map(len, bins)) <= 19
            if fine and len(_BIN_KEYS) < _KNOWN_KEYS_LIMIT:
                _BIN_KEYS.update(bins)
                _BIN_KEYS.discard("")  # fine beside digits only: never alone
    except TypeError:  # a key that is not a string
        fine = False
    if fine:
        return
    for key, count in bins.items():
        try:
            mid = float(key)
        except (TypeError, ValueError):
            raise InvalidValue(f"{where} key {key!r}: not a latency in ns") from None
        _checked(mid, f"{where} key {key!r}")
        if _checked(count, f"{where}[{key!r}]") is None:
            raise InvalidValue(f"{where}[{key!r}] = {_shown(count)}: not a count")


def parse_direction(block: Any, where: str = "direction") -> DirectionStats | None:
    if not isinstance(block, dict):
        return None
    ints: tuple[Any, ...] = tuple(map(block.get, _DIRECTION_INTS))
    numbers: tuple[Any, ...] = tuple(map(block.get, _DIRECTION_NUMBERS))
    if _fine(ints, _INT) and _fine(numbers):
        io_bytes, total_ios, short_ios, drop_ios, runtime_ms = ints
        iops, bw_bytes = map(float, numbers)
    else:
        # The per-key path: the first value fio cannot have written is named in the error.
        io_bytes, total_ios, short_ios, drop_ios, runtime_ms = (
            _int(block.get(k), f"{where}.{k}") for k in _DIRECTION_INTS
        )
        iops, bw_bytes = (_num(block.get(k), f"{where}.{k}") for k in _DIRECTION_NUMBERS)
    return DirectionStats(
        io_bytes=io_bytes,
        total_ios=total_ios,
        short_ios=short_ios,
        drop_ios=drop_ios,
        iops=iops,
        bw_bytes=bw_bytes,
        runtime_ms=runtime_ms,
        clat=parse_latency(block.get("clat_ns"), f"{where}.clat_ns"),
        slat=parse_latency(block.get("slat_ns"), f"{where}.slat_ns"),
        lat=parse_latency(block.get("lat_ns"), f"{where}.lat_ns"),
    )


def _options(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def parse_job(entry: dict[str, Any], jobid: int, global_options: dict[str, str], where: str | None = None) -> JobRecord:
    """One entry of ``jobs``/``client_stats``; global options are merged under the job's own.
    Raises :class:`InvalidValue` for a number fio cannot have written."""
    w = where or f"jobs[{jobid}]"
    job_options = _options(entry.get("job options"))
    directions = {}
    for d in DIRECTIONS:
        stats = parse_direction(entry.get(d), f"{w}.{d}")
        if stats is not None:
            directions[d] = stats
    ints: tuple[Any, ...] = tuple(map(entry.get, _JOB_INTS))
    numbers: tuple[Any, ...] = tuple(map(entry.get, _JOB_NUMBERS))
    usr_cpu: float | None
    sys_cpu: float | None
    fast = _fine(ints, _INT) and _fine(numbers)
    if fast:
        groupid, error, eta, elapsed, job_runtime, ctx, majf, minf = ints
        usr_cpu, sys_cpu = map(float, numbers)
    else:
        eta = _opt_int(entry.get("eta"), f"{w}.eta")
    port = _opt_int(entry.get("port"), f"{w}.port", limit=65535)
    if not fast:
        groupid = _opt_int(entry.get("groupid"), f"{w}.groupid")
        error = _int(entry.get("error"), f"{w}.error")
        elapsed = _opt_int(entry.get("elapsed"), f"{w}.elapsed")
        job_runtime = _opt_int(entry.get("job_runtime"), f"{w}.job_runtime")
        usr_cpu = _opt_num(entry.get("usr_cpu"), f"{w}.usr_cpu")
        sys_cpu = _opt_num(entry.get("sys_cpu"), f"{w}.sys_cpu")
        ctx = _opt_int(entry.get("ctx"), f"{w}.ctx")
        majf = _opt_int(entry.get("majf"), f"{w}.majf")
        minf = _opt_int(entry.get("minf"), f"{w}.minf")
    hostname = entry.get("hostname")
    level = entry.get("iodepth_level")
    if not isinstance(level, dict):
        iodepth_level = {}
    elif _fine(tuple(level.values())):
        iodepth_level = {str(k): float(v) for k, v in level.items()}
    else:
        iodepth_level = {str(k): _num(v, f"{w}.iodepth_level[{k!r}]") for k, v in level.items()}
    return JobRecord(
        jobid=jobid,
        name=str(entry.get("jobname", "")),
        options={**global_options, **job_options},
        job_options=job_options,
        directions=directions,
        hostname=str(hostname) if hostname is not None else None,
        port=port,
        groupid=groupid,
        error=error,
        eta_s=None if eta is None or eta >= ETA_UNKNOWN else eta,
        elapsed_s=elapsed,
        job_runtime_ms=job_runtime,
        usr_cpu=usr_cpu,
        sys_cpu=sys_cpu,
        ctx=ctx,
        majf=majf,
        minf=minf,
        iodepth_level=iodepth_level,
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
    runtimes = [
        r if isinstance(r := e.get("job_runtime"), (int, float)) and not isinstance(r, bool) else -1 for e in entries
    ]

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
                for host, lst in by_host.items():
                    before_aggregate[host] = len(lst)
            seen_aggregate = True
            aggregates.append(parse_job(entry, len(aggregates), {}, f"client_stats[{ALL_CLIENTS!r}]"))
            continue
        by_host.setdefault(key, []).append(entry)
    jobs: list[JobRecord] = []
    interim = 0
    for key, lst in by_host.items():
        k = _client_period(lst, before_aggregate.get(key))
        interim = max(interim, len(lst) // k - 1)
        for pos, entry in enumerate(lst[-k:]):
            jobs.append(parse_job(entry, pos, global_options, f"client_stats[host {key[0]!r} port {key[1]!r}][{pos}]"))
    return jobs, aggregates, interim


def parse_document(doc: Any) -> FioRecord:
    """A decoded fio JSON document -> :class:`FioRecord`. Raises :class:`NotFioDocument`, or
    :class:`InvalidValue` for a number fio cannot have written (the whole document is garbage).
    A :class:`FioDocument` (numbers checked as it was decoded) is only made into records."""
    if type(doc) is FioDocument:
        return _parse_typed(doc)
    if not isinstance(doc, dict):
        raise NotFioDocument(f"expected a JSON object, got {type(doc).__name__}")
    global_options = _options(doc.get("global options"))
    ts_ms = _opt_num(doc.get("timestamp_ms"), "timestamp_ms")
    timestamp = ts_ms / 1000.0 if ts_ms is not None else _opt_num(doc.get("timestamp"), "timestamp")
    version = doc.get("fio version")
    version = str(version) if version is not None else None
    if isinstance(doc.get("jobs"), list):
        jobs = [parse_job(e, i, global_options) for i, e in enumerate(e for e in doc["jobs"] if isinstance(e, dict))]
        return FioRecord(version=version, timestamp=timestamp, global_options=global_options, jobs=jobs)
    if isinstance(doc.get("client_stats"), list):
        jobs, aggregates, interim = _client_jobs(doc["client_stats"], global_options)
        return FioRecord(
            version=version,
            timestamp=timestamp,
            global_options=global_options,
            jobs=jobs,
            client_mode=True,
            client_aggregates=aggregates,
            interim_snapshots=interim,
        )
    raise NotFioDocument("neither 'jobs' nor 'client_stats' is a list: not fio JSON output")


# --------------------------------------------------------------------------------------------
# typed documents: numbers checked by msgspec as it decodes

# What fio writes, as bounds msgspec checks in C. Each accepts only what the field-by-field way
# accepts with the same value, so a document that passes gives the same records either way:
# counts are ints in 0..2^63-1 (msgspec's bounds are int64; a float, bool or string fails and goes
# the dict way, where it reads as absent or is converted as before); averages are ints or finite
# floats in 0..2^63 (an int beyond 2^63 would be rounded to a float before the bound is checked).
# What is beyond these bounds goes the dict way, which accepts it up to 2^64 and rejects the
# rest. JSON has no NaN or infinity: msgspec refuses them outright.
_Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
_Average = Annotated[float, msgspec.Meta(ge=0, le=2.0**63)]
_Port = Annotated[int, msgspec.Meta(ge=0, le=65535)]


class _LatencyBlock(msgspec.Struct, gc=False):
    N: _Count | None = None
    min: _Average | None = None
    max: _Average | None = None
    mean: _Average | None = None
    stddev: _Average | None = None
    percentile: dict[str, _Count] | None = None
    bins: dict[str, _Count] | None = None


class _DirectionBlock(msgspec.Struct, gc=False):
    io_bytes: _Count | None = None
    total_ios: _Count | None = None
    short_ios: _Count | None = None
    drop_ios: _Count | None = None
    runtime: _Count | None = None
    iops: _Average | None = None
    bw_bytes: _Average | None = None
    clat_ns: _LatencyBlock | None = None
    slat_ns: _LatencyBlock | None = None
    lat_ns: _LatencyBlock | None = None


class _JobEntry(msgspec.Struct, gc=False):
    jobname: str = ""  # a null name reads as "None" the dict way: it goes that way
    job_options: dict[str, str] | None = msgspec.field(default=None, name="job options")
    read: _DirectionBlock | None = None
    write: _DirectionBlock | None = None
    trim: _DirectionBlock | None = None
    mixed: _DirectionBlock | None = None
    groupid: _Count | None = None
    error: _Count | None = None
    eta: _Count | None = None
    elapsed: _Count | None = None
    job_runtime: _Count | None = None
    ctx: _Count | None = None
    majf: _Count | None = None
    minf: _Count | None = None
    usr_cpu: _Average | None = None
    sys_cpu: _Average | None = None
    iodepth_level: dict[str, _Average] | None = None
    hostname: str | None = None
    port: _Port | None = None


class FioDocument(msgspec.Struct, gc=False):
    """A fio ``jobs`` document decoded with its numbers checked (fields fio does not write, or
    the reader does not use, are skipped unread). :func:`parse_document` makes it a record."""

    version: str | None = msgspec.field(default=None, name="fio version")
    timestamp: _Average | None = None
    timestamp_ms: _Average | None = None
    global_options: dict[str, str] | None = msgspec.field(default=None, name="global options")
    jobs: list[_JobEntry] | None = None


_typed_decode = msgspec.json.Decoder(FioDocument).decode


class _KeysNotKnown(Exception):
    """A typed document holds percentile or bin keys not proven fine yet: read it the dict way,
    which checks them (and remembers them)."""


def _decode_document(raw: bytes, typed: bool) -> Any:
    """One whole document by msgspec: a :class:`FioDocument` when ``typed`` and it passes,
    else plain dicts. Raises msgspec.DecodeError (not one JSON document, NaN, invalid UTF-8) or
    RecursionError."""
    if typed:
        try:
            doc = _typed_decode(raw)
        except msgspec.ValidationError:  # a number fio cannot write, another type, not an object
            pass
        else:
            if doc.jobs is not None:
                return doc
    return _msgspec_decode(raw)


def _typed_latency(block: _LatencyBlock | None) -> Latency | None:
    if block is None or not block.N:
        return None
    pct = block.percentile
    percentiles: tuple[tuple[float, float], ...] = ()
    if pct:
        if not pct.keys() <= _PERCENTILE_KEYS.keys():
            raise _KeysNotKnown
        percentiles = tuple(sorted(zip(map(_PERCENTILE_KEYS.__getitem__, pct), map(float, pct.values()))))
    bins = block.bins
    if bins and not bins.keys() <= _BIN_KEYS:
        raise _KeysNotKnown
    return Latency(
        block.N,
        block.min or 0.0,
        block.max or 0.0,
        block.mean or 0.0,
        block.stddev or 0.0,
        percentiles,
        bins,
    )


def _typed_direction(block: _DirectionBlock) -> DirectionStats:
    return DirectionStats(
        block.io_bytes or 0,
        block.total_ios or 0,
        block.short_ios or 0,
        block.drop_ios or 0,
        block.iops or 0.0,
        block.bw_bytes or 0.0,
        block.runtime or 0,
        _typed_latency(block.clat_ns),
        _typed_latency(block.slat_ns),
        _typed_latency(block.lat_ns),
    )


def _typed_job(entry: _JobEntry, jobid: int, global_options: dict[str, str]) -> JobRecord:
    directions = {}
    for name, block in (("read", entry.read), ("write", entry.write), ("trim", entry.trim), ("mixed", entry.mixed)):
        if block is not None:
            directions[name] = _typed_direction(block)
    job_options = entry.job_options or {}
    eta = entry.eta
    return JobRecord(
        jobid,
        entry.jobname,
        {**global_options, **job_options},
        job_options,
        directions,
        entry.hostname,
        entry.port,
        entry.groupid,
        entry.error or 0,
        None if eta is None or eta >= ETA_UNKNOWN else eta,
        entry.elapsed,
        entry.job_runtime,
        entry.usr_cpu,
        entry.sys_cpu,
        entry.ctx,
        entry.majf,
        entry.minf,
        entry.iodepth_level or {},
    )


def _parse_typed(doc: FioDocument) -> FioRecord:
    try:
        global_options = doc.global_options or {}
        timestamp = doc.timestamp_ms / 1000.0 if doc.timestamp_ms is not None else doc.timestamp
        jobs = [_typed_job(e, i, global_options) for i, e in enumerate(doc.jobs or ())]
    except _KeysNotKnown:
        return parse_document(msgspec.to_builtins(doc))
    return FioRecord(version=doc.version, timestamp=timestamp, global_options=global_options, jobs=jobs)
