"""Incremental reading of vdbench output directories (the transport layer of the vdbench exporter).

A :class:`~ioparallax.exporters.common.linetail.LineTailer` follows one file line by line (the
partial last line waits: vdbench may be half-way through writing it); a line above
``MAX_LINE_BYTES`` is garbage: skipped to the next newline and counted.

A :class:`DirectoryState` is one output directory: the flatfile's runs, the host reports'
runs, the parmfile as run and an HCIBench-style summary, each file read in isolation: a file that
cannot be read, or holds garbage, is marked (``reason`` per file) without hiding the others, and
one directory's trouble never reaches another's.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ioparallax.exporters.common.linetail import MAX_READ_BYTES, LineTailer  # noqa: F401 (MAX_READ_BYTES: the budget a poll reads)
from ioparallax.exporters.common.watch import engine
from ioparallax.exporters.common.watchdir import open_regular, stat_key
from ioparallax.exporters.vdbench.parse import (
    MAX_LINE_BYTES,
    FlatfileParser,
    FlatRow,
    InvalidLine,
    Parmfile,
    SummaryTableParser,
    find_normal_percentile,
    parse_parmfile,
    sniff_host_report,
)

log = logging.getLogger(__name__)

#: Seconds one poll (one scrape) spends reading new lines, over every file: a backlog (a 200 MB
#: flatfile found at start-up) is read over several scrapes, each answered within its timeout
#: (~3.5 s per 64 MiB on a loaded 2-core machine, bench/vdbench_read.py). At least one chunk of
#: every file is read per poll, so each makes progress.
READ_SECONDS_PER_POLL = 2.0
#: Runs kept per file, the newest: each is ~40 series (docs/vdbench.md, Series budget), and a
#: file whose every row starts a run (a row repeated with the same interval number) made one per
#: row: 660,000 runs and 1.4 GB for a 200 MB flatfile. Real loops (forxfersize x forthreads x
#: forrdpct) give tens to a few hundred. Older runs are dropped and counted
#: (vdbench_source_runs_dropped_total).
MAX_RUNS_PER_FILE = 1024
#: parmfile.html and HCIBench summaries larger than this are not read (reason too_large).
MAX_SMALL_FILE_BYTES = 4 * 1024 * 1024
#: A flatfile with this much content and no vdbench column header is not a vdbench flatfile.
HEADER_WITHIN_BYTES = 256 * 1024

FLATFILE = "flatfile.html"
PARMFILE = "parmfile.html"

#: Files of an output directory that are never host reports (others are sniffed: a host report
#: is named after its hd= name, which may hold dots).
NOT_HOST_REPORTS = (FLATFILE, PARMFILE, "summary.html", "totals.html", "logfile.html", "errorlog.html", "parmscan.html")
NOT_HOST_SUFFIXES = (".histogram.html", ".var_adm_msgs.html", ".stdout.html")

#: Why a file is down (``reason`` of ``vdbench_source_error_info``).
REASONS = ("unreadable", "not_vdbench", "too_large", "truncated", "internal_error")

#: Why a line was rejected (``reason`` of ``vdbench_source_rejected_lines_total``).
LINE_REASONS = (
    "not_a_number",
    "invalid_value",
    "wrong_column_count",
    "before_header",
    "bad_header",
    "too_long",
    "not_text",
)

#: vdbench's default reporting interval (seconds) when neither the parmfile nor the rows say.
DEFAULT_INTERVAL_S = 1.0


@dataclass
class RunState:
    """One run (an ``rd=`` of the flatfile, or of a host report) integrated from its rows."""

    name: str
    seq: int  # 1-based position of the run in its file (rd names repeat with for-loops)
    host: str = ""  # "" for the flatfile (all hosts), else the host report's host
    interval_s: float | None = None  # the rd's interval= from the parmfile
    rows: int = 0
    last_interval: int = 0
    latest: FlatRow | None = None
    first: FlatRow | None = None
    summary: FlatRow | None = None
    last_tod: float | None = None
    read_ops: float = 0.0
    write_ops: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    read_resp_s: float = 0.0
    write_resp_s: float = 0.0
    read_resp_known: bool = True  # every row with reads gave a read response time
    write_resp_known: bool = True
    seconds: float = 0.0
    unsplit_rows: int = 0  # rows without read%: not integrated

    @property
    def finished(self) -> bool:
        return self.summary is not None

    def add(self, row: FlatRow) -> None:
        """Integrate an interval row: ops = rate x interval seconds, bytes = MB/sec x 2^20 x
        seconds, response sums = mean response x ops (so that rate ratios give means)."""
        tod = row.tod_s
        dt = self.interval_s
        if dt is None and tod is not None and self.last_tod is not None:
            diff = (tod - self.last_tod) % 86400.0  # a run across midnight
            dt = diff if 0 < diff <= 3600 else None
        if dt is None:
            dt = DEFAULT_INTERVAL_S
        self.last_tod = tod
        self.rows += 1
        self.last_interval = row.interval or self.last_interval
        self.first = self.first or row
        self.latest = row
        v = row.values
        rate = v.get("rate")
        pct = v.get("read%")
        if rate is None or pct is None:
            self.unsplit_rows += 1
            return
        rp = min(max(pct / 100.0, 0.0), 1.0)
        ops = rate * dt
        mb = v.get("mb/sec")
        if mb is not None:
            nbytes = mb * 1048576.0 * dt
        else:
            bpi = v.get("bytes/io")
            nbytes = ops * bpi if bpi is not None else 0.0
        r_ops, w_ops = ops * rp, ops * (1.0 - rp)
        self.seconds += dt
        self.read_ops += r_ops
        self.write_ops += w_ops
        self.read_bytes += nbytes * rp
        self.write_bytes += nbytes * (1.0 - rp)
        resp = v.get("resp")
        r_resp = v.get("read_resp", resp if rp == 1.0 else None)
        w_resp = v.get("write_resp", resp if rp == 0.0 else None)
        if r_ops > 0:
            if r_resp is None:
                self.read_resp_known = False
            else:
                self.read_resp_s += r_resp / 1000.0 * r_ops
        if w_ops > 0:
            if w_resp is None:
                self.write_resp_known = False
            else:
                self.write_resp_s += w_resp / 1000.0 * w_ops


@dataclass
class FileState:
    """One tailed file of a directory (the flatfile or a host report)."""

    name: str
    tailer: LineTailer
    parser: FlatfileParser | SummaryTableParser
    host: str = ""
    runs: list[RunState] = field(default_factory=list)  # the newest MAX_RUNS_PER_FILE
    rows: int = 0
    runs_seen: int = 0  # runs started since the file was (re)read from the start
    runs_dropped: int = 0  # the oldest runs forgotten to keep MAX_RUNS_PER_FILE (never reset: a counter)
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LINE_REASONS, 0))
    resets: int = 0
    read_errors: int = 0
    reason: str | None = None
    detail: str | None = None
    logged: set[str] = field(default_factory=set)  # line reasons already logged for this file


@dataclass
class SmallFile:
    """A file read whole when it changes (parmfile.html, an HCIBench summary)."""

    seen: tuple[int, int, int, int] | None = None
    reason: str | None = None
    detail: str | None = None


class DirectoryState:
    """Everything the exporter knows about one vdbench output directory."""

    def __init__(self, path: str, within: str | None = None):
        self.path = path
        #: the watched directory this output directory was found under: its files are read only
        #: if they lie inside it (a symbolic link leading out is refused, watchdir.open_regular);
        #: None when the watched path named a flatfile itself
        self.within = within
        self.files: dict[str, FileState] = {}
        self.parmfile: Parmfile | None = None
        self.parm_file = SmallFile()
        self.normal_p95_ms: float | None = None
        self.normal_p95_file: str | None = None
        self._report_files: dict[str, SmallFile] = {}
        self._sniffed: dict[str, tuple[tuple[int, int, int], str | None]] = {}
        self._refused: set[str] = set()  # files not sniffed as host reports: links leading out, logged once
        self.last_growth = 0.0
        self.first_seen = 0.0  # when the watcher found the directory (its clock)
        #: (reason, detail) while the directory itself cannot be read: its data is hidden
        self.error: tuple[str, str] | None = None
        self.read_errors = 0

    # ---- discovery of the files of the directory
    def _host_reports(self, names: list[str]) -> dict[str, str]:
        """name -> host of the host summary reports (``hd1.html``...), found by their first line
        ("Host summary report(s) for host=hd1"), cached per file identity."""
        out = {}
        for name in names:
            if not name.endswith(".html") or name in NOT_HOST_REPORTS or name.endswith(NOT_HOST_SUFFIXES):
                continue
            full = os.path.join(self.path, name)
            try:
                st = os.stat(full)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino, min(st.st_size, 512))
            cached = self._sniffed.get(name)
            if cached is None or cached[0] != key:
                try:
                    with open_regular(full, self.within) as fh:
                        head = fh.read(512).decode("utf-8", "replace")
                except OSError as exc:
                    if exc.errno == errno.EPERM and name not in self._refused:  # a link leading out
                        self._refused.add(name)
                        log.warning("vdbench file %s is not read: %s", full, exc.strerror)
                    continue
                cached = self._sniffed[name] = (key, sniff_host_report(head))
            if cached[1] is not None:
                out[name] = cached[1]
        return out

    def poll(self, deadline: float | None = None) -> None:
        """Read what the directory's files gained, until ``deadline`` (time.monotonic(); at least
        one chunk per file) or the tailer's most bytes per read (common/linetail.py); the rest on the next poll."""
        names = sorted(os.listdir(self.path))
        self._read_parmfile(PARMFILE in names)
        wanted: dict[str, str] = {}
        if FLATFILE in names:
            wanted[FLATFILE] = ""
        wanted.update(self._host_reports(names))
        for gone in set(self.files) - set(wanted):
            log.info("vdbench file is gone, forgetting it: %s", os.path.join(self.path, gone))
            del self.files[gone]
        for name, host in wanted.items():
            fs = self.files.get(name)
            if fs is None:
                parser: FlatfileParser | SummaryTableParser = (
                    FlatfileParser() if name == FLATFILE else SummaryTableParser(host=host)
                )
                fs = self.files[name] = FileState(
                    name=name,
                    tailer=LineTailer(os.path.join(self.path, name), self.within, MAX_LINE_BYTES),
                    parser=parser,
                    host=host,
                )
            try:
                self._read(fs, deadline)
            except Exception as exc:  # a bug costs this file only
                log.exception("reading vdbench file %s failed", fs.tailer.path)
                self._down(fs, "internal_error", f"{type(exc).__name__}: {exc}")
        self._read_normal_percentile(names)

    def _down(self, fs: FileState, reason: str, detail: str) -> None:
        if (reason, detail) != (fs.reason, fs.detail):
            log.warning("vdbench file %s is down (%s): %s", fs.tailer.path, reason, detail)
        fs.reason, fs.detail = reason, detail

    def _up(self, fs: FileState) -> None:
        if fs.reason is not None:
            log.info("vdbench file %s is up again (was down: %s)", fs.tailer.path, fs.reason)
        fs.reason = fs.detail = None

    def _read(self, fs: FileState, deadline: float | None = None) -> None:
        try:
            for lines, reset in fs.tailer.read_chunks():
                if fs.reason == "unreadable":
                    self._up(fs)
                if reset:
                    log.info("vdbench file %s %s: reading it again from the start", fs.tailer.path, reset)
                    fs.resets += 1
                    fs.runs = []
                    fs.runs_seen = 0
                    fs.parser = FlatfileParser() if fs.name == FLATFILE else SummaryTableParser(host=fs.host)
                    if fs.reason not in (None, "unreadable"):
                        self._up(fs)
                self._lines(fs, lines)
                if deadline is not None and time.monotonic() > deadline:
                    break  # the rest on the next poll (the tailer keeps its offset and partial line)
        except OSError as exc:
            fs.read_errors += 1
            self._down(fs, "unreadable", exc.strerror or str(exc))
            return
        if fs.reason == "unreadable":
            self._up(fs)
        if too_long := fs.tailer.take_too_long():
            self._reject(fs, "too_long", fs.tailer.too_long_detail, too_long)
        if fs.tailer.mtime is not None:
            self.last_growth = max(self.last_growth, fs.tailer.mtime)
        if (
            isinstance(fs.parser, FlatfileParser)
            and fs.parser.header is None
            and fs.tailer.offset > HEADER_WITHIN_BYTES
        ):
            self._down(fs, "not_vdbench", f"no vdbench column header in its first {HEADER_WITHIN_BYTES} bytes")

    def _reject(self, fs: FileState, reason: str, detail: str, lines: int = 1) -> None:
        fs.rejected[reason] = fs.rejected.get(reason, 0) + lines
        if reason not in fs.logged:  # once per file and reason: garbage must not flood the log
            fs.logged.add(reason)
            log.warning("vdbench file %s: line rejected (%s): %s", fs.tailer.path, reason, detail)

    def _lines(self, fs: FileState, lines: list[bytes]) -> None:
        for raw in lines:
            if b"\x00" in raw:
                self._reject(fs, "not_text", "a line with NUL bytes")
                continue
            line = raw.decode("utf-8", "replace")
            try:
                row = fs.parser.feed(line)
            except InvalidLine as exc:
                self._reject(fs, exc.reason, str(exc))
                continue
            if row is not None:
                fs.rows += 1
                self._row(fs, row)

    def _row(self, fs: FileState, row: FlatRow) -> None:
        cur = fs.runs[-1] if fs.runs else None
        if row.summary is not None:
            if cur is None or cur.name != row.run or cur.finished:
                cur = self._new_run(fs, row.run)
            cur.summary = row
            return
        if (
            cur is None
            or cur.name != row.run
            or cur.finished
            or (row.interval is not None and row.interval <= cur.last_interval)
        ):
            cur = self._new_run(fs, row.run)
        cur.add(row)

    def _new_run(self, fs: FileState, name: str) -> RunState:
        interval_s = None
        if self.parmfile is not None:
            raw = self.parmfile.rd.get(name, {}).get("interval")
            try:
                interval_s = float(raw) if raw else None
            except ValueError:
                interval_s = None
            if interval_s is not None and not 0 < interval_s <= 86400:
                interval_s = None
        fs.runs_seen += 1
        run = RunState(name=name, seq=fs.runs_seen, host=fs.host, interval_s=interval_s)
        fs.runs.append(run)
        if len(fs.runs) > MAX_RUNS_PER_FILE:
            del fs.runs[0]
            fs.runs_dropped += 1
            if fs.runs_dropped == 1:
                log.warning(
                    "vdbench file %s has more than %d runs: only the newest %d are kept "
                    "(vdbench_source_runs_dropped_total counts the others)",
                    fs.tailer.path,
                    MAX_RUNS_PER_FILE,
                    MAX_RUNS_PER_FILE,
                )
        return run

    def _read_small(self, path: str, state: SmallFile) -> str | None:
        """The text of a small file when it changed since the last read, else None."""
        try:
            st = os.stat(path)
            seen = stat_key(st)
            if seen == state.seen:
                return None
            if st.st_size > MAX_SMALL_FILE_BYTES:
                state.seen = seen
                if state.reason != "too_large":
                    log.warning(
                        "vdbench file %s is down (too_large): %d bytes, above %d",
                        path,
                        st.st_size,
                        MAX_SMALL_FILE_BYTES,
                    )
                state.reason, state.detail = "too_large", f"{st.st_size} bytes, above {MAX_SMALL_FILE_BYTES}"
                return ""
            with open_regular(path, self.within) as fh:
                data = fh.read(MAX_SMALL_FILE_BYTES + 1)
        except OSError as exc:
            if state.reason != "unreadable":
                log.warning("vdbench file %s is down (unreadable): %s", path, exc.strerror or exc)
            state.reason, state.detail, state.seen = "unreadable", exc.strerror or str(exc), None
            return ""
        if state.reason is not None:
            log.info("vdbench file %s is up again (was down: %s)", path, state.reason)
        state.seen, state.reason, state.detail = seen, None, None
        return data.decode("utf-8", "replace")

    def _read_parmfile(self, present: bool) -> None:
        if not present:
            self.parmfile = None
            self.parm_file = SmallFile()
            return
        text = self._read_small(os.path.join(self.path, PARMFILE), self.parm_file)
        if text is None:
            return
        self.parmfile = parse_parmfile(text) if self.parm_file.reason is None else None

    def _read_normal_percentile(self, names: list[str]) -> None:
        """An HCIBench-style summary (``*.txt`` in the directory) stating a '95%tile' latency."""
        found: tuple[str, float] | None = None
        for name in names:
            if not name.endswith(".txt"):
                continue
            state = self._report_files.setdefault(name, SmallFile())
            text = self._read_small(os.path.join(self.path, name), state)
            if text is None:
                if self.normal_p95_file == name and self.normal_p95_ms is not None:
                    found = (name, self.normal_p95_ms)
                continue
            p95 = find_normal_percentile(text) if text else None
            if p95 is not None:
                found = (name, p95)
        self._report_files = {k: v for k, v in self._report_files.items() if k in names}
        self.normal_p95_file, self.normal_p95_ms = found if found else (None, None)

    # ---- for the collector
    @property
    def small_file_errors(self) -> list[tuple[str, str, str]]:
        """(file, reason, detail) of the whole-read files that are down."""
        out = []
        if self.parm_file.reason is not None:
            out.append((PARMFILE, self.parm_file.reason, self.parm_file.detail or ""))
        for name, st in sorted(self._report_files.items()):
            if st.reason is not None:
                out.append((name, st.reason, st.detail or ""))
        return out

    @property
    def up(self) -> bool:
        return (
            self.error is None and all(fs.reason is None for fs in self.files.values()) and not self.small_file_errors
        )

    def finish(self) -> None:
        """End of input (convert): an unterminated last line is a truncated file."""
        for fs in self.files.values():
            rest = fs.tailer.take_partial()
            if rest.strip():
                try:
                    row = fs.parser.feed(rest.decode("utf-8", "replace"))
                except InvalidLine as exc:
                    self._down(fs, "truncated", f"its last line is cut off ({exc})")
                    continue
                if row is not None:
                    fs.rows += 1
                    self._row(fs, row)


@dataclass
class WatchConfig:
    paths: list[str]
    retention_s: float = 15 * 60.0
    idle_s: float = 30.0
    max_depth: int = 2  # output directories looked for this deep under a watched directory


def find_output_dirs(path: str, max_depth: int) -> list[str]:
    """The vdbench output directories at or under ``path`` (a directory holding flatfile.html
    or parmfile.html; a path naming a flatfile means its directory)."""
    if os.path.isfile(path):
        return [os.path.dirname(os.path.abspath(path)) if os.path.basename(path) == FLATFILE else path]
    out: list[str] = []

    def walk(d: str, depth: int) -> None:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        names = {e.name for e in entries}
        if FLATFILE in names or PARMFILE in names:
            out.append(d)
            return
        if depth >= max_depth:
            return
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                walk(e.path, depth + 1)

    walk(path, 0)
    return out


class Watcher(engine.Watcher[DirectoryState]):
    """Polls every vdbench output directory under the watched paths, on the shared watch engine
    (lifecycle, isolation, retention); thread-safe.

    Differs from the other watch exporters on purpose: a source is an output *directory* (a run
    writes flatfile.html, parmfile.html, host reports side by side, read as one), found by
    :func:`find_output_dirs` rather than by a glob, and its health is per file inside it
    (``vdbench_source_error_info{file=...}``): a directory that cannot be read is
    :attr:`DirectoryState.error`, never the engine's reason/detail of a single file."""

    what = "vdbench output directory"

    def __init__(self, config: WatchConfig, clock: Callable[[], float] = time.time):
        super().__init__(config, clock)
        self._within: dict[str, str | None] = {}
        self._deadline = 0.0

    @property
    def dirs(self) -> dict[str, DirectoryState]:
        return self.sources

    def discover(self) -> list[str]:
        found: list[str] = []
        within: dict[str, str | None] = {}  # output directory -> the watched directory holding it
        missing: list[str] = []
        for path in self.config.paths:
            if not os.path.exists(path):
                missing.append(f"{path}: no such file or directory")
                continue
            if os.path.isdir(path) and not os.access(path, os.R_OK | os.X_OK):
                missing.append(f"{path}: permission denied")
                continue
            dirs = find_output_dirs(path, self.config.max_depth)
            for out_dir in dirs:
                within.setdefault(out_dir, path if os.path.isdir(path) else None)
            found.extend(dirs)
        self.note_missing(missing)
        self._within = within
        return list(dict.fromkeys(found))

    def poll(self) -> None:
        with self.lock:
            self._deadline = time.monotonic() + READ_SECONDS_PER_POLL  # shared by every directory
            super().poll()

    def new_source(self, path: str) -> DirectoryState:
        d = DirectoryState(path, self._within.get(path))
        d.first_seen = self.clock()
        log.info("reading vdbench output directory %s", path)
        return d

    def read(self, d: DirectoryState) -> None:
        try:
            d.poll(self._deadline)
        except OSError as exc:
            d.read_errors += 1
            if d.error is None:
                log.warning("cannot read vdbench output directory %s: %s", d.path, exc.strerror or exc)
            d.error = ("unreadable", exc.strerror or str(exc))
        else:
            if d.error is not None:
                log.info("vdbench output directory %s is readable again", d.path)
            d.error = None

    def internal_error(self, d: DirectoryState, detail: str) -> None:
        d.read_errors += 1
        d.error = ("internal_error", detail)

    def finish_source(self, d: DirectoryState) -> None:
        d.finish()
