"""The exposition of one Stargate probe: its metric families, built fresh for every scrape.

Written directly in the text format (0.0.4) with ioparallax.exporters.common.exposition: a 1,000-vdisk
probe is ~98,000 sample lines, and prometheus_client's families plus generate_latest cost ~1 s
of CPU for them (a Sample object per line, labels re-escaped on every line); here each vdisk's
label block is escaped once and each line is one f-string (~0.12 s). The layout is
generate_latest's, including the gauge histograms. Values are floats (1.0, not 1), as
generate_latest wrote them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from ioparallax.exporters.common.exposition import (
    Family,
    GaugeHistogram,
    escape_label_value as _lv,
    write_families,
)
from ioparallax.exporters.stargate.prism import VDiskNames
from ioparallax.exporters.stargate.target import ProbeResult


def _gauge(name: str, help_text: str) -> Family:
    return Family(name, "gauge", help_text)


#: The VDiskRow attributes shown as they are, stargate_vdisk_<attribute>, and their HELP (naming the page's field).
_SIMPLE = {
    "usage_bytes": "Usage (GB) of the vdisk, in bytes.",
    "dedup_bytes": "Dedup (GB) of the vdisk, in bytes (computed periodically, may be stale).",
    "oplog_bytes": "Oplog KB: data held in the oplog for this vdisk, in bytes.",
    "oplog_fragments": "Oplog Fragments.",
    "oplog_drain_ops_per_second": "Oplog Ops/s: the oplog drain rate.",
    "oplog_drain_bytes_per_second": "Oplog KB/s: the oplog drain rate, in bytes/s.",
    "outstanding_estore_ops": "Outstanding ops - Estore.",
    "read_ops_per_second": "Ops/s - Read (live rate of the page).",
    "write_ops_per_second": "Ops/s - Write (live rate of the page).",
    "error_ops_per_second": "Ops/s - Error.",
    "random_ops_per_second": "Ops/s - Random.",
    "read_bytes_per_second": "KB/s - Read, in bytes/s.",
    "write_bytes_per_second": "KB/s - Write, in bytes/s.",
    "latency_seconds": "Avg latency (usec), in seconds.",
    "op_size_bytes": "Avg op size, in bytes.",
    "queue_length": "Avg qlen.",
    "busy_ratio": "% busy, as a ratio 0-1.",
}

_HISTOGRAMS = {  # VDiskDetail attribute -> (metric, HELP)
    "read_latency": (
        "stargate_vdisk_read_latency_seconds",
        "Frontend Read Latency histogram of the page's recent window (not cumulative).",
    ),
    "write_latency": (
        "stargate_vdisk_write_latency_seconds",
        "Frontend Write Latency histogram of the page's recent window (not cumulative).",
    ),
    "read_size": (
        "stargate_vdisk_read_size_bytes",
        "Read Size Distribution of the page's recent window (not cumulative).",
    ),
    "write_size": (
        "stargate_vdisk_write_size_bytes",
        "Write Size Distribution of the page's recent window (not cumulative).",
    ),
}


#: Series of stargate_parse_unknown_field_pages per probe at most; the rest are summed into one
#: series with table="_other" (a page in a dialect we never saw must not flood Prometheus).
MAX_UNKNOWN_SERIES = 20


def _unknown_families(r: ProbeResult) -> list[Family]:
    total = _gauge(
        "stargate_parse_unknown_fields",
        "Distinct tables, rows, columns and cells on this probe's pages that ioparallax does not read "
        "(0: every field was read). Each is named in stargate_parse_unknown_field_pages and logged once "
        "per page build; capture the pages and report them (README: Reporting a page or answer "
        "ioparallax misreads).",
    )
    total.add("", float(len(r.unknown)))
    fam = _gauge(
        "stargate_parse_unknown_field_pages",
        "Pages of this probe holding a field ioparallax does not read (page: main or vdisk; table; "
        "kind: table, row, column, cell; item: as the page writes it, at most 60 characters). A detail "
        "view's column names are checked on one page in 16. At most 20 series; the rest are summed "
        'into table="_other".',
    )
    ranked = sorted(r.unknown.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ranked if len(ranked) <= MAX_UNKNOWN_SERIES else ranked[: MAX_UNKNOWN_SERIES - 1]
    for (page, table, kind, item), pages in shown:
        fam.add(f'page="{page}",table="{_lv(table)}",kind="{kind}",item="{_lv(item)}"', float(pages))
    if len(ranked) > MAX_UNKNOWN_SERIES:
        rest = sum(pages for _, pages in ranked[MAX_UNKNOWN_SERIES - 1 :])
        fam.add('page="",table="_other",kind="",item=""', float(rest))
    return [total, fam]


#: Probe answers written at once in this process. Writing one is pure Python (one core at a time
#: whatever the number of threads), and for 250 vdisks its lines, text and bytes are ~9 MB, so
#: 16 probes ending together and written together held ~16 x that at the peak
#: (bench/stargate_cluster.py, docs/stargate.md: Cluster scale). One at a time, in turn.
_WRITING = threading.Lock()


@dataclass(frozen=True)
class Collectors:
    """The expensive families that can be switched off (``--no-collector.histograms``,
    ``--no-collector.source-ratios``); the series each saves are in docs/stargate.md."""

    histograms: bool = True  # the four gauge histograms: 40 series per vdisk
    source_ratios: bool = True  # Percent of each read source / write destination (the bytes/s stay)


class StargateCollector:
    """The exposition of one probe result, built fresh for every scrape (nothing is kept
    between probes but the Prism mapping, which is inventory). ``vdisk_names``: a
    :class:`VDiskNames` (YAML and Prism), or a plain vdisk id -> {"vm", "disk"} mapping."""

    def __init__(
        self,
        result: ProbeResult,
        vdisk_names: VDiskNames | dict[str, dict[str, str]] | None = None,
        collectors: Collectors = Collectors(),
    ):
        self.result = result
        self.names = vdisk_names if isinstance(vdisk_names, VDiskNames) else VDiskNames(vdisk_names or {})
        self.collectors = collectors

    def render(self, deadline: float | None = None) -> bytes:
        """The answer's body; written when no other probe's is being written (see _WRITING), or
        at ``deadline`` (``time.monotonic()``) whatever the others do."""
        writing = _WRITING.acquire(timeout=-1 if deadline is None else max(0.0, deadline - time.monotonic()))
        try:
            return write_families(self._families())
        finally:
            if writing:
                _WRITING.release()

    def _families(self) -> Iterator[Family | GaugeHistogram]:
        r = self.result
        up = _gauge("stargate_up", "1 if the target CVM's main page was read and parsed, else 0.")
        up.add("", 1.0 if r.up else 0.0)
        duration = _gauge("stargate_scrape_duration_seconds", "Seconds the probe took.")
        duration.add("", r.duration)
        cvm_up = _gauge("stargate_cvm_up", "1 if this CVM's main page was read (discovery probes every CVM).")
        info = _gauge("stargate_cvm_info", "CVM facts from the Overview table (value 1).")
        for c in r.cvms:
            cvm = _lv(c.url.split("://", 1)[-1].rstrip("/"))
            cvm_up.add(f'cvm="{cvm}"', 1.0 if c.page else 0.0)
            if c.page:
                ov = c.page.overview
                info.add(
                    f'cvm="{cvm}",build_version="{_lv(ov.get("Build version", ""))}",'
                    f'svm_id="{_lv(ov.get("SVM id", ""))}"',
                    1.0,
                )
        rejected = _gauge(
            "stargate_rejected_rows",
            "Hosted VDisks rows and vdisk detail views of this probe rejected as "
            "garbage (non-finite, negative or absurd values, bad vdisk ids), "
            "each logged with the reason.",
        )
        rejected.add("", float(r.rejected))
        yield from (up, duration, cvm_up, info, rejected, *_unknown_families(r))
        if self.names.prism_up is not None:
            prism = _gauge(
                "stargate_prism_up",
                "1 if the last Prism v2 virtual_disks request (vdisk -> VM names, "
                "cached as inventory for prism.refresh_interval) succeeded, else 0.",
            )
            prism.add("", 1.0 if self.names.prism_up else 0.0)
            yield prism
        if r.up:
            yield from self._vdisks()

    def _vdisks(self) -> Iterator[Family | GaugeHistogram]:
        """The vdisk families, each filled over every vdisk and then given away (write_families
        writes it and lets its lines go before the next is filled)."""
        r = self.result
        # (label block, main-page row, detail) of each vdisk, in vdisk id order
        rows = []
        vinfo = _gauge(
            "stargate_vdisk_info",
            "Hosted vdisks (value 1): name, UUID and hosting CVM; vm, disk and "
            "disk_uuid (the VM disk's) when mapped (YAML, or Prism: cached inventory).",
        )
        for vid, (cvm_url, row) in sorted(r.vdisks.items(), key=lambda kv: int(kv[0])):
            names = self.names.lookup(vid, row.uuid)
            v = f'vdisk_id="{_lv(vid)}"'
            vinfo.add(
                f'{v},vdisk_name="{_lv(row.name)}",vdisk_uuid="{_lv(row.uuid)}",'
                f'cvm="{_lv(cvm_url.split("://", 1)[-1].rstrip("/"))}",'
                f'vm="{_lv(names.get("vm", ""))}",disk="{_lv(names.get("disk", ""))}",'
                f'disk_uuid="{_lv(names.get("disk_uuid", ""))}"',
                1.0,
            )
            rows.append((v, row, r.details.get(vid)))
        yield vinfo
        for attr, doc in _SIMPLE.items():
            fam = _gauge(f"stargate_vdisk_{attr}", doc)
            for v, row, _ in rows:
                fam.add(v, getattr(row, attr))
            yield fam
        outstanding = _gauge("stargate_vdisk_outstanding_ops", "Outstanding ops - Read/Write (count).")
        for v, row, _ in rows:
            outstanding.add(f'{v},direction="read"', row.outstanding_read_ops)
            outstanding.add(f'{v},direction="write"', row.outstanding_write_ops)
        yield outstanding
        outstanding_b = _gauge("stargate_vdisk_outstanding_bytes", "Outstanding ops - Read/Write (sizeKB), in bytes.")
        for v, row, _ in rows:
            outstanding_b.add(f'{v},direction="read"', row.outstanding_read_bytes)
            outstanding_b.add(f'{v},direction="write"', row.outstanding_write_bytes)
        yield outstanding_b
        detail_up = _gauge("stargate_vdisk_detail_up", "1 if the vdisk's detail view was read and parsed, else 0.")
        for v, _, d in rows:
            detail_up.add(v, 1.0 if d is not None else 0.0)
        yield detail_up
        details = [(v, d) for v, _, d in rows if d is not None]
        ratios = self.collectors.source_ratios
        for field, label, rate_name, rate_help, ratio_name, ratio_help in (
            (
                "read_sources",
                "source",
                "stargate_vdisk_read_source_bytes_per_second",
                "Read Source: Data (MB/s) per source, in bytes/s (MB = 2^20).",
                "stargate_vdisk_read_source_ratio",
                "Read Source: Percent per source, as a ratio 0-1 (from unrounded bytes).",
            ),
            (
                "write_destinations",
                "destination",
                "stargate_vdisk_write_destination_bytes_per_second",
                "Write Destination: Data (MB/s) per destination, in bytes/s.",
                "stargate_vdisk_write_destination_ratio",
                "Write Destination: Percent per destination, as a ratio 0-1.",
            ),
        ):
            rate_fam = _gauge(rate_name, rate_help)
            ratio_fam = _gauge(ratio_name, ratio_help)
            for v, d in details:
                for name, (rate, ratio) in getattr(d, field).items():
                    lbl = f'{v},{label}="{_lv(name)}"'
                    rate_fam.add(lbl, rate)
                    if ratios:
                        ratio_fam.add(lbl, ratio)
            yield rate_fam
            if ratios:
                yield ratio_fam
        for kind, doc in (
            ("random", "Ops and Randomness: Random % per direction (the categorizer), as a ratio 0-1."),
            ("sequential", "Ops and Randomness: Sequential % per direction, as a ratio 0-1."),
        ):
            fam = _gauge(f"stargate_vdisk_{kind}_ratio", doc)
            for v, d in details:
                for direction in ("read", "write"):
                    ratio = getattr(d, f"{direction}_{kind}_ratio")
                    if ratio is not None:
                        fam.add(f'{v},direction="{direction}"', ratio)
            yield fam
        wss = _gauge(
            "stargate_vdisk_working_set_bytes",
            "Working Set Sizes (MB) per kind (read, write, union) and window (2m, 1h), in bytes.",
        )
        for v, d in details:
            for (kind, window), value in d.working_set_bytes.items():
                wss.add(f'{v},kind="{_lv(kind)}",window="{_lv(window)}"', value)
        yield wss
        upm = _gauge(
            "stargate_vdisk_up_migrations", "Extent Group Up-Migration: extent groups ILM moved up in the last window."
        )
        for v, d in details:
            for window, value in d.up_migrations.items():
                upm.add(f'{v},window="{_lv(window)}"', value)
        yield upm
        if self.collectors.histograms:
            for attr, (name, doc) in _HISTOGRAMS.items():
                hist = GaugeHistogram(name, doc)
                for v, d in details:
                    h = getattr(d, attr)
                    if h is not None:
                        hist.add(v, h.bounds, h.counts, h.sum)
                yield hist
