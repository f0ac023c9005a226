"""Following pgbench's output files (the transport layer of pgbench-exporter) and integrating
what they say into per-run counters.

Each file under the watched paths (named directly, or matching ``--pgbench.pattern`` inside a
watched directory) is followed by a :class:`~ioparallax.exporters.common.linetail.LineTailer`:
only the bytes appended since the last poll are read, a file replaced, truncated or rewritten is
read again from the start (its runs start over: a counter reset, which ``rate()`` handles). Each
line is classified by :func:`~ioparallax.exporters.pgbench.parse.classify` and applied to the
file's current :class:`RunState`:

- a progress line adds its interval: ``tps x interval`` transactions (rounded: pgbench's tps is
  a count over the interval, printed to 0.1), ``latency mean x transactions`` to the latency sum,
  the failures, skipped and retried counts it prints, ``lag mean x transactions`` to the lag sum;
- the end summary closes the run: its counts are exact, so a counter below the summary's is
  raised to it (the last partial interval has no progress line); one above it (rounding) stays;
- an aggregate log line adds its interval's counts and sums, a per-transaction log line one
  transaction (and its latency to the histogram's buckets).

A new run starts at a version line, at a progress time that goes back, and at progress or
summary lines after a complete summary (a file that several runs appended to). Each file is read
in isolation: nothing one file holds costs another anything.
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass, field

from ioparallax.exporters.common.linetail import LineTailer
from ioparallax.exporters.common.watch import engine
from ioparallax.exporters.common.watchdir import watched_directory
from ioparallax.exporters.pgbench.parse import (
    MAX_LINE_BYTES,
    AggregateRow,
    ConsoleEvent,
    InvalidLine,
    Progress,
    Summary,
    TransactionRow,
    classify,
)

log = logging.getLogger(__name__)

#: Why a file is down (``reason`` of ``pgbench_source_error_info``).
REASONS = ("unreadable", "not_pgbench", "truncated", "internal_error")

#: Why a line was rejected (``reason`` of ``pgbench_source_rejected_lines_total``).
LINE_REASONS = (
    "bad_progress",
    "bad_summary",
    "bad_log_line",
    "wrong_field_count",
    "not_a_number",
    "invalid_value",
    "too_long",
    "not_text",
)

#: A file with this much content and no pgbench line is not pgbench output.
PGBENCH_WITHIN_BYTES = 256 * 1024

#: Runs kept per file (a file that thousands of runs appended to keeps its latest ones).
MAX_RUNS_PER_FILE = 100

#: Upper bounds (seconds) of the transaction latency histogram's buckets (per-transaction logs):
#: from an in-memory select-only transaction to a transaction stuck behind a checkpoint.
LATENCY_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)


@dataclass
class Count:
    """A count that not every pgbench version or option reports: its total, and whether a line
    gave it (its series is exported only then)."""

    total: float = 0.0
    known: bool = False

    def add(self, n: float | None) -> None:
        if n is not None:
            self.known = True
            self.total += n

    def raise_to(self, n: float | None) -> None:
        """A summary's exact count: the integrated total raised to it, never lowered."""
        if n is not None:
            self.known = True
            self.total = max(self.total, float(n))


@dataclass
class Mean:
    """A mean over transactions (latency, schedule lag) that not every input reports: the sum
    and count it is the mean of, and whether a line gave it."""

    sum_s: float = 0.0
    count: float = 0.0
    known: bool = False

    def add(self, sum_s: float | None, count: float) -> None:
        if sum_s is not None:
            self.known = True
            self.sum_s += sum_s
            self.count += count

    def add_mean(self, mean_s: float | None, count: float) -> None:
        self.add(mean_s * count if mean_s is not None else None, count)

    def raise_to(self, mean_s: float | None, count: int) -> None:
        """A summary's mean over ``count`` transactions: the sum raised to it, never lowered."""
        if mean_s is not None:
            self.known = True
            self.sum_s = max(self.sum_s, mean_s * count)
            self.count = float(count)


@dataclass
class RunState:
    """One pgbench run of a file, integrated from its lines."""

    seq: int  # 1-based position of the run in its file
    version: str | None = None
    kind: str | None = None  # progress, aggregate, transactions: what its data came from
    transactions: float = 0.0
    # 15+ progress, a summary that prints them, logs that carry them
    failures: Count = field(default_factory=Count)
    latency: Mean = field(default_factory=Mean)
    buckets: list[int] | None = None  # per-transaction logs: counts per LATENCY_BUCKETS_S bound
    lag: Mean = field(default_factory=Mean)
    skipped: Count = field(default_factory=Count)
    retried: Count = field(default_factory=Count)  # transactions retried
    retries: Count = field(default_factory=Count)  # retries made
    intervals: int = 0
    measured_s: float = 0.0
    client_aborts: int = 0
    aborted: bool = False
    latest: Progress | None = None
    latest_aggregate: AggregateRow | None = None
    last_time: float | None = None  # progress time (or interval start, or transaction time)
    pending: Progress | None = None  # the first epoch progress line: its interval is the next one's
    summary: Summary = field(default_factory=Summary)

    @property
    def finished(self) -> bool:
        return self.summary.complete

    @property
    def has_data(self) -> bool:
        return self.kind is not None or self.summary.started

    # ---- progress lines
    def add_progress(self, p: Progress) -> None:
        self.kind = self.kind or "progress"
        if p.epoch and self.last_time is None:
            # --progress-timestamp: the first line's interval is unknown until the second comes
            self.pending, self.last_time = p, p.time_s
            self.latest = p
            return
        start = self.last_time if self.last_time is not None else 0.0
        dt = p.time_s - start
        if self.pending is not None:
            pending, self.pending = self.pending, None
            self._interval(pending, dt)
        self._interval(p, dt)
        self.last_time = p.time_s
        self.latest = p

    def _interval(self, p: Progress, dt: float) -> None:
        n = float(round(p.tps * dt))
        self.intervals += 1
        self.measured_s += dt
        self.transactions += n
        self.latency.add_mean(p.latency_mean_s, n)
        self.failures.add(p.failed)
        self.lag.add_mean(p.lag_mean_s, n)
        self.skipped.add(p.skipped)
        if p.retried is not None and p.retries is not None:
            self.retried.add(p.retried)
            self.retries.add(p.retries)

    # ---- the summary
    def close(self) -> None:
        """The summary is complete: its exact counts raise the integrated ones (never lower)."""
        s = self.summary
        if s.processed is not None and s.processed >= self.transactions:
            self.latency.raise_to(s.latency_mean_s, s.processed)
            self.lag.raise_to(s.lag_mean_s, s.processed)
            self.transactions = float(s.processed)
        self.failures.raise_to(s.failed)
        self.skipped.raise_to(s.skipped)
        if s.retried is not None and s.retries is not None:
            self.retried.raise_to(s.retried)
            self.retries.raise_to(s.retries)

    # ---- logs
    def add_aggregate(self, row: AggregateRow) -> None:
        self.kind = self.kind or "aggregate"
        if self.last_time is not None and row.interval_start > self.last_time:
            self.measured_s += row.interval_start - self.last_time
        self.last_time = float(row.interval_start)
        self.intervals += 1
        self.latest_aggregate = row
        self.transactions += row.transactions
        self.latency.add(row.latency_sum_s, row.transactions)
        self.lag.add(row.lag_sum_s, row.transactions)
        self.skipped.add(row.skipped)
        if row.retried is not None and row.retries is not None:
            self.retried.add(row.retried)
            self.retries.add(row.retries)
        self.failures.add(row.failures)

    def add_transaction(self, row: TransactionRow) -> None:
        self.kind = self.kind or "transactions"
        if self.buckets is None:
            self.buckets = [0] * len(LATENCY_BUCKETS_S)
        if self.last_time is not None and row.time_epoch_s > self.last_time:
            self.measured_s += row.time_epoch_s - self.last_time
        self.last_time = max(self.last_time or 0.0, row.time_epoch_s)
        self.failures.known = self.latency.known = True  # a log of every transaction: none is missed
        if row.outcome == "ok" and row.latency_s is not None:
            self.transactions += 1
            self.latency.add(row.latency_s, 1)
            i = bisect.bisect_left(LATENCY_BUCKETS_S, row.latency_s)
            if i < len(self.buckets):
                self.buckets[i] += 1
            self.lag.add(row.lag_s, 1)
        elif row.outcome == "skipped":
            self.skipped.add(1)
        else:
            self.failures.add(1)
        if row.retries is not None:
            self.retried.add(1 if row.retries else 0)
            self.retries.add(row.retries)

    def cumulative_buckets(self) -> list[tuple[float, float]] | None:
        """(upper bound, transactions at or below it) for the histogram, or None without
        per-transaction data."""
        if self.buckets is None:
            return None
        out, total = [], 0
        for edge, n in zip(LATENCY_BUCKETS_S, self.buckets):
            total += n
            out.append((edge, float(total)))
        return out


@dataclass
class FileState:
    """One followed file: its runs and what its lines were."""

    path: str
    tailer: LineTailer
    runs: list[RunState] = field(default_factory=list)
    first_seq: int = 1  # seq of runs[0] (older runs are dropped past MAX_RUNS_PER_FILE)
    data_lines: int = 0
    other_lines: int = 0
    rejected: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LINE_REASONS, 0))
    logged: set[str] = field(default_factory=set)  # line reasons already logged for this file
    resets: int = 0
    read_errors: int = 0
    reason: str | None = None
    detail: str | None = None
    last_growth: float = 0.0
    first_seen: float = 0.0
    process_running: bool | None = None  # wrapper mode: is the pgbench writing it still running?
    progress_spacing_s: float | None = None

    @property
    def up(self) -> bool:
        return self.reason is None

    @property
    def current(self) -> RunState:
        if not self.runs:
            self.runs.append(RunState(seq=self.first_seq))
        return self.runs[-1]

    def new_run(self) -> RunState:
        run = RunState(seq=self.current.seq + 1 if self.runs else self.first_seq)
        self.runs.append(run)
        if len(self.runs) > MAX_RUNS_PER_FILE:
            del self.runs[0]
            self.first_seq = self.runs[0].seq
        return run

    # ---- lines
    def feed(self, raw: bytes) -> None:
        if b"\x00" in raw:
            self.reject("not_text", "a line with NUL bytes")
            return
        line = raw.decode("utf-8", "replace").strip()
        run = self.current
        # a summary line after a complete summary belongs to the next run (summary-only outputs
        # appended one after the other): it is applied to a fresh summary, the next run's
        target = run.summary if not run.summary.complete else Summary()
        try:
            event = classify(line, target)
        except InvalidLine as exc:
            self.reject(exc.reason, str(exc))
            return
        if event is None:
            self.other_lines += bool(line)
            return
        self.data_lines += 1
        if isinstance(event, AggregateRow):
            run.add_aggregate(event)
        elif isinstance(event, TransactionRow):
            run.add_transaction(event)
        else:
            self._console(event, target)

    def _console(self, event: ConsoleEvent, target: Summary) -> None:
        run = self.current
        if event.kind == "version":
            if run.has_data:
                run = self.new_run()
            run.version = event.version
        elif event.kind == "progress":
            p = event.progress
            assert p is not None
            went_back = run.last_time is not None and p.time_s < run.last_time and not p.epoch
            if run.finished or went_back:
                run = self.new_run()
            if run.last_time is not None and p.time_s > run.last_time:
                self.progress_spacing_s = p.time_s - run.last_time
            run.add_progress(p)
        elif event.kind == "summary":
            if target is not run.summary:
                run = self.new_run()
                run.summary = target
            if run.summary.complete:
                run.close()
        elif event.kind == "aborted":
            run.aborted = True
        elif event.kind == "client_aborted":
            run.client_aborts += 1

    def reject(self, reason: str, detail: str, lines: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + lines
        if reason not in self.logged:  # once per file and reason: garbage must not flood the log
            self.logged.add(reason)
            log.warning("pgbench file %s: line rejected (%s): %s", self.tailer.path, reason, detail)

    def restart(self) -> None:
        self.runs = []
        self.first_seq = 1
        self.progress_spacing_s = None


@dataclass
class WatchConfig:
    paths: list[str]
    pattern: str = "*pgbench*"
    retention_s: float = 15 * 60.0  # finished runs stay visible this long after their file last grew
    idle_s: float = 30.0  # a file idle this long (and 3 progress intervals) is finished
    complete: bool = False  # convert: the files are read to their end, nobody writes them any more


class Watcher(engine.Watcher[FileState]):
    """Follows every pgbench file under the watched paths, on the shared watch engine (finding,
    isolation, up/down, retention); thread-safe (the collector holds :attr:`lock` while it builds
    a scrape)."""

    what = "pgbench file"

    @property
    def files(self) -> dict[str, FileState]:
        return self.sources

    def new_source(self, path: str) -> FileState:
        tailer = LineTailer(path, watched_directory(path, self.config.paths), MAX_LINE_BYTES)
        log.info("following pgbench file %s", path)
        return FileState(path=path, tailer=tailer, first_seen=self.clock())

    def read(self, fs: FileState) -> None:
        running = self.process_running.get(fs.path)
        fs.process_running = running() if running is not None else None
        try:
            for lines, reset in fs.tailer.read_chunks():
                if fs.reason == "unreadable":
                    self.up(fs)
                if reset:
                    log.info("pgbench file %s %s: reading it again from the start", fs.path, reset)
                    fs.resets += 1
                    fs.restart()
                    if fs.reason is not None:
                        self.up(fs)  # judged again on the new content
                for raw in lines:
                    fs.feed(raw)
        except OSError as exc:
            self.unreadable(fs, exc)
            return
        if fs.reason == "unreadable":
            self.up(fs)
        if too_long := fs.tailer.take_too_long():
            fs.reject("too_long", fs.tailer.too_long_detail, too_long)
        if fs.tailer.mtime is not None:
            fs.last_growth = fs.tailer.mtime
        if fs.data_lines == 0 and fs.tailer.offset > PGBENCH_WITHIN_BYTES:
            self.down(fs, "not_pgbench", f"no pgbench line in its first {PGBENCH_WITHIN_BYTES} bytes")
        elif fs.reason == "not_pgbench" and fs.data_lines:
            self.up(fs)

    def internal_error(self, fs: FileState, detail: str) -> None:
        self.down(fs, "internal_error", detail)

    def finish_source(self, fs: FileState) -> None:
        """End of input (``convert``): an unterminated last line that is not pgbench data, or
        is cut off, means the file was cut off (reason ``truncated``)."""
        rest = fs.tailer.take_partial()
        if not rest.strip():
            return
        before = sum(fs.rejected.values())
        fs.feed(rest)
        if sum(fs.rejected.values()) > before:
            self.down(fs, "truncated", f"its last line is cut off: {rest[:80]!r}")

    def ended(self, fs: FileState, now: float) -> bool:
        """Whether the file's writer has ended: ``convert`` (every file complete), the wrapped
        pgbench exited, or the file has not grown for the idle timeout (and 3 progress intervals)."""
        return self.config.complete or super().ended(fs, now)

    def spacing(self, fs: FileState) -> float | None:
        return fs.progress_spacing_s
