"""HTML and text of the Stargate port-2009 pages, rendered from storage views.

Faithful to the published port-2009 pages (docs/stargate-simulator.md, "Pages"): a sequence of ``<table>``s, section
titles as one-cell grey banner tables whose words are joined by ``&nbsp;``, ``<th>`` headers and
``<td>`` data, the Hosted VDisks table's two-row grouped header, blank cells for zero, integer
values, percents with ``%``, the per-vdisk sections as bold ``VDisk <id> <Section>`` headings
followed by bordered tables, 20-cell bar graphs, and the labels of each page build.

Rendering is plain string building (the exporter's benchmark scrapes 1,000 detail pages).
"""

from __future__ import annotations

import html
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# Prism's names for a disk (its disk_address and NFS file) live with the Prism simulator.
from ioparallax.simulators.prism.model import disk_address, nfs_file_path  # noqa: F401
from ioparallax.simulators.scenario.storage import (
    LATENCY_BUCKET_EDGES_S,
    READ_SOURCE_ROWS,
    SIZE_BUCKET_EDGES_B,
    UPMIGRATION_WINDOWS_S,
    WRITE_DESTINATION_ROWS,
    WSS_WINDOWS_S,
    Histogram,
    VDiskStorageView,
    fold,
)

KB = 1024  # KB/s, Outstanding sizeKB, Oplog KB
MB = 1024 * 1024  # MB/s (IO Rate, Data), WSS (MB)
GB = 1024**3

BUILD_VERSIONS = {
    2014: "el6-release-danube-4.0.2.1-stable-3a4c1b0e8f7d",
    2015: "el6-release-danube-4.5.1-stable-7e1b2f9c0d3a",
    2016: "el7.3-release-euphrates-5.0.2-stable-5d92a1c6b8e4",
}
MAIN_TITLE = {2014: "Hosted Active VDisks", 2015: "Hosted VDisks", 2016: "Hosted VDisks"}


def bucket_labels(edges: Sequence[float], unit: Callable[[float], str]) -> tuple[str, ...]:
    """The page's label of each bucket between ``edges``: ``lo <= x < hi``, each edge in ``unit``
    but the first (``0``) and the last (``inf``)."""

    def edge(value: float) -> str:
        return "0" if value == 0 else "inf" if math.isinf(value) else unit(value)

    return tuple(f"{edge(lo)} <= x < {edge(hi)}" for lo, hi in zip(edges, edges[1:]))


#: The buckets' labels as the page writes them, from the storage view's own bucket edges.
LATENCY_LABELS = bucket_labels(LATENCY_BUCKET_EDGES_S, lambda s: f"{s * 1000:g} ms")
SIZE_LABELS = bucket_labels(SIZE_BUCKET_EDGES_B, lambda b: f"{b / MB:g} MB" if b >= MB else f"{b / KB:g} kB")

BAR_CELLS = 20
BAR_FILLED = '<td bgcolor="#3b6fb6" width="6"></td>'
BAR_EMPTY = '<td width="6"></td>'


def detail_href(build: int, vdisk_id: int) -> str:
    """The href the main page puts on a vdisk id. It differs per build on purpose: clients must
    follow the link, not build the URL (``?vdisk_id=N`` is only a guess at the real form; see
    docs/stargate-simulator.md, "HTML conventions reproduced")."""
    if build == 2014:
        return f"/vdisk_stats?vdisk_id={vdisk_id}"
    if build == 2015:
        return f"/vdisk_stats?vdisk_id={vdisk_id}&amp;stats=1"
    return f"/vdisk_stats?id={vdisk_id}&amp;detail=true"


def detail_query_id(build: int, query: dict[str, list[str]]) -> int | None:
    """The vdisk id a detail URL of this build asks for (None: not this build's form)."""
    try:
        if build == 2014:
            return int(query["vdisk_id"][0])
        if build == 2015:
            if query.get("stats") == ["1"]:
                return int(query["vdisk_id"][0])
            return None
        if query.get("detail") == ["true"]:
            return int(query["id"][0])
    except (KeyError, ValueError, IndexError):
        return None
    return None


# --------------------------------------------------------------------------------------------
# Cell formatting


def esc(text: str) -> str:
    return html.escape(text, quote=False)


def num(x: float) -> str:
    """An integer cell: rounded half up, blank when it rounds to zero."""
    n = int(math.floor(x + 0.5))
    return str(n) if n else ""


def pct(x: float | None) -> str:
    """A percent cell from an unrounded percent (0-100): ``NN%``, blank when it rounds to zero."""
    if x is None:
        return ""
    n = int(math.floor(x + 0.5))
    return f"{n}%" if n else ""


_BARS = tuple(BAR_FILLED * n + BAR_EMPTY * (BAR_CELLS - n) for n in range(BAR_CELLS + 1))


def bar(percent: float) -> str:
    """20 cells, round(percent / 5) of them filled (percent unrounded)."""
    return _BARS[max(0, min(BAR_CELLS, int(math.floor(percent / 5.0 + 0.5))))]


def banner(title: str) -> str:
    words = "&nbsp;".join(esc(w) for w in title.split())
    return (
        f'<table width="100%" bgcolor="#d8d8d8" cellpadding="3"><tr><td align="center">'
        f'<font size="+1">{words}</font></td></tr></table>\n'
    )


def heading(build: int, text: str) -> str:
    # Bold heading; the tag differs between builds (clients must find tables by text).
    if build == 2016:
        return f"<br><h4>{esc(text)}</h4>\n"
    return f"<br><b>{esc(text)}</b><br>\n"


def row(cells: Iterable[str], tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in cells) + "</tr>\n"


# --------------------------------------------------------------------------------------------
# Main page


@dataclass(frozen=True)
class CvmInfo:
    name: str
    handle: str  # ip:port
    svm_id: int
    disks: tuple[tuple[int, int, int], ...]  # (disk id, avail bytes, total bytes)


def _outstanding(count: float, size_bytes: float) -> str:
    return f"{int(math.floor(count + 0.5))}, {int(math.floor(size_bytes / KB + 0.5))}KB"


def hosted_vdisk_row(v: VDiskStorageView, build: int) -> str:
    d = v.disk
    oplog_kbs = v.oplog_drain_bytes_s / KB
    random = "" if v.ops_s <= 0 else str(int(math.floor(v.random_ops_s + 0.5)))
    avg_size = "" if v.ops_s <= 0 else num(v.op_size_bytes)
    cells = (
        f'<a href="{detail_href(build, d.vdisk_id)}">{d.vdisk_id}</a>',
        esc(f"{d.vdisk_name} ({d.vdisk_uuid})"),
        num(v.usage_bytes / GB),
        num(v.dedup_bytes / GB),
        num(v.oplog_bytes / KB),
        num(v.oplog_fragments),
        num(v.oplog_drain_ops_s),
        num(oplog_kbs),
        _outstanding(v.read_outstanding, v.read_outstanding * v.read_op_size_bytes),
        _outstanding(v.write_outstanding, v.write_outstanding * v.write_op_size_bytes),
        num(v.estore_outstanding),
        num(v.read_ops_s),
        num(v.write_ops_s),
        "",  # errors: the scenarios have none
        random,
        num(v.read_bytes_s / KB),
        num(v.write_bytes_s / KB),
        num(v.latency_s * 1e6),
        avg_size,
        num(v.qlen),
        num(v.busy_ratio * 100.0),
    )
    return row(cells)


HOSTED_HEADER = (
    "<tr><th>VDisk Id</th><th>VDisk Name</th><th>Usage (GB)</th><th>Dedup (GB)</th>"
    '<th colspan="4">Oplog</th><th colspan="3">Outstanding ops</th><th colspan="4">Ops/s</th>'
    '<th colspan="2">KB/s</th><th>Avg latency (usec)</th><th>Avg op size</th><th>Avg qlen</th>'
    "<th>% busy</th></tr>\n"
    "<tr><th></th><th></th><th></th><th></th>"
    "<th>KB</th><th>Fragments</th><th>Ops/s</th><th>KB/s</th>"
    "<th>Read</th><th>Write</th><th>Estore</th>"
    "<th>Read</th><th>Write</th><th>Error</th><th>Random</th>"
    "<th>Read</th><th>Write</th>"
    "<th></th><th></th><th></th><th></th></tr>\n"
)


def render_main(
    *,
    build: int,
    cvm: CvmInfo,
    cluster: Sequence[CvmInfo],
    views: Sequence[VDiskStorageView],
    start_time: float,
    now: float,
    content_cache_hit_pct: float,
    content_cache_mb: int,
) -> str:
    out = ["<html><head><title>Stargate</title></head><body>\n"]
    out.append(banner("Overview"))
    started = time.strftime("%Y%m%d-%H:%M:%S", time.gmtime(start_time))
    uptime = int(now - start_time)
    qos = len(views)
    overview = (
        ("Start time", f"{started} GMT (up {uptime} s)"),
        ("Build version", BUILD_VERSIONS[build]),
        ("Stargate handle", cvm.handle),
        ("SVM id", str(cvm.svm_id)),
        ("Incarnation id", str(int(start_time) * 1000 + cvm.svm_id)),
        ("Content cache hits", f"{int(math.floor(content_cache_hit_pct + 0.5))}%"),
        ("Content cache memory usage (MB)", str(content_cache_mb)),
        ("QoS Queue (size/admitted)", f"0/{qos}"),
    )
    out.append('<table border="0" cellpadding="2">\n')
    for k, val in overview:
        out.append(f"<tr><td><b>{esc(k)}</b></td><td>{esc(val)}</td></tr>\n")
    out.append("</table>\n")

    out.append(banner("Cluster State"))
    out.append('<table border="1" cellpadding="3">\n')
    out.append(row(("SVM Id", "Stargate Handle", "Disks"), "th"))
    for c in cluster:
        disks = " ".join(f"{did} ({avail // GB}/{total // GB})" for did, avail, total in c.disks)
        out.append(row((str(c.svm_id), f'<a href="http://{c.handle}">{c.handle}</a>', disks)))
    out.append("</table>\n")

    # The NFS worker's per-vdisk table comes before Hosted VDisks and also names vdisks: clients
    # must find tables by their banner, not by position or by a "VDisk" column.
    out.append(banner("NFS Worker"))
    out.append('<table border="1" cellpadding="2">\n')
    out.append(row(("VDisk Name", "Outstanding ops", "Ops/s", "KB/s"), "th"))
    for v in sorted(views, key=lambda v: v.disk.vdisk_name):
        out.append(
            row((esc(v.disk.vdisk_name), num(v.qlen), num(v.ops_s), num((v.read_bytes_s + v.write_bytes_s) / KB)))
        )
    out.append("</table>\n")

    out.append(banner(MAIN_TITLE[build]))
    out.append('<table border="1" cellpadding="2">\n')
    out.append(HOSTED_HEADER)
    for v in sorted(views, key=lambda v: v.disk.vdisk_id):
        out.append(hosted_vdisk_row(v, build))
    out.append("</table>\n</body></html>\n")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# Per-vdisk view


def _kio(ops_s: float) -> str:
    return num(ops_s / 1000.0)


def _histogram_table(h: Histogram, labels: Sequence[str], second_header: str, direction: str, scale: float) -> str:
    out = ['<table border="1" cellpadding="2">\n']
    out.append(row(("Latency Range", second_header, f"Number of {direction} IOs", f"Percent of {direction} IOs"), "th"))
    percents = h.percents
    for label, count, avg, p in zip(labels, h.counts, h.averages, percents):
        if count:
            out.append(
                f"<tr><td>{esc(label)}</td><td>{num(avg * scale)}</td><td>{count}</td><td>{pct(p)}</td>{bar(p)}</tr>\n"
            )
        else:
            out.append(f"<tr><td>{esc(label)}</td><td></td><td></td><td></td>{_BARS[0]}</tr>\n")
    total = h.total
    mean = str(int(h.average * scale)) if total else ""  # Total: count-weighted mean, truncated
    out.append(row(("Total", mean, str(total) if total else "", "")))
    out.append("</table>\n")
    return "".join(out)


def _source_table(first: str, rows: Sequence[tuple[str, float]]) -> str:
    total = sum(b for _, b in rows)
    out = ['<table border="1" cellpadding="2">\n', row((first, "Data (MB/s)", "Percent"), "th")]
    for label, b in rows:
        out.append(row((esc(label), num(b / MB), pct(100.0 * b / total if total else 0.0))))
    out.append(row(("Total", num(total / MB), "100%" if total else "")))
    out.append("</table>\n")
    return "".join(out)


def render_vdisk_sections(v: VDiskStorageView, build: int) -> str:
    vid = v.disk.vdisk_id
    out = []
    # 1. Ops and Randomness
    out.append(heading(build, f"VDisk {vid} Ops and Randomness"))
    out.append('<table border="1" cellpadding="2">\n')
    out.append(row(("", "Read", "Write", "Total"), "th"))
    out.append(row(("IOPS (kIO/s)", _kio(v.read_ops_s), _kio(v.write_ops_s), _kio(v.ops_s))))
    out.append(
        row(
            (
                "IO Rate (MB/s)",
                num(v.read_bytes_s / MB),
                num(v.write_bytes_s / MB),
                num((v.read_bytes_s + v.write_bytes_s) / MB),
            )
        )
    )
    rr, wr = v.read_random_ratio, v.write_random_ratio
    out.append(row(("Random %", pct(None if rr is None else 100.0 * rr), pct(None if wr is None else 100.0 * wr), "")))
    out.append(
        row(
            (
                "Sequential %",
                pct(None if rr is None else 100.0 * (1 - rr)),
                pct(None if wr is None else 100.0 * (1 - wr)),
                "",
            )
        )
    )
    out.append("</table>\n")
    # 2. Frontend latency
    out.append(heading(build, f"VDisk {vid} Frontend Read Latency"))
    out.append(_histogram_table(v.read_latency_hist, LATENCY_LABELS, "Average Bucket Latency (usec)", "Read", 1e6))
    out.append(heading(build, f"VDisk {vid} Frontend Write Latency"))
    out.append(_histogram_table(v.write_latency_hist, LATENCY_LABELS, "Average Bucket Latency (usec)", "Write", 1e6))
    # 3. Size distributions (first header still reads "Latency Range": a quirk of the page)
    out.append(heading(build, f"VDisk {vid} Read Size Distribution"))
    out.append(_histogram_table(v.read_size_hist, SIZE_LABELS, "Average Bucket Size", "Read", 1.0))
    out.append(heading(build, f"VDisk {vid} Write Size Distribution"))
    out.append(_histogram_table(v.write_size_hist, SIZE_LABELS, "Average Bucket Size", "Write", 1.0))
    # 4. Working sets (the 1 hr column literally reads 0 until an hour of history exists)
    out.append(heading(build, f"VDisk {vid} Working Set Sizes"))
    out.append('<table border="1" cellpadding="2">\n')
    out.append(row(("", "2 min", "1 hr"), "th"))
    short, long_ = WSS_WINDOWS_S
    for kind, label in (("read", "Read WSS (MB)"), ("write", "Write WSS (MB)"), ("union", "Union WSS (MB)")):
        out.append(
            row(
                (
                    label,
                    str(int(math.floor(v.wss[(kind, short)] / MB + 0.5))),
                    str(int(math.floor(v.wss[(kind, long_)] / MB + 0.5))),
                )
            )
        )
    out.append("</table>\n")
    # 5. Read source, 6. Write destination
    out.append(heading(build, f"VDisk {vid} Read Source"))
    out.append(_source_table("Source", fold(v.read_sources, READ_SOURCE_ROWS[build])))
    out.append(heading(build, f"VDisk {vid} Write Destination"))
    out.append(_source_table("Destination", fold(v.write_destinations, WRITE_DESTINATION_ROWS[build])))
    # 7. Up-migration: header-less rows
    out.append(heading(build, f"VDisk {vid} Extent Group Up-Migration"))
    out.append('<table border="1" cellpadding="2">\n')
    for span in UPMIGRATION_WINDOWS_S:
        out.append(row((f"Last {span} seconds", num(v.upmigrations.get(span, 0)))))
    out.append("</table>\n")
    return "".join(out)


def render_vdisk_page(views: Sequence[VDiskStorageView], build: int) -> str:
    out = ["<html><head><title>VDisk Stats</title></head><body>\n", banner("VDisk Stats")]
    for v in views:
        out.append(render_vdisk_sections(v, build))
    out.append("</body></html>\n")
    return "".join(out)


def render_not_hosted(vdisk_id: int) -> str:
    return (
        f"<html><head><title>VDisk Stats</title></head><body>\n{banner('VDisk Stats')}"
        f"<p>VDisk {vdisk_id} is not hosted by this Stargate</p>\n</body></html>\n"
    )


# --------------------------------------------------------------------------------------------
# /h/vars


def vars_lines(views: Sequence[VDiskStorageView], counters: dict[str, int]) -> list[tuple[str, int]]:
    """``name value`` pairs: totals over the hosted vdisks now, per-vdisk gauges, and cumulative
    counters since the simulated Stargate started (``counters``)."""
    out: list[tuple[str, int]] = []
    tot = lambda f: int(round(sum(f(v) for v in views)))  # noqa: E731
    out.append(("stargate/vdisk/total/hosted_vdisks", len(views)))
    out.append(("stargate/vdisk/total/oplog_bytes", tot(lambda v: v.oplog_bytes)))
    out.append(("stargate/vdisk/total/oplog_fragments", tot(lambda v: v.oplog_fragments)))
    out.append(("stargate/vdisk/total/outstanding_ops", tot(lambda v: v.qlen)))
    for name, value in sorted(counters.items()):
        out.append((name, value))
    for v in sorted(views, key=lambda v: v.disk.vdisk_id):
        p = f"stargate/vdisk/{v.disk.vdisk_id}"
        out.append((f"{p}/oplog_bytes", int(round(v.oplog_bytes))))
        out.append((f"{p}/oplog_fragments", int(round(v.oplog_fragments))))
        out.append((f"{p}/read_ops_per_sec", int(round(v.read_ops_s))))
        out.append((f"{p}/write_ops_per_sec", int(round(v.write_ops_s))))
    return out


def render_vars(lines: Sequence[tuple[str, int]]) -> str:
    return "".join(f"{k} {v}\n" for k, v in lines)
