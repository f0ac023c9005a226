"""Parsing vdbench output (the parsing layer of the vdbench exporter): pure functions and small
line-by-line parsers, no file access.

A vdbench output directory holds:

- ``flatfile.html``: ``*`` comment lines describing the columns, one header line (``tod Run
  Interval reqrate rate MB/sec ...``; vdbench 5.04.05+ adds ``timestamp`` after ``tod``), then one
  whitespace-separated row per interval and run, appended while the run goes on, and after each
  run's last interval its summary row (``Interval`` like ``avg_2-60``: the intervals averaged).
  ``n/a`` means not available, and so does ``NaN`` (Java's print of a value with no data, e.g.
  the average of no interval). Older builds lack ``read_resp``/``write_resp``/``queue_depth``/
  ``compratio``/``dedupratio``; Solaris builds add ``ks_*`` kstat columns. Columns are found by
  name, never by position (Flat.java writes them in the order they were registered).
- ``parmfile.html``: the parameter file as run (``sd=``, ``wd=``, ``rd=``, ``hd=`` lines and
  general parameters such as ``compratio=``).
- ``hd<N>.html`` (multi-host runs): a host's summary report, a fixed-layout table per run
  (``Starting RD=rd1; ...`` then one line per interval and an ``avg_2-60`` line);
  ``summary.html`` and ``totals.html`` have the same table for all hosts.

Units at the edge: MB = 2^20 bytes, times in ms (converted to seconds by the collector),
percentages 0-100 (converted to ratios by the collector).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: A line longer than this is garbage (a flatfile row of 40 columns is ~450 bytes).
MAX_LINE_BYTES = 64 * 1024

#: Flatfile columns the exporter uses (lower-cased: Flat.java matches names case-insensitively).
NUMERIC_COLUMNS = (
    "reqrate",
    "rate",
    "mb/sec",
    "bytes/io",
    "read%",
    "resp",
    "read_resp",
    "write_resp",
    "resp_max",
    "read_max",
    "write_max",
    "resp_std",
    "xfersize",
    "threads",
    "rdpct",
    "rhpct",
    "whpct",
    "seekpct",
    "lunsize",
    "compratio",
    "dedupratio",
    "queue_depth",
    "cpu_used",
    "cpu_user",
    "cpu_kernel",
    "cpu_wait",
    "cpu_idle",
    "ks_rate",
    "ks_resp",
    "ks_wait",
    "ks_svct",
    "ks_mb",
    "ks_read%",
    "ks_busy%",
    "ks_avwait",
    "ks_avact",
    "ks_bytes",
)

#: Columns a flatfile header must have to be read as a vdbench block-I/O flatfile.
REQUIRED_COLUMNS = ("run", "interval", "rate", "mb/sec")

_AVG = re.compile(r"^avg_(\d+)-(\d+)$")
_TOD = re.compile(r"^\d{1,2}:\d{2}:\d{2}(?:\.\d+)?$")


class InvalidLine(ValueError):
    """A line that looks like data but cannot be a vdbench row (the message says why)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


_MAX_VALUE = float(2**64)


def number(token: str, column: str = "") -> float | None:
    """A vdbench number: None for ``n/a`` (not available); InvalidLine for anything vdbench does
    not print (NaN, infinity, text, a negative value), naming ``column`` when given."""
    if token == "n/a" or token == "NaN":  # NaN: Java's print of no data (an avg of no interval)
        return None
    try:
        value = float(token)
    except ValueError:
        raise InvalidLine("not_a_number", f"{column} {token[:40]!r} is not a number".lstrip()) from None
    if not 0.0 <= value < _MAX_VALUE:  # also NaN and infinity
        raise InvalidLine("invalid_value", f"{column} {token[:40]!r} is not a value vdbench prints".lstrip())
    return value


def tod_seconds(tod: str) -> float | None:
    """``13:49:01.260`` as seconds since midnight (None when not a time of day)."""
    if not _TOD.match(tod):
        return None
    h, m, s = tod.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


@dataclass
class FlatRow:
    """One flatfile row: an interval of a run, or the run's summary (``avg_F-L``)."""

    run: str
    tod: str
    interval: int | None  # None for a summary row
    summary: tuple[int, int] | None  # (first, last) interval averaged, for avg_F-L rows
    values: dict[str, float | None]  # NUMERIC_COLUMNS present in the header -> value (None: n/a)
    version: str | None = None
    tod_s: float | None = None  # tod as seconds since midnight

    def get(self, column: str) -> float | None:
        return self.values.get(column)


@dataclass
class FlatfileParser:
    """Feeds flatfile lines one at a time; yields rows once the header was seen. Lines before
    the header (the ``*`` comments, ``<pre>``) are skipped; a second header (a file rewritten in
    place by a new vdbench) replaces the first."""

    header: list[str] | None = None
    index: dict[str, int] = field(default_factory=dict)
    comment_lines: int = 0
    _numeric: list[tuple[str, int]] = field(default_factory=list)  # numeric columns present
    _run: int = 0
    _interval: int = 0
    _version: int | None = None

    def feed(self, line: str) -> FlatRow | None:
        """The row on this line, None for a comment/header/blank line; InvalidLine for garbage."""
        tokens = line.split()
        if not tokens or tokens[0][0] in "*<":
            self.comment_lines += 1
            return None
        if tokens[0].lower() == "tod":
            low = [t.lower() for t in tokens]
            if "run" in low and "interval" in low:
                self._set_header(low)
                return None
        header = self.header
        if header is None:
            raise InvalidLine("before_header", "a data line before the flatfile's column header")
        if len(tokens) != len(header):
            raise InvalidLine("wrong_column_count", f"{len(tokens)} columns where the header has {len(header)}")
        tod = tokens[0]
        tod_s = tod_seconds(tod)
        if tod_s is None:
            raise InvalidLine("not_a_number", f"tod {tod[:40]!r} is not a time of day")
        iv = tokens[self._interval]
        interval: int | None = None
        summary: tuple[int, int] | None = None
        if iv.isdigit() and len(iv) < 10:
            interval = int(iv)
        else:
            m = _AVG.match(iv)
            if m is None:
                raise InvalidLine("not_a_number", f"interval {iv[:40]!r} is neither a number nor avg_F-L")
            summary = (int(m.group(1)), int(m.group(2)))
        values: dict[str, float | None] = {}
        for name, i in self._numeric:
            values[name] = number(tokens[i], name)
        version = tokens[self._version] if self._version is not None else None
        return FlatRow(
            run=tokens[self._run],
            tod=tod,
            interval=interval,
            summary=summary,
            values=values,
            version=None if version == "n/a" else version,
            tod_s=tod_s,
        )

    def _set_header(self, low: list[str]) -> None:
        missing = [c for c in REQUIRED_COLUMNS if c not in low]
        if missing:
            raise InvalidLine("bad_header", f"flatfile header lacks column(s) {', '.join(missing)}")
        self.header = low
        self.index = {name: i for i, name in enumerate(low)}
        self._numeric = [(name, self.index[name]) for name in NUMERIC_COLUMNS if name in self.index]
        self._run = self.index["run"]
        self._interval = self.index["interval"]
        self._version = self.index.get("version")


# ---------------------------------------------------------------------------------------------
# Summary tables: hd<N>.html (one host), summary.html / totals.html (all hosts)

#: Layouts of the summary table by the number of values after the interval column, newest first
#: (Report.java's interval line; vdbench 5.04 added read/write resp and then the queue depth).
SUMMARY_LAYOUTS: dict[int, tuple[str, ...]] = {
    # vdbench 5.04.07: read and write max instead of one resp max
    13: tuple(
        "rate mb/sec bytes/io read% resp read_resp write_resp read_max write_max resp_std queue_depth cpu_used cpu_kernel".split()
    ),
    12: tuple(
        "rate mb/sec bytes/io read% resp read_resp write_resp resp_max resp_std queue_depth cpu_used cpu_kernel".split()
    ),
    11: tuple("rate mb/sec bytes/io read% resp read_resp write_resp resp_max resp_std cpu_used cpu_kernel".split()),
    9: tuple("rate mb/sec bytes/io read% resp resp_max resp_std cpu_used cpu_kernel".split()),
}

_STARTING = re.compile(r"Starting RD=([^;<\s]+)")
_HOST_REPORT = re.compile(r"Host summary report\(s\) for host=([^\s<]+)")
_SUMMARY_LINE = re.compile(r"^(\d{1,2}:\d{2}:\d{2}\.\d+)\s+(\d+|avg_\d+-\d+)\s+(.*)$")


@dataclass
class SummaryTableParser:
    """Feeds the lines of a host (or all-host) summary report; yields FlatRows for its interval
    and avg lines, with the run taken from the latest ``Starting RD=`` line."""

    host: str | None = None
    run: str | None = None

    def feed(self, line: str) -> FlatRow | None:
        if "Host summary report" in line:
            m = _HOST_REPORT.search(line)
            if m:
                self.host = m.group(1)
            return None
        if "Starting RD=" in line:
            m = _STARTING.search(line)
            if m:
                self.run = m.group(1)
            return None
        m = _SUMMARY_LINE.match(line.strip())
        if m is None:
            return None  # headers, links, blank lines
        if self.run is None:
            raise InvalidLine("before_header", "an interval line before any 'Starting RD=' line")
        tokens = m.group(3).split()
        layout = SUMMARY_LAYOUTS.get(len(tokens))
        if layout is None:
            raise InvalidLine("wrong_column_count", f"{len(tokens)} values: not a summary table layout vdbench writes")
        values = {name: number(tok) for name, tok in zip(layout, tokens)}
        iv = m.group(2)
        am = _AVG.match(iv)
        return FlatRow(
            run=self.run,
            tod=m.group(1),
            tod_s=tod_seconds(m.group(1)),
            interval=None if am else int(iv),
            summary=(int(am.group(1)), int(am.group(2))) if am else None,
            values=values,
        )


def sniff_host_report(head: str) -> str | None:
    """The host name of a host summary report (``hd1.html``) from its first bytes, else None."""
    m = _HOST_REPORT.search(head)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------------------
# parmfile.html


@dataclass
class Parmfile:
    """The parameter file as run: named definitions per kind, ``default`` entries merged in."""

    general: dict[str, str] = field(default_factory=dict)  # compratio=, dedupratio=, data_errors= ...
    sd: dict[str, dict[str, str]] = field(default_factory=dict)
    wd: dict[str, dict[str, str]] = field(default_factory=dict)
    rd: dict[str, dict[str, str]] = field(default_factory=dict)
    hd: dict[str, dict[str, str]] = field(default_factory=dict)
    fsd: dict[str, dict[str, str]] = field(default_factory=dict)
    fwd: dict[str, dict[str, str]] = field(default_factory=dict)
    skipped_lines: int = 0


def split_parameters(text: str) -> list[tuple[str, str]]:
    """``sd=sd1,lun=/dev/sdb,range=(10,20)`` -> [("sd","sd1"), ("lun","/dev/sdb"), ("range","(10,20)")].
    Commas inside parentheses or quotes do not split."""
    parts: list[str] = []
    depth = 0
    quote = False
    cur: list[str] = []
    for ch in text:
        if ch == '"':
            quote = not quote
        elif not quote and ch == "(":
            depth += 1
        elif not quote and ch == ")":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0 and not quote:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    out = []
    for p in parts:
        p = p.strip()
        if not p:
            continue
        key, sep, value = p.partition("=")
        out.append((key.strip().lower(), value.strip() if sep else ""))
    return out


_TAG = re.compile(r"<[^>]*>")


def parse_parmfile(text: str) -> Parmfile:
    """The definitions of a vdbench parameter file (as copied into parmfile.html). Comment lines
    (``*``, ``#``, ``/``) and HTML tags are skipped; a line starting with ``,`` continues the one
    before; ``xx=default`` entries are merged into the later ``xx=`` entries."""
    pf = Parmfile()
    logical: list[str] = []
    for raw in text.splitlines():
        line = _TAG.sub("", raw).strip()
        if not line or line[0] in "*#/":
            continue
        if line.startswith(",") and logical:
            logical[-1] += line
        else:
            logical.append(line)
    defaults: dict[str, dict[str, str]] = {}
    for line in logical:
        params = split_parameters(line)
        if not params:
            continue
        kind, name = params[0]
        table = getattr(pf, kind, None) if kind in ("sd", "wd", "rd", "hd", "fsd", "fwd") else None
        if table is None:
            if name and len(params) >= 1 and "=" in line:
                for k, v in params:
                    pf.general[k] = v
            else:
                pf.skipped_lines += 1
            continue
        entry = dict(defaults.get(kind, {}))
        entry.update(dict(params[1:]))
        if name == "default":
            defaults.setdefault(kind, {}).update(dict(params[1:]))
        else:
            table[name] = entry
    return pf


def parse_vdbench_size(value: str | None) -> int | None:
    """vdbench's sizes (``4k``, ``512m``, ``10g``, ``1t``, plain bytes) in bytes (powers of 1024).
    None for what is not a plain size (a percentage range, a list)."""
    if value is None:
        return None
    m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)\s*$", value, re.IGNORECASE)
    if not m:
        return None
    unit = m.group(2).lower()
    size = float(m.group(1)) * (1024 ** ("kmgtp".index(unit) + 1) if unit else 1)
    return int(size) if size < 2**64 else None


# ---------------------------------------------------------------------------------------------
# HCIBench-style result summaries

_P95 = re.compile(r"95%tile[_ ]?LAT\w*\s*[=:]?\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def find_normal_percentile(text: str) -> float | None:
    """The '95th percentile' latency an HCIBench-style summary states (``95%tile_LAT = 3.2 ms``),
    in ms, or None. HCIBench computes it as avg + 1.645 x stddev: an estimate under a normal
    distribution, not a measured percentile (see docs/hygiene.md)."""
    m = _P95.search(text)
    return float(m.group(1)) if m else None
