"""A vdbench output directory written from given per-interval numbers, as vdbench writes it.

:class:`VdbenchOutput` writes ``parmfile.html`` (the parameter file as run), ``flatfile.html``
(the column comments and header, then one row per interval appended as the run goes on, then the
run's ``avg_F-L`` summary row) and, for multi-host runs, a host report per host (``<hd name>.html``: ``hd1.html``...)
with the interval table vdbench 5.04.07 prints, plus ``summary.html`` linking them. Formats follow
vdbench's ``Flat.java`` (``%10.4f`` numbers, ``%10d`` counts, ``n/a``) and ``Report.java``'s
interval lines; the flatfile row of a multi-host run is the hosts' aggregate, as vdbench's is.

The numbers come from the caller (a test, or the scenario trace through
:class:`~ioparallax.simulators.guest.vdbench_run.GuestVdbench`, whose hosts are the scenario's
vdbench VMs): per run, host and interval the I/O rate, MB/s, read share, response times and
queue depth (:class:`HostInterval`). A file
appended a row at a time is what ``vdbench-exporter`` tails live; the rows read back through
its reader to the same numbers within the printed precision (tests/simulators/guest/test_vdbench_simulator.py).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

VDBENCH_VERSION = "vdbench50407"

#: Flatfile columns of a block-I/O run (Flat.java's order) with their comment text.
FLAT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("Run", "Name of run from RD="),
    ("Interval", "Reporting interval number"),
    ("reqrate", "Requested i/o rate"),
    ("rate", "Observed i/o rate"),
    ("MB/sec", "Megabytes per second (MB=1024*1024)"),
    ("bytes/io", "Average data transfersize"),
    ("read%", "Observed read percentage"),
    ("resp", "Observed response time"),
    ("read_resp", "Observed read response time"),
    ("write_resp", "Observed write response time"),
    ("resp_max", "Observed maximum response time"),
    ("resp_std", "Standard deviation"),
    ("xfersize", "data transfer size requested"),
    ("threads", "number of threads requested"),
    ("rdpct", "read% requested"),
    ("rhpct", "readhit% requested"),
    ("whpct", "writehit% requested"),
    ("seekpct", "seek% requested"),
    ("lunsize", "Total amount of Gigabytes of all luns (GB= 1024*1024*1024)"),
    ("version", "Vdbench version identifier"),
    ("compratio", "Requested compression ratio"),
    ("dedupratio", "Requested dedup ratio"),
    ("queue_depth", "Vdbench calculated average i/o queue depth"),
    ("cpu_used", "kstat: cpu% user+sys"),
    ("cpu_user", "kstat: cpu% user"),
    ("cpu_kernel", "kstat: cpu% sys "),
    ("cpu_wait", "kstat: cpu% wait"),
    ("cpu_idle", "kstat: cpu% idle"),
)
_LONG = {"Interval", "bytes/io", "xfersize"}
_STRING = {"Run", "version"}


@dataclass(frozen=True)
class HostInterval:
    """What one host measured in one interval."""

    rate: float  # I/Os per second
    mb_per_s: float  # MB/s, MB = 2^20 bytes
    read_pct: float  # 0-100
    read_resp_ms: float
    write_resp_ms: float
    resp_max_ms: float
    resp_std_ms: float
    queue_depth: float
    cpu_used_pct: float | None = None
    cpu_sys_pct: float | None = None

    @property
    def resp_ms(self) -> float:
        rp = self.read_pct / 100.0
        return rp * self.read_resp_ms + (1 - rp) * self.write_resp_ms

    @property
    def bytes_per_io(self) -> int:
        return int(round(self.mb_per_s * 1048576 / self.rate)) if self.rate > 0 else 0


@dataclass
class RunDefinition:
    """One ``rd=`` with the workload and storage it uses (what the parmfile and the flatfile's
    requested columns show)."""

    name: str
    xfersize: int = 4096
    rdpct: float = 70.0
    seekpct: float = 100.0
    threads: int = 8
    iorate: str = "max"
    elapsed: int = 60
    interval: int = 1
    lun: str = "/dev/sdb"
    lunsize_gib: float = 100.0
    openflags: str = "o_direct"
    compratio: float | None = None
    dedupratio: float | None = None


def aggregate(parts: list[HostInterval]) -> HostInterval:
    """The all-hosts interval vdbench prints in the flatfile: rates and queue depths add up,
    response times are weighted by each host's I/Os, the standard deviation is the pooled one."""
    rate = sum(p.rate for p in parts)
    reads = sum(p.rate * p.read_pct / 100.0 for p in parts)
    writes = rate - reads
    read_pct = 100.0 * reads / rate if rate > 0 else 0.0

    def weighted(values: list[tuple[float, float]]) -> float:
        w = sum(n for n, _ in values)
        return sum(n * v for n, v in values) / w if w > 0 else 0.0

    r_resp = weighted([(p.rate * p.read_pct / 100.0, p.read_resp_ms) for p in parts])
    w_resp = weighted([(p.rate * (1 - p.read_pct / 100.0), p.write_resp_ms) for p in parts])
    mean = (reads * r_resp + writes * w_resp) / rate if rate > 0 else 0.0
    var = weighted([(p.rate, p.resp_std_ms**2 + (p.resp_ms - mean) ** 2) for p in parts])
    cpu = [p.cpu_used_pct for p in parts if p.cpu_used_pct is not None]
    sys_ = [p.cpu_sys_pct for p in parts if p.cpu_sys_pct is not None]
    return HostInterval(
        rate=rate,
        mb_per_s=sum(p.mb_per_s for p in parts),
        read_pct=read_pct,
        read_resp_ms=r_resp,
        write_resp_ms=w_resp,
        resp_max_ms=max((p.resp_max_ms for p in parts), default=0.0),
        resp_std_ms=math.sqrt(var),
        queue_depth=sum(p.queue_depth for p in parts),
        cpu_used_pct=sum(cpu) / len(cpu) if cpu else None,
        cpu_sys_pct=sum(sys_) / len(sys_) if sys_ else None,
    )


def average(rows: list[HostInterval]) -> HostInterval:
    """vdbench's summary of intervals: the mean over the intervals, response times weighted by I/Os."""
    n = len(rows)
    if n == 0:
        return HostInterval(0, 0, 0, 0, 0, 0, 0, 0)
    scaled = [
        HostInterval(
            r.rate / n,
            r.mb_per_s / n,
            r.read_pct,
            r.read_resp_ms,
            r.write_resp_ms,
            r.resp_max_ms,
            r.resp_std_ms,
            r.queue_depth / n,
            r.cpu_used_pct,
            r.cpu_sys_pct,
        )
        for r in rows
    ]
    return aggregate(scaled)


def parmfile_text(runs: list[RunDefinition], hosts: list[str]) -> str:
    """The parameter file as vdbench copies it into parmfile.html."""
    lines = ["<pre>", "", "* Contents of parameter file: ioparallax-simulated.parm", ""]
    general = runs[0] if runs else None
    if general is not None and general.compratio is not None:
        lines.append(f"compratio={general.compratio:g}")
    if general is not None and general.dedupratio is not None:
        lines.append(f"dedupratio={general.dedupratio:g}")
    if hosts:
        lines.append("hd=default,vdbench=/opt/vdbench,shell=vdbench,user=root")
        lines.extend(f"hd={h},system={h}" for h in hosts)
        lines.append("")
    for r in runs:
        flags = f",openflags={r.openflags}" if r.openflags else ""
        host = ",host=hd*" if hosts else ""
        per_lun = r.lunsize_gib / max(1, len(hosts))  # lunsize is all LUNs; size= is one host's LUN
        lines.append(f"sd=sd_{r.name}{host},lun={r.lun}{flags},size={per_lun:g}g")
    lines.append("")
    for r in runs:
        lines.append(f"wd=wd_{r.name},sd=sd_{r.name},xfersize={r.xfersize},rdpct={r.rdpct:g},seekpct={r.seekpct:g}")
    lines.append("")
    for r in runs:
        lines.append(
            f"rd={r.name},wd=wd_{r.name},iorate={r.iorate},elapsed={r.elapsed},interval={r.interval},threads={r.threads}"
        )
    return "\n".join(lines) + "\n"


def _flat_value(name: str, value: object) -> str:
    if value is None:
        return f"{'n/a':>10s} "
    if name in _STRING or isinstance(value, str):
        return f"{value!s:>10s} "
    if name in _LONG:
        return f"{int(value):10d} "  # type: ignore[call-overload]
    return f"{float(value):10.4f} "  # type: ignore[arg-type]


def flatfile_header() -> str:
    out = [
        "<pre>",
        "*",
        "* 'flatfile.html' contains Vdbench generated information in a column by column ASCII format. ",
    ]
    out.append("*")
    out.extend(f"* {name:<16s}: {text}" for name, text in FLAT_COLUMNS)
    out.append(
        "* 'n/a'           : Data not available, or conflicting data. eg. multiple different xfersize parameters used."
    )
    out.append("* ")
    header = f"{'tod':>12s} {'timestamp':>23s} " + "".join(f"{name:>10s} " for name, _ in FLAT_COLUMNS)
    out.append(header)
    return "\n".join(out) + "\n"


def flatfile_row(run: RunDefinition, interval: str | int, iv: HostInterval, when: float) -> str:
    """One flatfile row as Flat.printInterval writes it (tod, timestamp, then the columns)."""
    reqrate = None if run.iorate == "max" else float(run.iorate)
    values: dict[str, object] = {
        "Run": run.name,
        "Interval": interval,
        "reqrate": reqrate,
        "rate": iv.rate,
        "MB/sec": iv.mb_per_s,
        "bytes/io": iv.bytes_per_io,
        "read%": iv.read_pct,
        "resp": iv.resp_ms,
        "read_resp": iv.read_resp_ms,
        "write_resp": iv.write_resp_ms,
        "resp_max": iv.resp_max_ms,
        "resp_std": iv.resp_std_ms,
        "xfersize": run.xfersize,
        "threads": float(run.threads),
        "rdpct": run.rdpct,
        "rhpct": 0.0,
        "whpct": 0.0,
        "seekpct": run.seekpct,
        "lunsize": run.lunsize_gib,
        "version": VDBENCH_VERSION,
        "compratio": run.compratio,
        "dedupratio": run.dedupratio,
        "queue_depth": iv.queue_depth,
        "cpu_used": iv.cpu_used_pct,
        "cpu_user": None,
        "cpu_kernel": iv.cpu_sys_pct,
        "cpu_wait": None,
        "cpu_idle": None,
    }
    cols = "".join(_flat_value(name, values[name]) for name, _ in FLAT_COLUMNS)
    tm = time.gmtime(when)
    tod = time.strftime("%H:%M:%S", tm) + f".{int(when * 1000) % 1000:03d}"
    stamp = time.strftime("%m/%d/%Y-%H:%M:%S-UTC ", tm)
    return f"{tod:>12s} {stamp:>24s}{cols}\n"


def _summary_table_header(when: float) -> str:
    date = time.strftime("%b %d, %Y", time.gmtime(when))
    return (
        f"\n{date}    interval        i/o   MB/sec   bytes   read     resp     read    write     read    write"
        "     resp  queue  cpu%  cpu%\n"
        "                               rate  1024**2     i/o    pct     time     resp     resp      max      max"
        "   stddev  depth sys+u   sys\n"
    )


def summary_line(interval: str | int, iv: HostInterval, when: float) -> str:
    """One interval line of a host (or summary) report, as vdbench 5.04.07 prints it (read and
    write max: the interval's max for a direction that had I/O)."""
    tm = time.gmtime(when)
    tod = time.strftime("%H:%M:%S", tm) + f".{int(when * 1000) % 1000:03d}"
    cpu = iv.cpu_used_pct if iv.cpu_used_pct is not None else 0.0
    sys_ = iv.cpu_sys_pct if iv.cpu_sys_pct is not None else 0.0
    read_max = iv.resp_max_ms if iv.read_pct > 0 else 0.0
    write_max = iv.resp_max_ms if iv.read_pct < 100 else 0.0
    return (
        f"{tod} {interval!s:>11s} {iv.rate:10.1f} {iv.mb_per_s:8.2f} {iv.bytes_per_io:7d} {iv.read_pct:6.2f} "
        f"{iv.resp_ms:8.3f} {iv.read_resp_ms:8.3f} {iv.write_resp_ms:8.3f} {read_max:8.2f} {write_max:8.2f} "
        f"{iv.resp_std_ms:8.3f} {iv.queue_depth:6.1f} {cpu:5.1f} {sys_:5.1f}\n"
    )


@dataclass
class VdbenchOutput:
    """Writes one vdbench output directory as a run goes on."""

    out_dir: Path
    runs: list[RunDefinition]
    hosts: list[str] = field(default_factory=list)  # empty: a single-host run (no host reports)
    _rows: dict[str, list[HostInterval]] = field(default_factory=dict)
    _host_rows: dict[tuple[str, str], list[HostInterval]] = field(default_factory=dict)
    _interval: dict[str, int] = field(default_factory=dict)

    def start(self) -> None:
        """Write parmfile.html, the flatfile's comments and header, the host reports' titles."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self._atomic("parmfile.html", parmfile_text(self.runs, self.hosts))
        self._atomic("flatfile.html", flatfile_header())
        links = "   ".join(f'<A HREF="{self._host_file(h)}">{h}</A>' for h in self.hosts)
        self._atomic(
            "summary.html",
            "<pre>\nVdbench summary report (ioparallax simulator)\n\n"
            'Link to flatfile:                <A HREF="flatfile.html">flatfile</A>\n'
            + (f"Link to HOST reports:            {links}\n" if links else ""),
        )
        for h in self.hosts:
            self._atomic(self._host_file(h), f"<pre>\nHost summary report(s) for host={h}\n\n")

    def _host_file(self, host: str) -> str:
        return f"{host}.html"  # vdbench names a host report after its hd= name

    def _atomic(self, name: str, text: str) -> None:
        tmp = self.out_dir / f".{name}.new"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, self.out_dir / name)

    def _append(self, name: str, text: str) -> None:
        with open(self.out_dir / name, "a", encoding="utf-8") as fh:
            fh.write(text)

    def _run(self, name: str) -> RunDefinition:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(f"no run definition {name!r}")

    def begin_run(self, name: str, when: float) -> None:
        r = self._run(name)
        self._rows[name] = []
        self._interval[name] = 0
        tm = time.strftime("%H:%M:%S", time.gmtime(when))
        start = f"\n<i><b>{tm}.000 Starting RD={name}; I/O rate: {r.iorate}; elapsed={r.elapsed}</b></i>\n"
        for h in self.hosts:
            self._host_rows[(name, h)] = []
            self._append(self._host_file(h), start + _summary_table_header(when))

    def interval(self, name: str, per_host: dict[str, HostInterval] | HostInterval, when: float) -> HostInterval:
        """Append one interval: a host report line per host and the flatfile row (the hosts'
        aggregate). ``per_host`` is one HostInterval for a single-host run. Returns the row written."""
        r = self._run(name)
        self._interval[name] += 1
        n = self._interval[name]
        if isinstance(per_host, HostInterval):
            parts = {"": per_host}
        else:
            parts = per_host
        for h, iv in parts.items():
            if h:
                self._host_rows[(name, h)].append(iv)
                self._append(self._host_file(h), summary_line(n, iv, when))
        total = aggregate(list(parts.values())) if len(parts) > 1 else next(iter(parts.values()))
        self._rows[name].append(total)
        self._append("flatfile.html", flatfile_row(r, n, total, when))
        return total

    def end_run(self, name: str, when: float, first: int = 2) -> HostInterval:
        """The run's summary rows (``avg_<first>-<last>``, vdbench leaves the first interval out)."""
        r = self._run(name)
        rows = self._rows[name]
        last = len(rows)
        first = min(first, last) if last else 1
        label = f"avg_{first}-{last}"
        for h in self.hosts:
            hrows = self._host_rows.get((name, h), [])
            self._append(self._host_file(h), summary_line(label, average(hrows[first - 1 :]), when))
        avg = average(rows[first - 1 :])
        self._append("flatfile.html", flatfile_row(r, label, avg, when))
        return avg
