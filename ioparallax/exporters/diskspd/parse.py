"""Reading DiskSPD's ``-Rxml`` result documents into plain records (pure functions, no I/O).

DiskSPD (microsoft/diskspd 2.0.x-2.2) writes one XML document at the end of a run, laid out by
``XmlResultParser.cpp`` and ``Common.cpp`` (docs/diskspd.md has the element-by-element map):
``<Results>`` -> ``<System>`` (who and when) -> ``<Profile>`` (the options as run, one
``<TimeSpan>`` per time span with its ``<Targets>``) -> one result ``<TimeSpan>`` per time span
with ``<Thread>/<Target>`` counts, ``-L`` latencies and percentile buckets, ``-D`` IOPS buckets.

The bytes are decoded here whatever the file's encoding: UTF-16 with a BOM (PowerShell's ``>``
and ``Out-File`` write that), UTF-8 with or without a BOM, UTF-16 without a BOM (``<`` followed
by NUL), and, when the bytes are not UTF-8, the Windows ANSI code page (DiskSPD writes the ANSI
strings it got from Windows: a ``ComputerName`` or ``Path`` in cp1252). Text before ``<Results>``
(a warning line captured with stdout) is skipped and counted.

The document is parsed with lxml configured to refuse what DiskSPD never writes and an attacker
would: a DOCTYPE (and so any entity declaration: no "billion laughs", no external entity) is
rejected before parsing; the parser resolves no entities, loads no DTD, opens no network
connection and keeps lxml's limits on tree depth and text size (``huge_tree=False``). A document
above the size bound is refused before it is decoded (:class:`TooLarge`).

Every number is checked: a count or size must be a non-negative integer below 2^64 (DiskSPD prints
them with ``%I64u``), a time or percentage a finite non-negative decimal; anything else raises
:class:`InvalidValue` naming the element (``TimeSpan[1]/Thread[0]/Target[0]/ReadBytes = '-5'``).
"""

from __future__ import annotations

import codecs
import math
import re
from calendar import timegm
from dataclasses import dataclass, field
from time import strptime

from lxml import etree

from ioparallax.exporters.common.labels import MAX_NAME_CHARS, MAX_PATH_CHARS

#: The largest document read by default; larger files are refused unread (``too_large``). A
#: ``-D`` run stores one ``<Bucket>`` line (~400 bytes) per interval per thread and target: a
#: 1-hour run at 1 s buckets with 16 threads is about 25 MB.
DEFAULT_MAX_DOCUMENT_BYTES = 64 * 1024 * 1024

#: DiskSPD's counters are unsigned 64-bit integers.
MAX_COUNT = 2**64

#: The percentiles DiskSPD's text output shows (min, 25th ... 99th, 3-nines ... 9-nines, max): the
#: default set exported; the XML holds 1..99 as well (``--diskspd.percentiles=all``).
TEXT_PERCENTILES = (
    0.0,
    25.0,
    50.0,
    75.0,
    90.0,
    95.0,
    99.0,
    99.9,
    99.99,
    99.999,
    99.9999,
    99.99999,
    99.999999,
    99.9999999,
    100.0,
)


class DiskspdError(ValueError):
    """A file that cannot be read as a DiskSPD result; ``reason`` is the label value of
    ``diskspd_source_error_info`` and the message says why in words."""

    reason = "corrupt"


class Truncated(DiskspdError):
    """The document ends before ``</Results>`` (DiskSPD killed, a copy still running or cut off)."""

    reason = "truncated"


class NotDiskspd(DiskspdError):
    """Well-formed XML that is not a DiskSPD result (no ``<Results>`` with ``<System>``/``<Profile>``)."""

    reason = "not_diskspd"


class InvalidValue(DiskspdError):
    """A value DiskSPD cannot write (a negative count, NaN, beyond 2^64, not a number)."""

    reason = "invalid_value"


class Forbidden(DiskspdError):
    """A DOCTYPE or entity declaration: DiskSPD never writes one; refused before parsing."""

    reason = "forbidden_markup"


class TooLarge(DiskspdError):
    """Above the size bound: refused unread."""

    reason = "too_large"


# --------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True, slots=True)
class TargetProfile:
    """One ``Profile/TimeSpans/TimeSpan/Targets/Target``: a target as DiskSPD was asked to run it."""

    path: str
    block_size: int  # -b, bytes
    base_file_offset: int = 0  # -B
    max_file_size: int = 0  # -f (0: the whole file)
    file_size: int | None = None  # -c: DiskSPD created (or extended) the file to this size
    sequential_scan_hint: bool = False  # -fs: FILE_FLAG_SEQUENTIAL_SCAN (an open hint, not the pattern)
    random_access_hint: bool = False  # -fr: FILE_FLAG_RANDOM_ACCESS (an open hint, not the pattern)
    temporary_file_hint: bool = False  # -ft
    disable_os_cache: bool = False  # -Su / -Sh (and old 2.0.x DisableAllCache / -h)
    disable_local_cache: bool = False  # -Sr: remote (SMB) client cache off, local cache kept
    write_through: bool = False  # -Sw / -Sh
    memory_mapped_io: bool = False  # -Sm
    write_pattern: str = "sequential"  # sequential (default or -Zr: cannot tell), zero (-Z), random (-Z<size>)
    random_data_size: int | None = None  # -Z<size>
    random_data_file: str | None = None  # -Z<size>,<file>
    random_alignment: int | None = None  # -r<align>: present for random I/O
    random_ratio: int | None = None  # -rs<pct>: percent random of mixed I/O (None with -r alone: 100)
    stride_size: int | None = None  # -s<stride>: present for sequential I/O
    interlocked_sequential: bool = False  # -si
    thread_stride: int = 0  # -T
    request_count: int = 2  # -o: outstanding I/Os per thread and target
    write_ratio: int = 0  # -w: percent of I/Os that write
    threads_per_file: int = 1  # -t
    throughput: int = 0  # -g: 0 unlimited
    throughput_unit: str = "bytes_per_ms"  # or "IOPS" (-g<n>i)

    @property
    def random_fraction(self) -> float:
        """Share of random I/O, 0-1: 1 for ``-r``, the ``-rs`` share, 0 for sequential."""
        if self.random_alignment is None:
            return 0.0
        return 1.0 if self.random_ratio is None else self.random_ratio / 100.0

    @property
    def access(self) -> str:
        f = self.random_fraction
        return "random" if f >= 1.0 else "sequential" if f <= 0.0 else "mixed"

    @property
    def os_cache(self) -> bool:
        """True when the OS (software) cache is used: buffered I/O."""
        return not self.disable_os_cache


@dataclass(frozen=True, slots=True)
class TimeSpanProfile:
    """One ``Profile/TimeSpans/TimeSpan``: the time span's options as run."""

    duration_s: float  # -d
    warmup_s: float  # -W
    cooldown_s: float  # -C
    measure_latency: bool  # -L
    calculate_iops_stddev: bool  # -D
    io_bucket_duration_ms: int  # -D<ms>
    thread_count: int  # -F: fixed threads over all targets (0: -t per target)
    request_count: int  # -O (with -F): 0 unless set
    rand_seed: int
    targets: tuple[TargetProfile, ...]


@dataclass(frozen=True, slots=True)
class IopsBucket:
    """One ``<Bucket SampleMillisecond= Read= Write= Total= .../>`` of ``-D``: IOPS in the interval
    that ends at ``sample_ms`` after the measurement started (DiskSPD prints count / interval)."""

    sample_ms: int
    read: float
    write: float
    total: float
    read_latency_avg_ms: float | None = None  # 2.0.20+: per-bucket latency attributes
    write_latency_avg_ms: float | None = None


@dataclass(frozen=True, slots=True)
class IopsSeries:
    """An ``<Iops>`` block: the standard deviations over the buckets and the buckets."""

    read_stddev: float | None
    write_stddev: float | None
    total_stddev: float | None
    buckets: tuple[IopsBucket, ...]


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """``-L`` per target: averages and standard deviations in milliseconds (absent: None)."""

    read_avg_ms: float | None = None
    read_stdev_ms: float | None = None
    write_avg_ms: float | None = None
    write_stdev_ms: float | None = None
    total_avg_ms: float | None = None
    total_stdev_ms: float | None = None


@dataclass(frozen=True, slots=True)
class LatencyPercentile:
    """One ``Latency/Bucket``: a percentile (0 = min, 100 = max) in milliseconds per direction."""

    percentile: float
    read_ms: float | None
    write_ms: float | None
    total_ms: float | None


@dataclass(frozen=True, slots=True)
class ThreadTarget:
    """One ``TimeSpan/Thread/Target``: what one thread did to one target."""

    thread_id: int
    position: int  # the target's position in the thread's list
    path: str
    bytes_count: int
    file_size: int
    io_count: int
    read_bytes: int
    read_count: int
    write_bytes: int
    write_count: int
    latency: LatencyStats | None
    iops: IopsSeries | None


@dataclass(frozen=True, slots=True)
class CpuAverage:
    usage_percent: float
    user_percent: float
    kernel_percent: float
    idle_percent: float


@dataclass(frozen=True, slots=True)
class TimeSpanResult:
    """One result ``<TimeSpan>`` (``error`` set, and nothing else, when DiskSPD was interrupted
    before measuring)."""

    test_time_s: float
    thread_count: int
    request_count: int
    proc_count: int
    cpu: CpuAverage | None
    latency_percentiles: tuple[LatencyPercentile, ...]
    latency: LatencyStats | None  # the time span's overall -L averages
    iops: IopsSeries | None  # the time span's overall -D buckets
    threads: tuple[ThreadTarget, ...]
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TargetResult:
    """A profile target's results summed over the threads that ran it (see :func:`targets_of`)."""

    index: int  # position in the profile's time span (the ``target_id`` label)
    path: str
    profile: TargetProfile | None
    threads: int
    read_bytes: int
    read_count: int
    write_bytes: int
    write_count: int
    file_size: int
    latency: LatencyStats | None
    iops: IopsSeries | None


@dataclass(slots=True)
class DiskspdResult:
    """One ``-Rxml`` document."""

    computer_name: str
    version: str
    version_date: str
    run_time: float | None  # RunTime (UTC), seconds since the epoch; None when empty
    profiles: list[TimeSpanProfile]
    spans: list[TimeSpanResult]
    leading_text_bytes: int = 0  # bytes before <Results> (captured warnings), skipped
    encoding: str = "utf-8"
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------
# bytes -> text

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode(data: bytes) -> tuple[str, str]:
    """The document's text and the encoding it was read in (see the module docstring)."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(name), name
            except UnicodeDecodeError as exc:
                raise DiskspdError(f"starts with a {name} byte order mark but is not {name}: {exc.reason}") from None
    if len(data) >= 2 and data[1] == 0 and data[0] != 0:
        name = "utf-16-le"
    elif len(data) >= 2 and data[0] == 0 and data[1] != 0:
        name = "utf-16-be"
    else:
        try:
            return data.decode("utf-8"), "utf-8"
        except UnicodeDecodeError:
            return data.decode("cp1252", errors="replace"), "cp1252"
    try:
        return data.decode(name), name
    except UnicodeDecodeError as exc:
        raise DiskspdError(f"looks like {name} (no byte order mark) but is not: {exc.reason}") from None


_FORBIDDEN = re.compile(r"<!(?:DOCTYPE|ENTITY)", re.IGNORECASE)
_DECLARATION = re.compile(r"<\?xml[^>]*\?>")
_RESULTS_START = re.compile(r"<Results[\s>/]")


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        encoding="utf-8",
    )


def parse_bytes(data: bytes, max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> DiskspdResult:
    """A DiskSPD ``-Rxml`` document from the file's bytes; :class:`DiskspdError` says why not."""
    if len(data) > max_bytes:
        raise TooLarge(f"{len(data)} bytes, above the bound of {max_bytes} (--diskspd.max-file-size)")
    if not data.strip(b" \t\r\n\x00"):
        raise Truncated("the file is empty (a copy not yet written, or DiskSPD killed before the end)")
    text, encoding = decode(data)
    forbidden = _FORBIDDEN.search(text)
    if forbidden:
        raise Forbidden(
            f"holds {forbidden.group(0)!r} at character {forbidden.start()}: DiskSPD never writes "
            "a DOCTYPE or entity declaration; refused unparsed"
        )
    start = _RESULTS_START.search(text)
    if start is None:
        if "<Results" in text[-16:] or "<Res" in text[-8:]:
            raise Truncated("the file ends inside the opening <Results> tag")
        raise NotDiskspd("no <Results> element: not a DiskSPD -Rxml result (a text result? run DiskSPD with -Rxml)")
    leading = text[: start.start()]
    leading = _DECLARATION.sub("", leading).strip()
    body = text[start.start() :]
    try:
        root = etree.fromstring(body.encode("utf-8"), _parser())
    except etree.XMLSyntaxError as exc:
        if "</Results>" not in body[-64:] and not body.rstrip().endswith("</Results>"):
            raise Truncated(f"the document ends before </Results> ({_syntax(exc)})") from None
        raise DiskspdError(f"not well-formed XML: {_syntax(exc)}") from None
    result = parse_tree(root)
    result.leading_text_bytes = len(leading.encode("utf-8"))
    result.encoding = encoding
    return result


def _syntax(exc: etree.XMLSyntaxError) -> str:
    msg = str(exc.msg if getattr(exc, "msg", None) else exc)
    return msg.splitlines()[0][:200] if msg else type(exc).__name__


# --------------------------------------------------------------------------------------------
# tree -> records (every number checked)


def _text(el: etree._Element | None) -> str:
    if el is None or el.text is None:
        return ""
    return el.text.strip()


#: Longest text a document may hold where a label comes from: a Windows path (32,767 UTF-16 units,
#: the long-path limit); a host name or tool version (a DNS name is at most 255). Longer is not
#: what DiskSPD wrote: the document is invalid (a 1 MB ComputerName or Path turned a 3 MB file
#: into a 50 MB /metrics answer). Shared with the other exporters in common/labels.py, which also
#: cuts every label value at 1,024 characters when it is exposed. (MAX_NAME_CHARS, MAX_PATH_CHARS)
#: Most characters all the distinct target paths of one document may add up to.
MAX_PATHS_CHARS = 65536


def _label_text(el: etree._Element | None, limit: int) -> str:
    text = _text(el)
    if len(text) > limit:
        assert el is not None
        raise InvalidValue(f"{_where(el)} is {len(text)} characters long (at most {limit}): {text[:40]!r}...")
    return text


def _where(el: etree._Element) -> str:
    parts = []
    node: etree._Element | None = el
    while node is not None and node.getparent() is not None:
        parent = node.getparent()
        assert parent is not None
        same = [c for c in parent if c.tag == node.tag]
        parts.append(f"{node.tag}[{same.index(node)}]" if len(same) > 1 else str(node.tag))
        node = parent
    return "/".join(reversed(parts)) or str(el.tag)


def _int_text(el: etree._Element | None, name: str, default: int | None = None, where: str = "") -> int | None:
    child = el.find(name) if el is not None else None
    if child is None or _text(child) == "":
        return default
    raw = _text(child)
    if not raw.isdigit():
        raise InvalidValue(f"{_where(child)} = {raw[:40]!r}: not a non-negative integer")
    value = int(raw)
    if value >= MAX_COUNT:
        raise InvalidValue(f"{_where(child)} = a {len(raw)}-digit number: beyond 2^64, more than DiskSPD can write")
    return value


def _req_int(el: etree._Element, name: str, default: int = 0) -> int:
    v = _int_text(el, name, default)
    return default if v is None else v


def _num_value(raw: str, el: etree._Element, attr: str | None = None) -> float:
    """A finite non-negative number below 2^64; the error names the element (computed only then)."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
        problem = "not a number"
    else:
        if math.isfinite(value) and 0 <= value < MAX_COUNT:
            return value
        problem = "not a finite number" if not math.isfinite(value) else "negative" if value < 0 else "beyond 2^64"
    if problem == "not a number" and raw.lower() in ("nan", "inf", "-inf", "infinity"):
        problem = "not a finite number"
    where = _where(el) + (f"@{attr}" if attr else "")
    raise InvalidValue(f"{where} = {raw[:40]!r}: {problem}")


def _num_text(el: etree._Element | None, name: str) -> float | None:
    child = el.find(name) if el is not None else None
    if child is None or _text(child) == "":
        return None
    return _num_value(_text(child), child)


def _num_attr(el: etree._Element, name: str) -> float | None:
    raw = el.get(name)
    if raw is None or raw.strip() == "":
        return None
    return _num_value(raw.strip(), el, name)


def _bool(el: etree._Element | None, name: str) -> bool:
    child = el.find(name) if el is not None else None
    return _text(child).lower() == "true"


def _percent(el: etree._Element, name: str) -> int | None:
    """A percentage option (``WriteRatio``, ``RandomRatio``): 0-100, as DiskSPD's parser enforces."""
    value = _int_text(el, name)
    if value is not None and value > 100:
        child = el.find(name)
        raise InvalidValue(f"{_where(child if child is not None else el)} = {value}: a percentage above 100")
    return value


def parse_target_profile(el: etree._Element) -> TargetProfile:
    wbc = el.find("WriteBufferContent")
    pattern = _text(wbc.find("Pattern")) if wbc is not None else ""
    rds = wbc.find("RandomDataSource") if wbc is not None else None
    thr = el.find("Throughput")
    return TargetProfile(
        path=_label_text(el.find("Path"), MAX_PATH_CHARS),
        block_size=_req_int(el, "BlockSize", 65536),
        base_file_offset=_req_int(el, "BaseFileOffset", 0),
        max_file_size=_req_int(el, "MaxFileSize", 0),
        file_size=_int_text(el, "FileSize"),
        sequential_scan_hint=_bool(el, "SequentialScan"),
        random_access_hint=_bool(el, "RandomAccess"),
        temporary_file_hint=_bool(el, "TemporaryFile"),
        # 2.0.17+ write DisableOSCache for -Su/-Sh; older ones DisableAllCache for -h/-Sh.
        disable_os_cache=_bool(el, "DisableOSCache") or _bool(el, "DisableAllCache"),
        disable_local_cache=_bool(el, "DisableLocalCache"),
        write_through=_bool(el, "WriteThrough") or _bool(el, "DisableAllCache"),
        memory_mapped_io=_bool(el, "MemoryMappedIo"),
        write_pattern=(pattern or "sequential").lower(),
        random_data_size=_int_text(rds, "SizeInBytes") if rds is not None else None,
        random_data_file=(_text(rds.find("FilePath")) or None) if rds is not None else None,
        random_alignment=_int_text(el, "Random"),
        random_ratio=_percent(el, "RandomRatio"),
        stride_size=_int_text(el, "StrideSize"),
        interlocked_sequential=_bool(el, "InterlockedSequential"),
        thread_stride=_req_int(el, "ThreadStride", 0),
        request_count=_req_int(el, "RequestCount", 2),
        write_ratio=_percent(el, "WriteRatio") or 0,
        threads_per_file=_req_int(el, "ThreadsPerFile", 1),
        throughput=_req_int(el, "Throughput", 0),
        throughput_unit="IOPS" if thr is not None and thr.get("unit") == "IOPS" else "bytes_per_ms",
    )


def parse_timespan_profile(el: etree._Element) -> TimeSpanProfile:
    targets = el.find("Targets")
    return TimeSpanProfile(
        duration_s=float(_req_int(el, "Duration", 10)),
        warmup_s=float(_req_int(el, "Warmup", 5)),
        cooldown_s=float(_req_int(el, "Cooldown", 0)),
        measure_latency=_bool(el, "MeasureLatency"),
        calculate_iops_stddev=_bool(el, "CalculateIopsStdDev"),
        io_bucket_duration_ms=_req_int(el, "IoBucketDuration", 1000),
        thread_count=_req_int(el, "ThreadCount", 0),
        request_count=_req_int(el, "RequestCount", 0),
        rand_seed=_req_int(el, "RandSeed", 0),
        targets=tuple(parse_target_profile(t) for t in (targets if targets is not None else []) if t.tag == "Target"),
    )


def _fast_bucket(a) -> IopsBucket | None:
    """The common case, a bucket as DiskSPD prints it, without a call per attribute; None sends
    anything unusual (a missing or odd value) to :func:`_checked_bucket`, which names the error."""
    try:
        sample = float(a["SampleMillisecond"])
        read = float(a["Read"])
        write = float(a["Write"])
        total = float(a["Total"])
        r_lat = a.get("ReadAvgLatencyMilliseconds")
        w_lat = a.get("WriteAvgLatencyMilliseconds")
        rl = float(r_lat) if r_lat is not None else 0.0
        wl = float(w_lat) if w_lat is not None else 0.0
    except (KeyError, ValueError):
        return None
    values = (sample, read, write, total, rl, wl)
    if not (0.0 <= min(values) and max(values) < MAX_COUNT):  # NaN fails both
        return None
    return IopsBucket(
        int(sample),
        read,
        write,
        total,
        read_latency_avg_ms=rl if r_lat is not None else None,
        write_latency_avg_ms=wl if w_lat is not None else None,
    )


def _checked_bucket(b: etree._Element) -> IopsBucket | None:
    sample = _num_attr(b, "SampleMillisecond")
    if sample is None:
        return None
    read = _num_attr(b, "Read") or 0.0
    write = _num_attr(b, "Write") or 0.0
    total = _num_attr(b, "Total")
    return IopsBucket(
        sample_ms=int(sample),
        read=read,
        write=write,
        total=read + write if total is None else total,
        read_latency_avg_ms=_num_attr(b, "ReadAvgLatencyMilliseconds"),
        write_latency_avg_ms=_num_attr(b, "WriteAvgLatencyMilliseconds"),
    )


def parse_iops(el: etree._Element | None) -> IopsSeries | None:
    if el is None:
        return None
    buckets = []
    for b in el.iter("Bucket"):
        bucket = _fast_bucket(b.attrib) or _checked_bucket(b)
        if bucket is not None:
            buckets.append(bucket)
    return IopsSeries(
        read_stddev=_num_text(el, "ReadIopsStdDev"),
        write_stddev=_num_text(el, "WriteIopsStdDev"),
        total_stddev=_num_text(el, "IopsStdDev"),
        buckets=tuple(buckets),
    )


def _latency_stats(el: etree._Element, names: tuple[str, str, str, str, str, str]) -> LatencyStats | None:
    values = [_num_text(el, n) for n in names]
    if all(v is None for v in values):
        return None
    return LatencyStats(*values)


#: The element names of a target's and of a time span's mean and stdev latencies, in
#: :class:`LatencyStats` order (read here, written the same by document.py).
TARGET_LATENCY = (
    "AverageReadLatencyMilliseconds",
    "ReadLatencyStdev",
    "AverageWriteLatencyMilliseconds",
    "WriteLatencyStdev",
    "AverageLatencyMilliseconds",
    "LatencyStdev",
)
SPAN_LATENCY = (
    "AverageReadMilliseconds",
    "ReadLatencyStdev",
    "AverageWriteMilliseconds",
    "WriteLatencyStdev",
    "AverageTotalMilliseconds",
    "LatencyStdev",
)


def parse_thread_target(el: etree._Element, thread_id: int, position: int) -> ThreadTarget:
    return ThreadTarget(
        thread_id=thread_id,
        position=position,
        path=_label_text(el.find("Path"), MAX_PATH_CHARS),
        bytes_count=_req_int(el, "BytesCount"),
        file_size=_req_int(el, "FileSize"),
        io_count=_req_int(el, "IOCount"),
        read_bytes=_req_int(el, "ReadBytes"),
        read_count=_req_int(el, "ReadCount"),
        write_bytes=_req_int(el, "WriteBytes"),
        write_count=_req_int(el, "WriteCount"),
        latency=_latency_stats(el, TARGET_LATENCY),
        iops=parse_iops(el.find("Iops")),
    )


def parse_timespan_result(el: etree._Element) -> TimeSpanResult:
    error = el.find("Error")
    if error is not None and el.find("TestTimeSeconds") is None:
        return TimeSpanResult(0.0, 0, 0, 0, None, (), None, None, (), error=_text(error) or "interrupted")
    cpu = None
    avg = el.find("CpuUtilization/Average")
    if avg is not None:
        cpu = CpuAverage(
            usage_percent=_num_text(avg, "UsagePercent") or 0.0,
            user_percent=_num_text(avg, "UserPercent") or 0.0,
            kernel_percent=_num_text(avg, "KernelPercent") or 0.0,
            idle_percent=_num_text(avg, "IdlePercent") or 0.0,
        )
    percentiles = []
    latency = None
    lat = el.find("Latency")
    if lat is not None:
        latency = _latency_stats(lat, SPAN_LATENCY)
        for b in lat.iter("Bucket"):
            p = _num_text(b, "Percentile")
            if p is None or p > 100:
                continue
            percentiles.append(
                LatencyPercentile(
                    percentile=p,
                    read_ms=_num_text(b, "ReadMilliseconds"),
                    write_ms=_num_text(b, "WriteMilliseconds"),
                    total_ms=_num_text(b, "TotalMilliseconds"),
                )
            )
    threads = []
    for n, th in enumerate(el.iterchildren("Thread")):
        tid = _int_text(th, "Id", n)
        for pos, t in enumerate(th.iterchildren("Target")):
            threads.append(parse_thread_target(t, n if tid is None else tid, pos))
    test_time = _num_text(el, "TestTimeSeconds")
    return TimeSpanResult(
        test_time_s=test_time or 0.0,
        thread_count=_req_int(el, "ThreadCount", len({t.thread_id for t in threads})),
        request_count=_req_int(el, "RequestCount", 0),
        proc_count=_req_int(el, "ProcCount", 0),
        cpu=cpu,
        latency_percentiles=tuple(percentiles),
        latency=latency,
        iops=parse_iops(el.find("Iops")),
        threads=tuple(threads),
    )


def parse_run_time(text: str) -> float | None:
    """DiskSPD's ``RunTime`` (``2019/03/25 08:38:12 UTC``) in seconds since the epoch."""
    text = text.strip()
    if not text:
        return None
    for fmt in ("%Y/%m/%d %H:%M:%S UTC", "%Y/%m/%d %H:%M:%S"):
        try:
            return float(timegm(strptime(text, fmt)))
        except ValueError:
            continue
    return None


def parse_tree(root: etree._Element) -> DiskspdResult:
    if root.tag != "Results":
        raise NotDiskspd(f"the root element is <{root.tag}>, not <Results>: not a DiskSPD -Rxml result")
    system = root.find("System")
    profile = root.find("Profile")
    if system is None and profile is None:
        raise NotDiskspd("<Results> without <System> or <Profile>: not a DiskSPD -Rxml result")
    notes = []
    run_time_text = _text(system.find("RunTime")) if system is not None else ""
    run_time = parse_run_time(run_time_text)
    if run_time_text and run_time is None:
        notes.append(f"RunTime {run_time_text[:40]!r} not understood")
    spans_el = profile.find("TimeSpans") if profile is not None else None
    profiles = [parse_timespan_profile(t) for t in (spans_el if spans_el is not None else []) if t.tag == "TimeSpan"]
    spans = [parse_timespan_result(t) for t in root.iterchildren("TimeSpan")]
    paths = sum(len(p) for p in {_text(el) for el in root.iter("Path")})
    if paths > MAX_PATHS_CHARS:
        raise InvalidValue(f"the target paths add up to {paths} characters (at most {MAX_PATHS_CHARS})")
    return DiskspdResult(
        computer_name=_label_text(system.find("ComputerName"), MAX_NAME_CHARS) if system is not None else "",
        version=_label_text(system.find("Tool/Version"), MAX_NAME_CHARS) if system is not None else "",
        version_date=_label_text(system.find("Tool/VersionDate"), MAX_NAME_CHARS) if system is not None else "",
        run_time=run_time,
        profiles=profiles,
        spans=spans,
        notes=notes,
    )


# --------------------------------------------------------------------------------------------
# threads -> targets


def _owners(profile: TimeSpanProfile, span: TimeSpanResult) -> dict[tuple[int, int], int]:
    """(thread id, position in its list) -> profile target index.

    With ``-t`` (``ThreadCount`` 0) DiskSPD starts ``ThreadsPerFile`` threads per target, target by
    target, each with that one target. With ``-F`` every thread runs every target in profile
    order. A thread/target whose path does not match its expected target (a document edited by
    hand, a version that orders otherwise) falls back to the first target with that path."""
    owners: dict[tuple[int, int], int] = {}
    expected: list[int] = []
    if profile.thread_count == 0:
        for i, t in enumerate(profile.targets):
            expected.extend([i] * max(t.threads_per_file, 1))
    thread_ids = sorted({t.thread_id for t in span.threads})
    order = {tid: n for n, tid in enumerate(thread_ids)}
    for tt in span.threads:
        if profile.thread_count == 0:
            n = order[tt.thread_id]
            idx = expected[n] if n < len(expected) else -1
        else:
            idx = tt.position if tt.position < len(profile.targets) else -1
        if idx < 0 or profile.targets[idx].path != tt.path:
            idx = next((i for i, t in enumerate(profile.targets) if t.path == tt.path), -1)
        owners[(tt.thread_id, tt.position)] = idx
    return owners


def _pooled(parts: list[tuple[int, float | None, float | None]]) -> tuple[float | None, float | None]:
    """Mean and standard deviation of the union of groups given as (count, mean, stdev)."""
    parts = [(n, m, s) for n, m, s in parts if n > 0 and m is not None]
    total = sum(n for n, _, _ in parts)
    if total == 0:
        return None, None
    mean = sum(n * m for n, m, _ in parts if m is not None) / total
    second = sum(n * ((s or 0.0) ** 2 + (m or 0.0) ** 2) for n, m, s in parts) / total
    return mean, math.sqrt(max(second - mean * mean, 0.0))


def _merge_iops(series: list[IopsSeries]) -> IopsSeries | None:
    if not series:
        return None
    if len(series) == 1:
        return series[0]
    by_ms: dict[int, list[float]] = {}
    for s in series:
        for b in s.buckets:
            # read, write, total IOPS; read and write latency x IOPS (for the IOPS-weighted mean)
            acc = by_ms.setdefault(b.sample_ms, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
            acc[0] += b.read
            acc[1] += b.write
            acc[2] += b.total
            if b.read_latency_avg_ms is not None:
                acc[3] += b.read_latency_avg_ms * b.read
                acc[4] += b.read
            if b.write_latency_avg_ms is not None:
                acc[5] += b.write_latency_avg_ms * b.write
                acc[6] += b.write
    buckets = tuple(
        IopsBucket(
            ms,
            r,
            w,
            t,
            read_latency_avg_ms=rl / rn if rn > 0 else None,
            write_latency_avg_ms=wl / wn if wn > 0 else None,
        )
        for ms, (r, w, t, rl, rn, wl, wn) in sorted(by_ms.items())
    )

    def stdev(values: list[float]) -> float | None:
        if not values:
            return None
        mean = sum(values) / len(values)
        return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))

    return IopsSeries(
        read_stddev=stdev([b.read for b in buckets]) if any(s.read_stddev is not None for s in series) else None,
        write_stddev=stdev([b.write for b in buckets]) if any(s.write_stddev is not None for s in series) else None,
        total_stddev=stdev([b.total for b in buckets]),
        buckets=buckets,
    )


def targets_of(profile: TimeSpanProfile | None, span: TimeSpanResult) -> list[TargetResult]:
    """The time span's results per profile target (threads summed; latency pooled weighted by
    I/O count; ``-D`` buckets of the threads added interval by interval, their standard deviation
    computed over the summed buckets as DiskSPD does for its overall ``<Iops>``). Thread targets
    that match no profile target are grouped by path with index -1 ... -n."""
    prof = profile or TimeSpanProfile(10, 5, 0, False, False, 1000, 0, 0, 0, ())
    owners = _owners(prof, span)
    groups: dict[tuple[int, str], list[ThreadTarget]] = {}
    for tt in span.threads:
        idx = owners[(tt.thread_id, tt.position)]
        groups.setdefault((idx, tt.path if idx < 0 else ""), []).append(tt)
    out = []
    unmatched = 0
    for (idx, path), tts in sorted(groups.items(), key=lambda kv: (kv[0][0] < 0, kv[0][0], kv[0][1])):
        if idx < 0:
            unmatched += 1
            index, tprof = -unmatched, None
        else:
            index, tprof = idx, prof.targets[idx]
        lat = None
        if any(t.latency is not None for t in tts):
            r = _pooled([(t.read_count, *_pair(t.latency, "read")) for t in tts])
            w = _pooled([(t.write_count, *_pair(t.latency, "write")) for t in tts])
            a = _pooled([(t.io_count, *_pair(t.latency, "total")) for t in tts])
            lat = LatencyStats(r[0], r[1], w[0], w[1], a[0], a[1])
        out.append(
            TargetResult(
                index=index,
                path=tts[0].path if idx < 0 else (tprof.path if tprof else path),
                profile=tprof,
                threads=len({t.thread_id for t in tts}),
                read_bytes=sum(t.read_bytes for t in tts),
                read_count=sum(t.read_count for t in tts),
                write_bytes=sum(t.write_bytes for t in tts),
                write_count=sum(t.write_count for t in tts),
                file_size=max(t.file_size for t in tts),
                latency=lat,
                iops=_merge_iops([t.iops for t in tts if t.iops is not None]),
            )
        )
    return out


def _pair(lat: LatencyStats | None, d: str) -> tuple[float | None, float | None]:
    if lat is None:
        return None, None
    return getattr(lat, f"{d}_avg_ms"), getattr(lat, f"{d}_stdev_ms")
