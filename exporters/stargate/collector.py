"""One probe of a CVM (or, with discovery, of its whole cluster) as Prometheus metric families.

Collected when Prometheus scrapes: the main page, then every hosted vdisk's detail view (followed
from the page's links) concurrently over one keep-alive session. A failing detail page marks that
vdisk (``stargate_vdisk_detail_up 0``), not the target; a failing main page gives
``stargate_up 0`` and one log line naming the target and the cause, and no vdisk values.
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from ..common.exposition import Exposition, Family, GaugeHistogram, escape_label_value as _lv
from .prism import VDiskNames
from .parse import MainPage, StargatePageError, VDiskDetail, VDiskRow, parse_main_page, parse_vdisk_page

log = logging.getLogger(__name__)

DEFAULT_PORT = 2009
#: Detail pages fetched at once. Enough to overlap network waits; more threads only fight over the
#: GIL (parsing is CPU-bound; lxml's own parse runs without the GIL, so a few threads also use a
#: second core). Measured with bench/stargate_scrape.py, see docs/stargate.md.
DEFAULT_CONCURRENCY = 8


def target_url(target: str) -> str:
    """``10.0.0.5`` / ``10.0.0.5:2009`` / ``[fd00::5]:2009`` / ``http://10.0.0.5:2009/`` -> base URL."""
    t = target.strip()
    if "://" in t:
        return t.rstrip("/") + "/"
    host, sep, port = t.rpartition(":")
    if sep and host and port.isdigit() and (not host.startswith("[") or host.endswith("]")):
        return f"http://{t}/"
    return f"http://{t}:{DEFAULT_PORT}/"


class FetchError(Exception):
    pass


class HttpClient:
    """Keep-alive HTTP/1.1 GETs, one connection per thread and host (the transport layer).

    http.client directly: for a thousand small pages per probe, requests' per-call machinery
    costs more CPU than parsing them."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _conn(self, scheme: str, netloc: str, timeout: float) -> http.client.HTTPConnection:
        conns = self._local.__dict__.setdefault("conns", {})
        conn = conns.get((scheme, netloc))
        if conn is None:
            cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            conn = conns[(scheme, netloc)] = cls(netloc, timeout=timeout)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self, scheme: str, netloc: str) -> None:
        conn = self._local.__dict__.get("conns", {}).pop((scheme, netloc), None)
        if conn is not None:
            conn.close()

    def get_text(self, url: str, timeout: float) -> str:
        if timeout <= 0:
            raise FetchError(f"{url}: no time left before the probe deadline")
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        for attempt in (1, 2):
            conn = self._conn(parts.scheme, parts.netloc, timeout)
            try:
                conn.request("GET", path, headers={"Accept": "text/html"})
                resp = conn.getresponse()
                body = resp.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                # A kept-alive connection the server closed: retry once on a new one.
                self._drop(parts.scheme, parts.netloc)
                if attempt == 2:
                    raise FetchError(f"{url}: connection closed by the server ({exc.__class__.__name__})") from None
            except ConnectionRefusedError:
                self._drop(parts.scheme, parts.netloc)
                raise FetchError(f"{url}: connection refused") from None
            except (socket.timeout, TimeoutError):
                self._drop(parts.scheme, parts.netloc)
                raise FetchError(f"{url}: timed out after {timeout:.1f} s") from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop(parts.scheme, parts.netloc)
                raise FetchError(f"{url}: {exc.__class__.__name__}: {exc}") from None
        if resp.status != 200:
            raise FetchError(f"{url}: HTTP {resp.status}")
        if resp.getheader("Content-Length") is not None and len(body) < int(resp.getheader("Content-Length")):
            raise FetchError(f"{url}: response cut off")
        return body.decode("utf-8", "replace")


class RequestsClient:
    """The same interface over a requests.Session (tests, or where a proxy/TLS set-up needs it)."""

    def __init__(self, session: requests.Session) -> None:
        self.session = session

    def get_text(self, url: str, timeout: float) -> str:
        return fetch(self.session, url, timeout)


def fetch(session: requests.Session, url: str, timeout: float) -> str:
    if timeout <= 0:
        raise FetchError(f"{url}: no time left before the probe deadline")
    try:
        r = session.get(url, timeout=timeout)
    except requests.exceptions.ConnectionError as exc:
        cause = "connection refused" if "refused" in str(exc).lower() else f"connection failed: {exc.__class__.__name__}"
        raise FetchError(f"{url}: {cause}") from None
    except requests.exceptions.Timeout:
        raise FetchError(f"{url}: timed out after {timeout:.1f} s") from None
    except requests.RequestException as exc:
        raise FetchError(f"{url}: {exc.__class__.__name__}: {exc}") from None
    if r.status_code != 200:
        raise FetchError(f"{url}: HTTP {r.status_code}")
    return r.text


@dataclass
class CvmResult:
    url: str
    page: MainPage | None
    error: str = ""


@dataclass
class ProbeResult:
    target: str
    cvms: list[CvmResult]
    vdisks: dict[str, tuple[str, VDiskRow]]              # vdisk id -> (cvm url, main-page row)
    details: dict[str, VDiskDetail | None]              # vdisk id -> detail (None: failed)
    detail_errors: dict[str, str]
    duration: float
    up: bool
    error: str = ""


def probe(client: HttpClient | RequestsClient, target: str, deadline: float, discover: bool = False,
          concurrency: int = DEFAULT_CONCURRENCY) -> ProbeResult:
    start = time.monotonic()
    base = target_url(target)
    first = _main(client, base, deadline)
    cvms = [first]
    if discover and first.page is not None:
        others = [u.rstrip("/") + "/" for u in first.page.cvm_urls if u.rstrip("/") + "/" != base]
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(others) or 1))) as pool:
            cvms.extend(pool.map(lambda u: _main(client, u, deadline), others))
    # Merge by vdisk id: a vdisk that moved between two main-page reads is listed by two CVMs;
    # keep the first listing (the probed target's own page is read first) so it counts once.
    vdisks: dict[str, tuple[str, VDiskRow]] = {}
    for cvm in cvms:
        if cvm.page is None:
            continue
        for row in cvm.page.vdisks:
            vdisks.setdefault(row.vdisk_id, (cvm.url, row))
    details: dict[str, VDiskDetail | None] = {}
    errors: dict[str, str] = {}
    if vdisks:
        with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(vdisks)))) as pool:
            futures = {vid: pool.submit(_detail, client, row.href, deadline) for vid, (_, row) in vdisks.items()}
            wait(futures.values(), timeout=max(0.0, deadline - time.monotonic()))
            for vid, fut in futures.items():
                if not fut.done():
                    fut.cancel()
                    details[vid], errors[vid] = None, "timed out before the probe deadline"
                    continue
                detail, err = fut.result()
                details[vid] = detail
                if err:
                    errors[vid] = err
    up = first.page is not None
    for vid, err in errors.items():
        log.warning("stargate target %s: vdisk %s detail view failed: %s", target, vid, err)
    return ProbeResult(target, cvms, vdisks, details, errors, time.monotonic() - start, up, first.error)


def _main(client: HttpClient | RequestsClient, url: str, deadline: float) -> CvmResult:
    try:
        return CvmResult(url, parse_main_page(client.get_text(url, deadline - time.monotonic()), url))
    except (FetchError, StargatePageError) as exc:
        return CvmResult(url, None, str(exc) if isinstance(exc, FetchError) else f"{url}: {exc}")


def _detail(client: HttpClient | RequestsClient, url: str, deadline: float) -> tuple[VDiskDetail | None, str]:
    try:
        return parse_vdisk_page(client.get_text(url, deadline - time.monotonic())), ""
    except (FetchError, StargatePageError) as exc:
        return None, str(exc)


# --------------------------------------------------------------------------------- exposition
# Written directly in the text format (0.0.4) with exporters.common.exposition: a 1,000-vdisk
# probe is ~98,000 sample lines, and prometheus_client's families plus generate_latest cost ~1 s
# of CPU for them (a Sample object per line, labels re-escaped on every line); here each vdisk's
# label block is escaped once and each line is one f-string (~0.12 s). The layout is
# generate_latest's, including the gauge histograms. Values are floats (1.0, not 1), as
# generate_latest wrote them.


def _gauge(name: str, help_text: str) -> Family:
    return Family(name, "gauge", help_text)


_SIMPLE = {   # VDiskRow attribute -> (metric, HELP naming the page's field)
    "usage_bytes": ("stargate_vdisk_usage_bytes", "Usage (GB) of the vdisk, in bytes."),
    "dedup_bytes": ("stargate_vdisk_dedup_bytes", "Dedup (GB) of the vdisk, in bytes (computed periodically, may be stale)."),
    "oplog_bytes": ("stargate_vdisk_oplog_bytes", "Oplog KB: data held in the oplog for this vdisk, in bytes."),
    "oplog_fragments": ("stargate_vdisk_oplog_fragments", "Oplog Fragments."),
    "oplog_drain_ops_per_second": ("stargate_vdisk_oplog_drain_ops_per_second", "Oplog Ops/s: the oplog drain rate."),
    "oplog_drain_bytes_per_second": ("stargate_vdisk_oplog_drain_bytes_per_second", "Oplog KB/s: the oplog drain rate, in bytes/s."),
    "outstanding_estore_ops": ("stargate_vdisk_outstanding_estore_ops", "Outstanding ops - Estore."),
    "read_ops_per_second": ("stargate_vdisk_read_ops_per_second", "Ops/s - Read (live rate of the page)."),
    "write_ops_per_second": ("stargate_vdisk_write_ops_per_second", "Ops/s - Write (live rate of the page)."),
    "error_ops_per_second": ("stargate_vdisk_error_ops_per_second", "Ops/s - Error."),
    "random_ops_per_second": ("stargate_vdisk_random_ops_per_second", "Ops/s - Random."),
    "read_bytes_per_second": ("stargate_vdisk_read_bytes_per_second", "KB/s - Read, in bytes/s."),
    "write_bytes_per_second": ("stargate_vdisk_write_bytes_per_second", "KB/s - Write, in bytes/s."),
    "latency_seconds": ("stargate_vdisk_latency_seconds", "Avg latency (usec), in seconds."),
    "op_size_bytes": ("stargate_vdisk_op_size_bytes", "Avg op size, in bytes."),
    "queue_length": ("stargate_vdisk_queue_length", "Avg qlen."),
    "busy_ratio": ("stargate_vdisk_busy_ratio", "% busy, as a ratio 0-1."),
}

_HISTOGRAMS = {   # VDiskDetail attribute -> (metric, HELP)
    "read_latency": ("stargate_vdisk_read_latency_seconds", "Frontend Read Latency histogram of the page's recent window (not cumulative)."),
    "write_latency": ("stargate_vdisk_write_latency_seconds", "Frontend Write Latency histogram of the page's recent window (not cumulative)."),
    "read_size": ("stargate_vdisk_read_size_bytes", "Read Size Distribution of the page's recent window (not cumulative)."),
    "write_size": ("stargate_vdisk_write_size_bytes", "Write Size Distribution of the page's recent window (not cumulative)."),
}


class StargateCollector:
    """The exposition of one probe result, built fresh for every scrape (nothing is kept
    between probes but the Prism mapping, which is inventory). ``vdisk_names``: a
    :class:`VDiskNames` (YAML and Prism), or a plain vdisk id -> {"vm", "disk"} mapping."""

    def __init__(self, result: ProbeResult, vdisk_names: VDiskNames | dict[str, dict[str, str]] | None = None):
        self.result = result
        self.names = vdisk_names if isinstance(vdisk_names, VDiskNames) else VDiskNames(vdisk_names or {})

    def render(self) -> bytes:
        out = Exposition()
        out.add(*self._families())
        return out.render()

    def _families(self) -> list[Family | GaugeHistogram]:
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
                info.add(f'cvm="{cvm}",build_version="{_lv(ov.get("Build version", ""))}",'
                         f'svm_id="{_lv(ov.get("SVM id", ""))}"', 1.0)
            else:
                log.warning("stargate target %s: main page failed: %s", r.target, c.error)
        fams = [up, duration, cvm_up, info]
        if self.names.prism_up is not None:
            prism = _gauge("stargate_prism_up", "1 if the last Prism v2 virtual_disks request (vdisk -> VM names, "
                                                "cached as inventory for prism.refresh_interval) succeeded, else 0.")
            prism.add("", 1.0 if self.names.prism_up else 0.0)
            fams.append(prism)
        if r.up:
            fams.extend(self._vdisks())
        return fams

    def _vdisks(self) -> list[Family | GaugeHistogram]:
        r = self.result
        vinfo = _gauge("stargate_vdisk_info", "Hosted vdisks (value 1): name, UUID and hosting CVM; vm, disk and "
                                              "disk_uuid (the VM disk's) when mapped (YAML, or Prism: cached inventory).")
        simple = [(attr, _gauge(name, doc)) for attr, (name, doc) in _SIMPLE.items()]
        outstanding = _gauge("stargate_vdisk_outstanding_ops", "Outstanding ops - Read/Write (count).")
        outstanding_b = _gauge("stargate_vdisk_outstanding_bytes", "Outstanding ops - Read/Write (sizeKB), in bytes.")
        detail_up = _gauge("stargate_vdisk_detail_up", "1 if the vdisk's detail view was read and parsed, else 0.")
        src = _gauge("stargate_vdisk_read_source_bytes_per_second", "Read Source: Data (MB/s) per source, in bytes/s (MB = 2^20).")
        src_r = _gauge("stargate_vdisk_read_source_ratio", "Read Source: Percent per source, as a ratio 0-1 (from unrounded bytes).")
        dst = _gauge("stargate_vdisk_write_destination_bytes_per_second", "Write Destination: Data (MB/s) per destination, in bytes/s.")
        dst_r = _gauge("stargate_vdisk_write_destination_ratio", "Write Destination: Percent per destination, as a ratio 0-1.")
        rnd = _gauge("stargate_vdisk_random_ratio", "Ops and Randomness: Random % per direction (the categorizer), as a ratio 0-1.")
        seq = _gauge("stargate_vdisk_sequential_ratio", "Ops and Randomness: Sequential % per direction, as a ratio 0-1.")
        wss = _gauge("stargate_vdisk_working_set_bytes", "Working Set Sizes (MB) per kind (read, write, union) and window (2m, 1h), in bytes.")
        upm = _gauge("stargate_vdisk_up_migrations", "Extent Group Up-Migration: extent groups ILM moved up in the last window.")
        hists = [(attr, GaugeHistogram(name, doc)) for attr, (name, doc) in _HISTOGRAMS.items()]
        for vid, (cvm_url, row) in sorted(r.vdisks.items(), key=lambda kv: int(kv[0])):
            names = self.names.lookup(vid, row.uuid)
            v = f'vdisk_id="{_lv(vid)}"'
            vinfo.add(f'{v},vdisk_name="{_lv(row.name)}",vdisk_uuid="{_lv(row.uuid)}",'
                      f'cvm="{_lv(cvm_url.split("://", 1)[-1].rstrip("/"))}",'
                      f'vm="{_lv(names.get("vm", ""))}",disk="{_lv(names.get("disk", ""))}",'
                      f'disk_uuid="{_lv(names.get("disk_uuid", ""))}"', 1.0)
            for attr, fam in simple:
                fam.add(v, getattr(row, attr))
            outstanding.add(f'{v},direction="read"', row.outstanding_read_ops)
            outstanding.add(f'{v},direction="write"', row.outstanding_write_ops)
            outstanding_b.add(f'{v},direction="read"', row.outstanding_read_bytes)
            outstanding_b.add(f'{v},direction="write"', row.outstanding_write_bytes)
            d = r.details.get(vid)
            detail_up.add(v, 1.0 if d is not None else 0.0)
            if d is None:
                continue
            for name, (rate, ratio) in d.read_sources.items():
                lbl = f'{v},source="{_lv(name)}"'
                src.add(lbl, rate)
                src_r.add(lbl, ratio)
            for name, (rate, ratio) in d.write_destinations.items():
                lbl = f'{v},destination="{_lv(name)}"'
                dst.add(lbl, rate)
                dst_r.add(lbl, ratio)
            for direction in ("read", "write"):
                ratio = getattr(d, f"{direction}_random_ratio")
                if ratio is not None:
                    rnd.add(f'{v},direction="{direction}"', ratio)
                ratio = getattr(d, f"{direction}_sequential_ratio")
                if ratio is not None:
                    seq.add(f'{v},direction="{direction}"', ratio)
            for (kind, window), value in d.working_set_bytes.items():
                wss.add(f'{v},kind="{_lv(kind)}",window="{_lv(window)}"', value)
            for window, value in d.up_migrations.items():
                upm.add(f'{v},window="{_lv(window)}"', value)
            for attr, hist in hists:
                h = getattr(d, attr)
                if h is not None:
                    hist.add(v, h.bounds, h.counts, h.sum)
        out = [vinfo, *(fam for _, fam in simple), outstanding, outstanding_b, detail_up,
               src, src_r, dst, dst_r, rnd, seq, wss, upm]
        out.extend(hist for _, hist in hists)
        return out
