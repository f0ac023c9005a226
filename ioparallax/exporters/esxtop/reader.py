"""Reading esxtop batch CSVs as they grow, and vscsiStats outputs (the transport layer of the
esxtop exporter).

A :class:`Watcher` lists the watched paths at every poll (files named, and files matching the
pattern inside watched directories: common/watchdir.py) and sniffs each new file's first bytes:
``"(PDH-CSV 4.0)`` is an esxtop batch CSV, ``Histogram:`` a vscsiStats output.

An :class:`EsxtopFile` follows its file with the shared
:class:`~ioparallax.exporters.common.linetail.LineTailer` (only what was appended since the last
poll is read, in 1 MiB chunks; a file replaced, truncated or rewritten is read again from the
start), builds the header map once (:func:`~ioparallax.exporters.esxtop.parse.parse_header`) and
parses only the selected cells of each row. Every sample is integrated into counters, as the
vCenter exporter integrates its 20 s samples: a rate x the time since the previous sample (the
first sample of a file takes the second's interval), a mean latency x the operations it was the
mean of. The latest sample's values are kept as they are.

A :class:`VscsiFile` is read whole whenever it changes (it is rewritten, not appended to).

One file's trouble (unreadable, garbage, cut off) is marked on that file (``reason``) and never
reaches another's.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ioparallax.exporters.common.linetail import LineTailer
from ioparallax.exporters.common.watch import engine
from ioparallax.exporters.common.watchdir import display_name, open_regular, stat_key, watched_directory
from ioparallax.exporters.esxtop.parse import (
    HEADER_MARK,
    MAX_LINE_BYTES,
    HeaderMap,
    InvalidLine,
    parse_header,
    parse_timestamp,
    split_row,
)
from ioparallax.exporters.esxtop.vscsi import MAX_VSCSI_BYTES, Histogram, VscsiError, parse_vscsistats

log = logging.getLogger(__name__)

#: Why a file is down (``reason`` of ``esxtop_source_error_info``).
REASONS = ("unreadable", "not_esxtop", "bad_header", "too_large", "corrupt", "truncated", "internal_error")

#: Why a line was rejected (``reason`` of ``esxtop_source_rejected_lines_total``).
LINE_REASONS = (
    "before_header",
    "bad_header",
    "not_csv",
    "wrong_column_count",
    "bad_timestamp",
    "time_not_increasing",
    "too_long",
    "not_text",
)

#: Why a value cell was not used (``reason`` of ``esxtop_source_rejected_values_total``).
VALUE_REASONS = ("not_a_number", "invalid_value")

#: Bytes read per file and poll: a scrape reads at most this much of a backlog.
READ_BUDGET_BYTES = 32 * 1024 * 1024
#: Two samples further apart than this are two esxtop runs in one file (``>>``): the later one
#: is integrated over the interval seen before, not over the gap.
MAX_INTERVAL_S = 600.0

MB = 1048576.0

# -- integrated quantities per kind (indices into ObjectState.totals) ------------------------------
VDISK_TOTALS = ("commands", "read_ops", "write_ops", "read_bytes", "write_bytes", "read_latency_s", "write_latency_s")
STORAGE_TOTALS = (
    "commands",
    "read_ops",
    "write_ops",
    "read_bytes",
    "write_bytes",
    *(
        f"{layer}_{op}_latency_s"
        for layer in ("guest", "kernel", "driver", "queue")
        for op in ("command", "read", "write")
    ),
)
CPU_TOTALS = ("used_s", "run_s", "ready_s", "costop_s")
TOTALS = {
    "vdisk": VDISK_TOTALS,
    "device": STORAGE_TOTALS,
    "path": STORAGE_TOTALS,
    "adapter": STORAGE_TOTALS,
    "nfs_volume": STORAGE_TOTALS,
    "cpu": CPU_TOTALS,
}


@dataclass
class ObjectState:
    """One virtual disk, device, path, adapter, NFS volume or VM's CPU group, across rows."""

    kind: str
    key: tuple[str, ...]
    fields: tuple[str, ...]
    totals: list[float]
    uuid: str = ""
    gid: str = ""
    samples: int = 0
    latest: list[float | None] | None = None
    latest_ts: float | None = None
    present: set[int] = field(default_factory=set)  # fields a header of the file has a column for


def _integrate_vdisk(tot: list[float], v: list[float | None], dt: float) -> None:
    commands, reads, writes, read_mb, write_mb, read_ms, write_ms = v
    if commands is not None:
        tot[0] += commands * dt
    if reads is not None:
        tot[1] += reads * dt
        if read_ms is not None:
            tot[5] += read_ms * 0.001 * reads * dt
    if writes is not None:
        tot[2] += writes * dt
        if write_ms is not None:
            tot[6] += write_ms * 0.001 * writes * dt
    if read_mb is not None:
        tot[3] += read_mb * MB * dt
    if write_mb is not None:
        tot[4] += write_mb * MB * dt


def _integrate_storage(tot: list[float], v: list[float | None], dt: float) -> None:
    commands, reads, writes, read_mb, write_mb = v[0], v[1], v[2], v[3], v[4]
    if commands is not None:
        tot[0] += commands * dt
    if reads is not None:
        tot[1] += reads * dt
    if writes is not None:
        tot[2] += writes * dt
    if read_mb is not None:
        tot[3] += read_mb * MB * dt
    if write_mb is not None:
        tot[4] += write_mb * MB * dt
    # latencies: fields 5.. are (guest, kernel, driver, queue) x (command, read, write)
    ops = (commands, reads, writes)
    for i in range(12):
        ms = v[5 + i]
        n = ops[i % 3]
        if ms is not None and n is not None:
            tot[5 + i] += ms * 0.001 * n * dt


def _integrate_cpu(tot: list[float], v: list[float | None], dt: float) -> None:
    for i in range(4):
        pct = v[i]
        if pct is not None:
            tot[i] += pct * 0.01 * dt


INTEGRATE = {
    "vdisk": _integrate_vdisk,
    "device": _integrate_storage,
    "path": _integrate_storage,
    "adapter": _integrate_storage,
    "nfs_volume": _integrate_storage,
    "cpu": _integrate_cpu,
}


class EsxtopFile:
    """One esxtop batch CSV, followed as it grows."""

    kind = "esxtop"

    def __init__(self, path: str, within: str | None = None, clock: Callable[[], float] = time.time):
        self.path = path
        self.name = display_name(path)
        self.tailer = LineTailer(path, within, MAX_LINE_BYTES)
        self.clock = clock
        self.first_seen = clock()
        self.reason: str | None = None
        self.detail: str | None = None
        self.read_errors = 0
        self.resets = 0
        self.logged: set[str] = set()
        #: called with (file, sample time, object states) after each sample is read (backfill)
        self.on_sample: Callable[[EsxtopFile, float, list[ObjectState]], None] | None = None
        self._restart()

    def _restart(self) -> None:
        self.header: HeaderMap | None = None
        self.headers = 0
        self.host = ""
        self.objects: dict[tuple[str, tuple[str, ...]], ObjectState] = {}
        self._states: list[ObjectState] = []
        self._sel: list[tuple[int, int]] = []
        self.rows = 0
        self.rejected: dict[str, int] = dict.fromkeys(LINE_REASONS, 0)
        self.rejected_values: dict[str, int] = dict.fromkeys(VALUE_REASONS, 0)
        self.first_ts: float | None = None
        self.last_ts: float | None = None
        self.last_interval: float | None = None
        self.max_interval: float | None = None
        self.intervals = 0
        self.interval_sum = 0.0
        self.gaps = 0
        self._pending: list[list[float | None]] | None = None
        self.vms: dict[str, str] = {}  # vm -> uuid
        self.gids: dict[str, str] = {}  # gid -> vm
        self.last_growth = 0.0

    # ---- reading
    def poll(self, budget: int = READ_BUDGET_BYTES) -> None:
        try:
            for lines, reset in self.tailer.read_chunks(budget):
                if reset:
                    log.info("esxtop file %s %s: reading it again from the start", self.name, reset)
                    self.resets += 1
                    self._restart()
                    if self.reason not in (None, "unreadable"):
                        self._up()
                if self.reason == "unreadable":
                    self._up()
                self._lines(lines)
        except OSError as exc:
            self.read_errors += 1
            self._down("unreadable", exc.strerror or str(exc))
            return
        if self.reason == "unreadable":
            self._up()
        if too_long := self.tailer.take_too_long():
            self._reject("too_long", self.tailer.too_long_detail, too_long)
        if self.tailer.mtime is not None:
            self.last_growth = self.tailer.mtime
        if self.header is None and self.reason is None and self.rejected["bad_header"]:
            self._down("bad_header", "its '(PDH-CSV 4.0)' header line cannot be read")

    def finish(self) -> None:
        """End of input (convert, backfill): an unterminated last line is a cut-off file."""
        rest = self.tailer.take_partial()
        if rest.strip():
            self._down("truncated", f"its last line is cut off after {len(rest)} bytes")

    def _down(self, reason: str, detail: str) -> None:
        if (reason, detail) != (self.reason, self.detail):
            log.warning("esxtop file %s is down (%s): %s", self.name, reason, detail)
        self.reason, self.detail = reason, detail

    def _up(self) -> None:
        if self.reason is not None:
            log.info("esxtop file %s is up again (was down: %s)", self.name, self.reason)
        self.reason = self.detail = None

    def _reject(self, reason: str, detail: str, lines: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + lines
        if reason not in self.logged:  # once per file and reason: garbage must not flood the log
            self.logged.add(reason)
            log.warning("esxtop file %s: line rejected (%s): %s", self.name, reason, detail)

    def _lines(self, lines: list[bytes]) -> None:
        for line in lines:
            if not line:
                continue
            if line.startswith(HEADER_MARK):
                self._header(line)
                continue
            if self.header is None:
                self._reject("before_header", "a row before the '(PDH-CSV 4.0)' header line")
                continue
            try:
                self._row(line)
            except InvalidLine as exc:
                self._reject(exc.reason, str(exc))

    def _header(self, line: bytes) -> None:
        try:
            hm = parse_header(line)
        except InvalidLine as exc:
            self._reject(exc.reason, str(exc))
            return
        if self.header is not None:
            log.info(
                "esxtop file %s: a new header line (%d columns, was %d): esxtop restarted into the same file",
                self.name,
                hm.columns,
                self.header.columns,
            )
        self.header = hm
        self.headers += 1
        self.host = hm.host or self.host
        self.vms.update(hm.vms)
        self._states = []
        for t in hm.targets:
            st = self.objects.get((t.kind, t.key))
            if st is None:
                st = self.objects[(t.kind, t.key)] = ObjectState(
                    t.kind, t.key, t.fields, [0.0] * len(TOTALS[t.kind]), uuid=t.uuid, gid=t.gid
                )
            st.present |= t.present
            self._states.append(st)
            if t.kind == "cpu":
                self.gids[t.gid] = t.key[0]
        self._sel = [(t, f) for _, t, f in hm.selected]
        self._pending = None  # a sample of the old layout waiting for its interval is dropped

    def _row(self, line: bytes) -> None:
        hm = self.header
        assert hm is not None
        if b"\x00" in line:
            raise InvalidLine("not_text", "a line with NUL bytes")
        cells = split_row(line)
        if len(cells) != hm.columns:
            raise InvalidLine(
                "wrong_column_count", f"{len(cells)} cells, the header has {hm.columns} (a cut-off or foreign row)"
            )
        ts = parse_timestamp(cells[0], hm.bias_minutes)
        if self.last_ts is not None and ts <= self.last_ts:
            raise InvalidLine("time_not_increasing", f"a sample at {ts:.0f} after one at {self.last_ts:.0f}")
        cur: list[list[float | None]] = [[None] * len(st.fields) for st in self._states]
        bad_number = bad_value = 0
        for (t, f), cell in zip(self._sel, hm.pick(cells)):
            if cell:
                try:
                    v = float(cell)
                except ValueError:
                    bad_number += 1
                    continue
                if 0.0 <= v < 1e300:  # false for NaN, infinities and negative values
                    cur[t][f] = v
                else:
                    bad_value += 1
        if bad_number:
            self.rejected_values["not_a_number"] += bad_number
            if "not_a_number" not in self.logged:
                self.logged.add("not_a_number")
                log.warning("esxtop file %s: a value that is not a number was skipped", self.name)
        if bad_value:
            self.rejected_values["invalid_value"] += bad_value
            if "invalid_value" not in self.logged:
                self.logged.add("invalid_value")
                log.warning("esxtop file %s: a negative, NaN or infinite value was skipped", self.name)
        self.rows += 1
        prev, self.last_ts = self.last_ts, ts
        if self.first_ts is None:
            self.first_ts = ts
        for st, values in zip(self._states, cur):
            st.latest, st.latest_ts = values, ts
        if self.on_sample is not None:
            self.on_sample(self, ts, self._states)
        if prev is None:
            self._pending = cur  # integrated with the next sample's interval
            return
        dt = ts - prev
        if dt > MAX_INTERVAL_S:
            self.gaps += 1
            if self.last_interval is None:
                return  # a second run after a gap, and no interval known yet: not integrated
            dt = self.last_interval
        else:
            self.intervals += 1
            self.interval_sum += dt
            self.last_interval = dt
            self.max_interval = dt if self.max_interval is None else max(self.max_interval, dt)
        if self._pending is not None:
            self._integrate(self._pending, dt)
            self._pending = None
        self._integrate(cur, dt)

    def _integrate(self, cur: list[list[float | None]], dt: float) -> None:
        for st, values in zip(self._states, cur):
            INTEGRATE[st.kind](st.totals, values, dt)
            st.samples += 1

    # ---- for the collector
    @property
    def up(self) -> bool:
        return self.reason is None

    @property
    def mean_interval(self) -> float | None:
        return self.interval_sum / self.intervals if self.intervals else None

    @property
    def pending(self) -> bool:
        """A backlog remains to be read (convert reads until there is none)."""
        return self.reason is None and self.tailer.offset < self.tailer.size


class VscsiFile:
    """One vscsiStats output, read whole whenever it changes."""

    kind = "vscsi"

    def __init__(self, path: str, within: str | None = None, clock: Callable[[], float] = time.time):
        self.path = path
        self.name = display_name(path)
        self.within = within
        self.first_seen = clock()
        self.histograms: list[Histogram] = []
        self.skipped: list[str] = []
        self.reason: str | None = None
        self.detail: str | None = None
        self.read_errors = 0
        self.parses = 0
        self.last_growth = 0.0
        self._seen: tuple[int, int, int, int] | None = None
        self.pending = False

    def poll(self) -> None:
        try:
            st = os.stat(self.path)
            seen = stat_key(st)
            if seen == self._seen:
                return
            self.last_growth = st.st_mtime
            if st.st_size > MAX_VSCSI_BYTES:
                self._seen = seen
                self._down("too_large", f"{st.st_size} bytes, above {MAX_VSCSI_BYTES}")
                self.histograms = []
                return
            with open_regular(self.path, self.within) as fh:
                data = fh.read(MAX_VSCSI_BYTES + 1)
        except OSError as exc:
            self.read_errors += 1
            self._seen = None
            self._down("unreadable", exc.strerror or str(exc))
            return
        self._seen = seen
        self.parses += 1
        if b"\x00" in data:
            self.histograms = []
            self._down("corrupt", "NUL bytes: not vscsiStats text output")
            return
        try:
            self.histograms, self.skipped = parse_vscsistats(data.decode("utf-8", "replace"))
        except VscsiError as exc:
            self.histograms = []
            self._down("corrupt", str(exc))
            return
        if self.reason is not None:
            log.info("vscsiStats file %s is up again (was down: %s)", self.name, self.reason)
        self.reason = self.detail = None

    def finish(self) -> None:
        pass

    def _down(self, reason: str, detail: str) -> None:
        if (reason, detail) != (self.reason, self.detail):
            log.warning("vscsiStats file %s is down (%s): %s", self.name, reason, detail)
        self.reason, self.detail = reason, detail

    @property
    def up(self) -> bool:
        return self.reason is None


class UnknownFile:
    """A watched file that is neither (yet): empty files wait, others are down."""

    kind = "unknown"

    def __init__(self, path: str, reason: str | None, detail: str | None, clock: Callable[[], float] = time.time):
        self.path = path
        self.name = display_name(path)
        self.reason, self.detail = reason, detail
        self.first_seen = clock()
        self.last_growth = 0.0
        self.read_errors = 0
        self.pending = False
        self.seen: tuple[int, int, int, int] | None = None  # the file as sniffed (dev, ino, size, mtime_ns)

    @property
    def up(self) -> bool:
        return self.reason is None


def _identity(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stat_key(st)


Source = EsxtopFile | VscsiFile | UnknownFile


def sniff(path: str, within: str | None) -> tuple[str | None, str]:
    """("esxtop" | "vscsi" | None, detail): what the file's first bytes say it is; None with
    detail "" for a file still empty."""
    with open_regular(path, within) as fh:
        head = fh.read(4096)
    stripped = head.lstrip(b"\xef\xbb\xbf \r\n\t")
    if not stripped or HEADER_MARK.startswith(stripped) or b"Histogram:".startswith(stripped):
        return None, ""  # empty, or its first bytes still being written
    if stripped.startswith(HEADER_MARK):
        return "esxtop", ""
    if stripped.startswith(b"Histogram:"):
        return "vscsi", ""
    return None, "neither an esxtop batch CSV ('\"(PDH-CSV 4.0)' first) nor vscsiStats output ('Histogram:' first)"


@dataclass
class WatchConfig:
    paths: list[str]
    pattern: str = "*.csv"
    retention_s: float = 15 * 60.0
    idle_s: float = 30.0
    finished: bool = False  # convert, backfill: every file is a finished capture


@dataclass
class Snapshot:
    source: Source
    finished: bool
    visible: bool


class Watcher(engine.Watcher[Source]):
    """Every esxtop and vscsiStats file under the watched paths, on the shared watch engine
    (finding, isolation, retention); thread-safe.

    Differs from the other watch exporters on purpose: a file is sniffed before it has a kind
    (esxtop batch CSV, vscsiStats output, or foreign, sniffed again when it changes), and each
    kind keeps its own health (``reason``/``detail`` on the file's own object, logged there)."""

    def __init__(
        self,
        config: WatchConfig,
        clock: Callable[[], float] = time.time,
        on_sample: Callable[[EsxtopFile, float, list[ObjectState]], None] | None = None,
    ):
        super().__init__(config, clock)
        #: given to every esxtop file found (backfill)
        self.on_sample = on_sample
        self._budget = READ_BUDGET_BYTES

    @property
    def files(self) -> dict[str, Source]:
        return self.sources

    def poll(self, budget: int = READ_BUDGET_BYTES) -> None:
        with self.lock:
            self._budget = budget
            super().poll()

    def open_source(self, path: str, old: Source | None) -> Source | None:
        if old is None or (
            # empty so far, or changed since it was found foreign: sniffed again
            isinstance(old, UnknownFile) and (old.reason is None or old.seen != _identity(path))
        ):
            return self._open(path, watched_directory(path, self.config.paths), old)
        return old

    def read(self, src: Source) -> None:
        if isinstance(src, EsxtopFile):
            src.poll(self._budget)
        elif isinstance(src, VscsiFile):
            src.poll()

    def internal_error(self, src: Source, detail: str) -> None:
        src.reason, src.detail = "internal_error", detail

    def ended(self, src: Source, now: float) -> bool:
        return self.config.finished or super().ended(src, now)

    def _open(self, path: str, within: str | None, old: Source | None) -> Source | None:
        try:
            kind, detail = sniff(path, within)
        except OSError as exc:
            src: Source = UnknownFile(path, "unreadable", exc.strerror or str(exc), self.clock)
            log.warning("cannot read %s: %s", src.name, src.detail)
            self.files[path] = src
            return None
        if kind == "esxtop":
            src = EsxtopFile(path, within, self.clock)
            src.on_sample = self.on_sample
            log.info("reading esxtop batch CSV %s", src.name)
        elif kind == "vscsi":
            src = VscsiFile(path, within, self.clock)
            log.info("reading vscsiStats output %s", src.name)
        else:
            src = UnknownFile(path, "not_esxtop" if detail else None, detail or None, self.clock)
            src.seen = _identity(path)
            if detail and not (isinstance(old, UnknownFile) and old.reason == "not_esxtop"):
                log.warning("%s is down (not_esxtop): %s", src.name, detail)
        if old is not None:
            src.first_seen = old.first_seen
        self.files[path] = src
        return src

    def finish_source(self, src: Source) -> None:
        if isinstance(src, EsxtopFile):
            src.finish()

    def read_all(self) -> None:
        """Read every file to its end (convert, backfill)."""
        with self.lock:
            while True:
                self.poll()
                if not any(src.pending for src in self.files.values()):
                    break
            self.finish()

    def vm_names(self) -> dict[str, str]:
        """worldGroupID -> VM name, from the ``Group Cpu(<gid>:<vm>)`` columns of the esxtop files
        (vscsiStats names a VM only by its worldGroupID)."""
        out: dict[str, str] = {}
        for src in self.files.values():
            if isinstance(src, EsxtopFile):
                out.update(src.gids)
        return out

    def snapshot(self) -> list[Snapshot]:  # type: ignore[override]
        return [Snapshot(src, ended, visible) for src, ended, visible in super().snapshot()]
