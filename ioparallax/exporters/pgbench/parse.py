"""Parsing pgbench output (the parsing layer of pgbench-exporter): pure functions and a small
line-by-line parser, no file access.

pgbench writes three kinds of text, all read here one line at a time:

- **console output** (stderr and stdout, as ``pgbench ... > out 2>&1`` or the wrapped command
  captures them): a version line (``pgbench (15.3 (Ubuntu ...))``, 14 and later), a progress line
  per ``-P`` interval and, at the end, the summary. Progress, PostgreSQL <= 14::

      progress: 1.0 s, 333.0 tps, lat 2.977 ms stddev 1.960[, lag 0.123 ms[, 5 skipped]]

  15 and later add the failures after the stddev, then the optional parts::

      progress: 1.0 s, 1203.9 tps, lat 0.828 ms stddev 0.183, 0 failed[, lag ...][, N skipped][, N retried, M retries]

  With ``--progress-timestamp`` the time is an epoch (``1650260552.123 s``). The tps of an
  interval counts the transactions that succeeded in it; ``0.0 tps, lat 0.000 ms`` is an interval
  with none, not an error. The summary: ``transaction type:``, ``scaling factor:``, ``query
  mode:``, ``number of clients:``, ``number of threads:``, (15+) ``maximum number of tries:``,
  ``duration: N s`` or ``number of transactions per client: N``, ``number of transactions
  actually processed: N[/M]``, (15+) ``number of failed transactions: N (x%)``, ``latency average =
  x ms`` (9.x: ``latency average: x ms``), ``latency stddev = x ms``, ``rate limit schedule lag: avg
  x (max y) ms``, (14+) ``initial connection time = x ms``, then ``tps = x (without initial
  connection time)``; before 14 two lines, ``tps = x (including connections establishing)`` and
  ``tps = x (excluding connections establishing)``; with ``-C`` one, ``tps = x (including
  reconnection times)``. Per-script blocks after it (`` - number of failed transactions: ...``)
  are not the run's totals and are skipped. ``pgbench: error: Run was aborted`` marks a run whose
  clients died.
- **aggregate logs** (``--log --aggregate-interval=N``), one line per interval, latencies in
  microseconds: ``interval_start num_transactions sum_latency sum_latency_2 min_latency
  max_latency`` and, by version and options, ``sum_lag sum_lag_2 min_lag max_lag`` and
  ``skipped`` (<= 14: only with --rate / --latency-limit), then (15+) ``retried retries`` and
  ``serialization_failures deadlock_failures`` (17+ always writes all 15 fields, zeros for what
  was not asked; 19 adds ``other_sql_failures``). The layout is told by the number of fields:
  6, 10, 11, 15 and 16 are unambiguous; 15 and 16 only in between (with some options and not
  others) can write 7-9 or 12-14 fields, which cannot be told apart: of those only the first six
  are read (:data:`AGGREGATE_LAYOUTS`).
- **per-transaction logs** (``--log``): ``client_id transaction_no time script_no time_epoch
  time_us [schedule_lag] [retries]``, ``time`` in microseconds or ``skipped`` / ``failed`` /
  ``serialization`` / ``deadlock`` / ``other``. A 7th field is read as the schedule lag (--rate),
  an 8th as the retries.

Every record carries base units: seconds, counts. A line that claims to be pgbench data but is
not (a cut-off progress line, a negative count, NaN) raises :class:`InvalidLine` with a reason;
any other line (pgbench's own messages, ``starting vacuum...end.``, SQL errors) is not data and
is only counted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

#: A line longer than this is garbage (a progress line is under 200 bytes; pgbench's error
#: messages quote SQL and can be long, but not this long).
MAX_LINE_BYTES = 64 * 1024

#: A progress time above this is an epoch (``--progress-timestamp``), not seconds since the start
#: (a run of 3 years): 2001-09-09.
EPOCH_SINCE = 1e9

_MS = 1e-3
_US = 1e-6
_MAX_COUNT = 2**63


class InvalidLine(ValueError):
    """A line that claims to be pgbench data but cannot be (the message says why)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _float(token: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise InvalidLine("not_a_number", f"{what} {token[:40]!r} is not a number") from None
    if not (math.isfinite(value) and value >= 0.0):
        raise InvalidLine("invalid_value", f"{what} {token[:40]!r} is not a value pgbench prints")
    return value


def _count(token: str, what: str) -> int:
    if not token.isdigit():
        raise InvalidLine("not_a_number", f"{what} {token[:40]!r} is not a count")
    value = int(token)
    if value >= _MAX_COUNT:
        raise InvalidLine("invalid_value", f"{what} {token[:40]!r} is beyond what pgbench counts")
    return value


def _ms(token: str | None, what: str) -> float | None:
    """Milliseconds as printed (``2.977``) in seconds; None when absent or NaN (pgbench prints
    ``nan``/``-nan`` for the stddev of an interval with no transaction on some platforms)."""
    if token is None or token.lstrip("-").lower() == "nan":
        return None
    return _float(token, what) * _MS


# ---- console output -------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """One ``-P`` progress line: the interval that ended at ``time_s``."""

    time_s: float  # seconds since the run started, or an epoch (``epoch``)
    epoch: bool  # --progress-timestamp
    tps: float  # successful transactions per second over the interval
    latency_mean_s: float | None
    latency_stddev_s: float | None
    failed: int | None = None  # 15+: transactions that failed in the interval
    lag_mean_s: float | None = None  # --rate: mean schedule lag
    skipped: int | None = None  # --rate with --latency-limit
    retried: int | None = None  # --max-tries other than 1: transactions retried
    retries: int | None = None  # ... and retries made

    @property
    def has_failures(self) -> bool:
        """Whether the line reports failures at all (15+), as opposed to reporting none."""
        return self.failed is not None


_NUM = r"-?[0-9.]+(?:[eE][-+]?\d+)?|-?nan|-?inf"
_PROGRESS = re.compile(
    rf"^progress: (?P<t>{_NUM}) s, (?P<tps>{_NUM}) tps"
    rf"(?:, lat(?:ency)? (?P<lat>{_NUM}) ms stddev (?P<sd>{_NUM}))?"
    r"(?:, (?P<failed>\d+) failed)?"
    rf"(?:, lag (?P<lag>{_NUM}) ms)?"
    r"(?:, (?P<skipped>\d+) skipped)?"
    r"(?:, (?P<retried>\d+) retried, (?P<retries>\d+) retries)?$",
    re.IGNORECASE,
)


def parse_progress(line: str) -> Progress:
    """A ``progress:`` line (already stripped); InvalidLine when it is cut off or garbled."""
    m = _PROGRESS.match(line)
    if m is None:
        raise InvalidLine("bad_progress", f"not a pgbench progress line: {line[:80]!r}")
    t = _float(m["t"], "progress time")
    tps = _float(m["tps"], "tps")

    def opt(name: str) -> int | None:
        return _count(m[name], name) if m[name] is not None else None

    return Progress(
        time_s=t,
        epoch=t >= EPOCH_SINCE,
        tps=tps,
        latency_mean_s=_ms(m["lat"], "latency"),
        latency_stddev_s=_ms(m["sd"], "latency stddev"),
        failed=opt("failed"),
        lag_mean_s=_ms(m["lag"], "lag"),
        skipped=opt("skipped"),
        retried=opt("retried"),
        retries=opt("retries"),
    )


@dataclass
class Summary:
    """The end-of-run report, filled line by line (fields absent from a version stay None)."""

    transaction_type: str | None = None
    scaling_factor: int | None = None
    query_mode: str | None = None
    clients: int | None = None
    threads: int | None = None
    max_tries: str | None = None
    duration_s: float | None = None
    transactions_per_client: int | None = None
    processed: int | None = None  # successful transactions
    intended: int | None = None  # -t: clients x transactions per client
    failed: int | None = None  # 15+
    skipped: int | None = None
    retried: int | None = None
    retries: int | None = None
    latency_mean_s: float | None = None
    latency_stddev_s: float | None = None
    lag_mean_s: float | None = None
    lag_max_s: float | None = None
    connection_time_s: float | None = None  # initial (14+) or average (-C) connection time
    tps: float | None = None  # without initial connection time / excluding connections
    tps_including_connections: float | None = None  # <= 13
    complete: bool = False  # its last tps line was read

    @property
    def started(self) -> bool:
        return any(
            v is not None
            for v in (self.transaction_type, self.scaling_factor, self.processed, self.tps, self.latency_mean_s)
        )


def _set_processed(s: Summary, m: re.Match[str]) -> None:
    s.processed = _count(m[1], "transactions processed")
    s.intended = _count(m[2], "transactions intended") if m[2] else None


def _set_tps(s: Summary, m: re.Match[str]) -> None:
    value = _float(m[1], "tps")
    if "including connections establishing" in m[2]:
        s.tps_including_connections = value  # <= 13: the excluding line follows
        return
    s.tps = value
    s.complete = True


def _set_lag(s: Summary, m: re.Match[str]) -> None:
    s.lag_mean_s = _ms(m[1], "lag")
    s.lag_max_s = _ms(m[2], "lag max")


def _setter(name: str, conv):
    return lambda s, m: setattr(s, name, conv(m[1]))


#: (pattern, what it sets) for the summary lines, matched on the stripped line.
_SUMMARY: tuple[tuple[re.Pattern[str], object], ...] = tuple(
    (re.compile(p), f)
    for p, f in (
        (r"^transaction type: (.*)$", _setter("transaction_type", str)),
        (r"^scaling factor: (\S+)$", _setter("scaling_factor", lambda v: _count(v, "scaling factor"))),
        (r"^query mode: (\S+)$", _setter("query_mode", str)),
        (r"^number of clients: (\S+)$", _setter("clients", lambda v: _count(v, "clients"))),
        (r"^number of threads: (\S+)$", _setter("threads", lambda v: _count(v, "threads"))),
        (r"^maximum number of tries: (\S+)$", _setter("max_tries", str)),
        (r"^duration: (\S+) s$", _setter("duration_s", lambda v: _float(v, "duration"))),
        (
            r"^number of transactions per client: (\S+)$",
            _setter("transactions_per_client", lambda v: _count(v, "transactions per client")),
        ),
        (r"^number of transactions actually processed: (\d+)(?:/(\d+))?$", _set_processed),
        (r"^number of failed transactions: (\S+) \(.*\)$", _setter("failed", lambda v: _count(v, "failed"))),
        (r"^number of transactions skipped: (\S+) \(.*\)$", _setter("skipped", lambda v: _count(v, "skipped"))),
        (r"^number of transactions retried: (\S+) \(.*\)$", _setter("retried", lambda v: _count(v, "retried"))),
        (r"^total number of retries: (\S+)$", _setter("retries", lambda v: _count(v, "retries"))),
        (r"^latency average ?[=:] (\S+) ms$", _setter("latency_mean_s", lambda v: _ms(v, "latency average"))),
        (r"^latency stddev ?[=:] (\S+) ms$", _setter("latency_stddev_s", lambda v: _ms(v, "latency stddev"))),
        (r"^rate limit schedule lag: avg (\S+) \(max (\S+)\) ms$", _set_lag),
        (
            r"^(?:initial|average) connection time = (\S+) ms$",
            _setter("connection_time_s", lambda v: _ms(v, "connection time")),
        ),
        (r"^tps = (\S+) \((.*)\)$", _set_tps),
    )
)

#: First words of the summary lines: a line starting so that matches no pattern is a cut-off or
#: garbled summary line (InvalidLine), not one of pgbench's messages.
_SUMMARY_STARTS = tuple(
    s
    for s in (
        "transaction type:",
        "scaling factor:",
        "query mode:",
        "number of clients:",
        "number of threads:",
        "maximum number of tries:",
        "duration:",
        "number of transactions",
        "number of failed transactions:",
        "total number of retries:",
        "latency average",
        "latency stddev",
        "rate limit schedule lag:",
        "initial connection time",
        "average connection time",
        "tps =",
    )
)

_VERSION = re.compile(r"^pgbench \(([^ ()]+)")
_ABORTED = re.compile(r"Run was aborted")
_CLIENT_ABORTED = re.compile(r"client \d+ (?:script \d+ )?aborted")


@dataclass(frozen=True)
class ConsoleEvent:
    """What a console line was: ``kind`` is ``version``, ``progress``, ``summary`` (a summary line
    was applied to :attr:`OutputParser.summary`), ``aborted`` (the run was aborted) or
    ``client_aborted`` (one client died: pgbench goes on with the others)."""

    kind: str
    progress: Progress | None = None
    version: str | None = None


def parse_console_line(line: str, summary: Summary) -> ConsoleEvent | None:
    """One stripped console line: a progress record, the version, or a summary line applied to
    ``summary``; None for lines that are none of these (pgbench's messages)."""
    if line.startswith("progress:"):
        return ConsoleEvent("progress", progress=parse_progress(line))
    if line.startswith("pgbench ("):
        m = _VERSION.match(line)
        return ConsoleEvent("version", version=m[1]) if m else None
    if line.startswith(_SUMMARY_STARTS):
        for pattern, apply in _SUMMARY:
            m = pattern.match(line)
            if m is not None:
                apply(summary, m)  # type: ignore[operator]
                return ConsoleEvent("summary")
        if line.startswith("number of transactions above"):
            return None  # --latency-limit: late transactions, a share of the processed ones
        raise InvalidLine("bad_summary", f"a cut-off or garbled summary line: {line[:80]!r}")
    if "pgbench" in line and _ABORTED.search(line):
        return ConsoleEvent("aborted")
    if _CLIENT_ABORTED.search(line):
        return ConsoleEvent("client_aborted")
    return None


# ---- logs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AggregateRow:
    """One ``--aggregate-interval`` line (times in seconds)."""

    interval_start: int  # epoch seconds
    transactions: int
    latency_sum_s: float
    latency_sum2_s2: float
    latency_min_s: float
    latency_max_s: float
    layout: str  # see AGGREGATE_LAYOUTS
    lag_sum_s: float | None = None
    lag_max_s: float | None = None
    skipped: int | None = None
    retried: int | None = None
    retries: int | None = None
    failures: int | None = None  # serialization + deadlock (+ other, 19+) failures


#: Field count -> what the fields after the first six are. Other counts (7-9, 12-14: 15 and 16
#: with some of --rate, --latency-limit, --max-tries, --failures-detailed and not others) cannot
#: be told apart: only the first six are read ("base").
AGGREGATE_LAYOUTS = {
    6: "base",
    10: "lag",
    11: "lag_skipped",
    15: "full",  # 17+: every field; or 15/16 with all four options
    16: "full_other",  # 19+: other_sql_failures
}


@dataclass(frozen=True)
class TransactionRow:
    """One per-transaction ``--log`` line."""

    client: int
    outcome: str  # ok, skipped, failed, serialization, deadlock, other
    latency_s: float | None  # None unless outcome is ok
    time_epoch_s: float
    lag_s: float | None = None
    retries: int | None = None


TRANSACTION_OUTCOMES = ("skipped", "failed", "serialization", "deadlock", "other")


def parse_log_line(line: str) -> AggregateRow | TransactionRow | None:
    """An aggregate or per-transaction log line; None when the line is not all numbers (not a
    log line: a console line, a statement-latency line); InvalidLine when it has a log line's
    shape but not its values."""
    fields = line.split()
    if len(fields) < 6 or not fields[0].isdigit():
        return None
    if not all(f.isdigit() or f in TRANSACTION_OUTCOMES for f in fields):
        return None  # "0.012 0 \\set aid ...": a statement-latency line of the console summary
    first = int(fields[0])
    if first >= EPOCH_SINCE:
        return _aggregate(fields)
    if len(fields) <= 8 and fields[4].isdigit() and int(fields[4]) >= EPOCH_SINCE:
        return _transaction(fields)
    raise InvalidLine("bad_log_line", f"neither an aggregate nor a per-transaction log line: {line[:80]!r}")


def _aggregate(f: list[str]) -> AggregateRow:
    if any(not x.isdigit() for x in f):
        raise InvalidLine("bad_log_line", "an aggregate log line with a word among its numbers")
    n = [_count(x, "aggregate field") for x in f]
    layout = AGGREGATE_LAYOUTS.get(len(n), "base")
    if len(n) > 16:
        raise InvalidLine("wrong_field_count", f"{len(n)} fields: more than any pgbench writes (16)")
    row = dict(
        interval_start=n[0],
        transactions=n[1],
        latency_sum_s=n[2] * _US,
        latency_sum2_s2=n[3] * _US * _US,
        latency_min_s=n[4] * _US,
        latency_max_s=n[5] * _US,
        layout=layout,
    )
    if layout in ("lag", "lag_skipped", "full", "full_other"):
        row.update(lag_sum_s=n[6] * _US, lag_max_s=n[9] * _US)
    if layout in ("lag_skipped", "full", "full_other"):
        row["skipped"] = n[10]
    if layout in ("full", "full_other"):
        row.update(retried=n[11], retries=n[12], failures=sum(n[13:]))
    return AggregateRow(**row)  # type: ignore[arg-type]


def _transaction(f: list[str]) -> TransactionRow:
    client = _count(f[0], "client id")
    outcome = "ok" if f[2].isdigit() else f[2]
    if not f[3].isdigit() or not f[5].isdigit():
        raise InvalidLine("bad_log_line", "a per-transaction log line with a word where a number belongs")
    us = int(f[5])
    if us >= 1_000_000:
        raise InvalidLine("invalid_value", f"time_us {us} is not below one second")
    lag = _count(f[6], "schedule lag") * _US if len(f) > 6 else None
    retries = _count(f[7], "retries") if len(f) > 7 else None
    return TransactionRow(
        client=client,
        outcome=outcome,
        latency_s=int(f[2]) * _US if outcome == "ok" else None,
        time_epoch_s=int(f[4]) + us * _US,
        lag_s=lag,
        retries=retries,
    )


def classify(line: str, summary: Summary) -> ConsoleEvent | AggregateRow | TransactionRow | None:
    """One line of any pgbench text (stripped): a console event (applied to ``summary`` when it
    is a summary line), a log row, or None (not pgbench data)."""
    if not line:
        return None
    if line[0].isdigit():
        row = parse_log_line(line)
        if row is not None:
            return row
    return parse_console_line(line, summary)
