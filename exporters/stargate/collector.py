"""One probe of a CVM (or, with discovery, of its whole cluster) as Prometheus metric families.

Collected when Prometheus scrapes: the main page, then every hosted vdisk's detail view (followed
from the page's links) concurrently over one keep-alive session. A failing detail page marks that
vdisk (``stargate_vdisk_detail_up 0``), not the target; a failing main page gives
``stargate_up 0`` and one log line naming the target and the cause, and no vdisk values.

One deadline bounds the probe (transport.Budget): every fetch runs in the probe's pool, the
request thread waits for them only until the deadline, then abandons them (their sockets are
shut down) and answers ``stargate_up 0`` with a "deadline exceeded" line naming what was pending.
Which URLs may be fetched at all is decided in targets.py.

With a :class:`~.parsepool.ParsePool` (``parse_workers``), the pages fetched by the probe's
threads are parsed in worker processes, shared by all probes, so concurrent probes use every
core; the detail views go over in batches as they arrive, and the deadline cancels the batches
still queued. Without one, each fetch thread parses its own page (in-process).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed, wait
from dataclasses import dataclass
from typing import cast

from ..common.exposition import Exposition, Family, GaugeHistogram, escape_label_value as _lv
from .parse import MainPage, StargatePageError, VDiskDetail, VDiskRow, parse_main_page, parse_vdisk_page
from .parsepool import DETAIL_BATCH, DetailResult, ParsePool
from .prism import VDiskNames
from .targets import Origin, TargetError, TargetPolicy, cluster_cvms, parse_target, same_origin_link
from .transport import Budget, DeadlineExceeded, FetchError, HttpClient, Limits, PageClient  # noqa: F401

log = logging.getLogger(__name__)

#: Detail pages fetched at once. Enough to overlap network waits; more threads only fight over the
#: GIL (parsing is CPU-bound; lxml's own parse runs without the GIL, so a few threads also use a
#: second core). Measured with bench/stargate_scrape.py, see docs/stargate.md.
DEFAULT_CONCURRENCY = 8


@dataclass
class CvmResult:
    url: str
    page: MainPage | None
    error: str = ""
    origin: Origin | None = None


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
    rejected: int = 0                                   # main-page rows and detail views rejected as garbage


#: Seconds kept for writing the exposition after the last fetch: a base, and per vdisk
#: (rendering a 1,000-vdisk probe takes ~0.12 s, see docs/stargate.md).
RENDER_RESERVE_SECONDS = 0.05
RENDER_RESERVE_PER_VDISK = 0.0002
#: Per-vdisk failures logged one by one in a probe; the rest are summed up in one line.
_LOGGED_DETAIL_ERRORS = 5


class _Deadline(Exception):
    def __init__(self, pending: str):
        self.pending = pending


def _await(futures: list[Future], budget: Budget, what: str) -> None:
    """Wait for ``futures`` until the budget's deadline; raise _Deadline naming what is pending."""
    _, pending = wait(futures, timeout=max(0.0, budget.remaining()))
    if pending:
        raise _Deadline(f"{len(pending)} of {len(futures)} {what} pending")


def probe(client: PageClient, target: str, deadline: float, discover: bool = False,
          concurrency: int = DEFAULT_CONCURRENCY, limits: Limits = Limits(),
          policy: TargetPolicy | None = None, discovery_ports: tuple[int, ...] = (),
          parse_pool: ParsePool | None = None) -> ProbeResult:
    """One probe: never raises for anything the target, its pages or the target string do;
    ends by ``deadline`` (``time.monotonic()``) whatever the servers do, leaving fetches still
    running in abandoned threads whose sockets are shut down. ``policy`` decides which Cluster
    State CVMs ``discover`` may visit (the target itself is checked by the caller).
    ``parse_pool``: parse the pages in its worker processes (None: in the fetch threads)."""
    start = time.monotonic()
    policy = policy if policy is not None else TargetPolicy.loopback()

    def failed(error: str, cvms: list[CvmResult] | None = None) -> ProbeResult:
        log.warning("stargate target %s: %s", target if target.isprintable() else repr(target), error)
        return ProbeResult(target, cvms or [], {}, {}, {}, time.monotonic() - start, False, error)

    try:
        t = parse_target(target)
    except TargetError as exc:
        return failed(f"bad target {target[:300]!r}: {exc}")
    budget = Budget(deadline - RENDER_RESERVE_SECONDS, limits)
    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="stargate-probe")
    cvms: list[CvmResult] = []
    try:
        # Fetched in the pool (abandoned at the deadline like any fetch), parsed here: a page
        # within body_size_limit parses in well under a second, and parsing the big main page in
        # this thread keeps its memory in one malloc arena (peak RSS ~20 MB lower in the bench).
        fut = pool.submit(_main, client, t.origin, t.path, budget, False)
        _await([fut], budget, f"main page {t.url}")
        first = _parse_main(fut.result(), parse_pool, budget)
        if budget.remaining() <= 0:
            raise _Deadline(f"main page {t.url} still being parsed")
        cvms.append(first)
        if first.page is None:
            return failed(f"main page failed: {first.error}", cvms)
        if discover:
            others, refused = cluster_cvms(t, first.page.cvm_urls, policy, discovery_ports)
            for reason in refused:
                log.warning("stargate target %s: %s; not followed", target, reason)
            futs = [pool.submit(_main, client, o, "/", budget, True, parse_pool) for o in others]
            try:
                _await(futs, budget, "Cluster State CVM main pages")
            finally:
                cvms.extend(cast(CvmResult, f.result()) if f.done() and not f.cancelled() else  # parse=True
                            CvmResult(o.url, None, f"{o.url}: deadline exceeded", o) for o, f in zip(others, futs))
        for cvm in cvms[1:]:
            if cvm.page is None:
                log.warning("stargate target %s: CVM main page failed: %s", target, cvm.error)
        # Merge by vdisk id: a vdisk that moved between two main-page reads is listed by two CVMs;
        # keep the first listing (the probed target's own page is read first) so it counts once.
        vdisks: dict[str, tuple[str, VDiskRow]] = {}
        origins: dict[str, Origin] = {}
        rejected = 0
        for cvm in cvms:
            if cvm.page is None or cvm.origin is None:   # a page read always has its origin
                continue
            for reason in cvm.page.rejected:
                log.warning("stargate target %s: %s: row rejected as garbage: %s", target, cvm.url, reason)
            rejected += len(cvm.page.rejected)
            for row in cvm.page.vdisks:
                if row.vdisk_id not in vdisks:
                    vdisks[row.vdisk_id] = (cvm.url, row)
                    origins[row.vdisk_id] = cvm.origin
        budget.deadline = min(budget.deadline, deadline - RENDER_RESERVE_SECONDS - RENDER_RESERVE_PER_VDISK * len(vdisks))
        pages = len(cvms) + len(vdisks)
        if pages > limits.max_pages:
            return failed(f"{len(cvms)} main pages and {len(vdisks)} vdisk detail views are over "
                          f"max_pages_per_probe ({limits.max_pages}); nothing more fetched", cvms)
        if parse_pool is None:
            dfuts = {vid: pool.submit(_detail, client, origins[vid], row.href, budget)
                     for vid, (_, row) in vdisks.items()}
            _await(list(dfuts.values()), budget, "vdisk detail views")
            results = {vid: fut.result() for vid, fut in dfuts.items()}
        else:
            results = _details_in_workers(pool, parse_pool, client, vdisks, origins, budget)
    except _Deadline as exc:
        budget.abort()
        return failed(f"deadline exceeded after {time.monotonic() - start:.2f} s: {exc.pending}", cvms)
    finally:
        # After the deadline the pool is abandoned, not joined (its sockets are shut down, so
        # its threads end soon); otherwise every fetch is done and joining takes no time.
        pool.shutdown(wait=not budget.aborted, cancel_futures=True)
        if not budget.aborted:
            budget.close()
    details: dict[str, VDiskDetail | None] = {}
    errors: dict[str, str] = {}
    for vid, (details[vid], err, garbage) in results.items():
        if err:
            errors[vid] = err
            rejected += garbage
    for n, (vid, err) in enumerate(errors.items()):
        if n < _LOGGED_DETAIL_ERRORS:
            log.warning("stargate target %s: vdisk %s detail view failed: %s", target, vid, err)
    if len(errors) > _LOGGED_DETAIL_ERRORS:
        log.warning("stargate target %s: %d more vdisk detail views failed", target, len(errors) - _LOGGED_DETAIL_ERRORS)
    return ProbeResult(target, cvms, vdisks, details, errors, time.monotonic() - start, True, "", rejected)


def _details_in_workers(pool: ThreadPoolExecutor, parse_pool: ParsePool, client: PageClient,
                        vdisks: dict[str, tuple[str, VDiskRow]], origins: dict[str, Origin],
                        budget: Budget) -> dict[str, DetailResult]:
    """Fetch every detail view in the probe's threads; hand the pages to the parse workers in
    batches of DETAIL_BATCH as they arrive. A batch's pages are kept (to parse them here if its
    worker dies) only until its answer is in. _Deadline at the deadline (queued batches cancelled)."""
    results: dict[str, DetailResult] = {}
    ffuts = {pool.submit(_fetch_detail, client, origins[vid], row.href, budget): (vid, row.href)
             for vid, (_, row) in vdisks.items()}
    total = len(ffuts)
    pending: list[tuple[list[str], list[tuple[str, bytes]], Future]] = []   # batches not yet answered
    vids: list[str] = []
    pages: list[tuple[str, bytes]] = []

    def flush() -> None:
        if pages:
            pending.append((list(vids), list(pages), parse_pool.submit_details(list(pages))))
            vids.clear()
            pages.clear()

    def harvest(wait_all: bool) -> None:
        while pending:
            bvids, bpages, fut = pending[0]
            if not wait_all and not fut.done():
                return
            try:
                out = parse_pool.details_result(fut, bpages, max(0.0, budget.remaining()))
            except TimeoutError:
                left = sum(len(b[0]) for b in pending)
                raise _Deadline(f"{left} of {total} vdisk detail views still being parsed") from None
            results.update(zip(bvids, out))
            pending.pop(0)
    try:
        try:
            for f in as_completed(ffuts, timeout=max(0.0, budget.remaining())):
                vid, href = ffuts.pop(f)     # as_completed drops it too: its page is not kept
                body, err = f.result()
                if body is None:
                    results[vid] = (None, err, 0)
                    continue
                vids.append(vid)
                pages.append((href, body))
                if len(pages) >= DETAIL_BATCH:
                    flush()
                    harvest(wait_all=False)
        except TimeoutError:
            left = sum(1 for f in ffuts if not f.done())
            raise _Deadline(f"{left} of {total} vdisk detail views pending") from None
        flush()
        harvest(wait_all=True)
    except _Deadline:
        for _, _, fut in pending:
            fut.cancel()
        raise
    return results


def _fetch_detail(client: PageClient, origin: Origin, href: str,
                  budget: Budget) -> tuple[bytes | None, str]:
    """(the detail view's page, "") or (None, error)."""
    try:
        path = same_origin_link(origin, href)
    except TargetError as exc:
        return None, f"link {href[:200]!r} not followed: {exc}"
    try:
        return client.get(origin, path, budget), ""
    except FetchError as exc:
        return None, str(exc)
    except Exception as exc:  # a bug must cost this vdisk, not the answer (never an HTTP 500)
        log.exception("reading %s", href)
        return None, f"{href}: internal error {exc.__class__.__name__}"


def _main(client: PageClient, origin: Origin, path: str, budget: Budget,
          parse: bool = True, parse_pool: ParsePool | None = None) -> CvmResult | tuple[CvmResult, bytes]:
    """A CVM's main page, parsed; or (with ``parse=False``) the page to parse with _parse_main."""
    url = f"{origin.scheme}://{origin.netloc}{path}"
    try:
        body = client.get(origin, path, budget)
        if parse:
            return _parse_main((CvmResult(url, None, "", origin), body), parse_pool, budget)
        return CvmResult(url, None, "", origin), body
    except FetchError as exc:
        return CvmResult(url, None, str(exc), origin)
    except Exception as exc:  # a bug must cost this CVM, not the answer (never an HTTP 500)
        log.exception("reading %s", url)
        return CvmResult(url, None, f"{url}: internal error {exc.__class__.__name__}", origin)


def _parse_main(fetched: CvmResult | tuple[CvmResult, bytes], parse_pool: ParsePool | None = None,
                budget: Budget | None = None) -> CvmResult:
    if isinstance(fetched, CvmResult):
        return fetched
    cvm, body = fetched
    try:
        if parse_pool is None or budget is None:
            cvm.page = parse_main_page(body, cvm.url)
        else:
            cvm.page = parse_pool.main_page(body, cvm.url, max(0.0, budget.remaining()))
    except TimeoutError:
        cvm.error = f"{cvm.url}: deadline exceeded while parsing the page"
    except StargatePageError as exc:
        cvm.error = f"{cvm.url}: {exc}"
    except Exception as exc:  # a bug must cost this CVM, not the answer (never an HTTP 500)
        log.exception("parsing %s", cvm.url)
        cvm.error = f"{cvm.url}: internal error {exc.__class__.__name__}"
    return cvm


def _detail(client: PageClient, origin: Origin, href: str,
            budget: Budget) -> tuple[VDiskDetail | None, str, int]:
    """(detail, error, 1 if the view was rejected as garbage)."""
    try:
        path = same_origin_link(origin, href)
    except TargetError as exc:
        return None, f"link {href[:200]!r} not followed: {exc}", 0
    try:
        return parse_vdisk_page(client.get(origin, path, budget)), "", 0
    except FetchError as exc:
        return None, str(exc), 0
    except StargatePageError as exc:
        return None, f"{href}: {exc}", 1
    except Exception as exc:  # a bug must cost this vdisk, not the answer (never an HTTP 500)
        log.exception("reading %s", href)
        return None, f"{href}: internal error {exc.__class__.__name__}", 0


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


@dataclass(frozen=True)
class Collectors:
    """The expensive families that can be switched off (``--no-collector.histograms``,
    ``--no-collector.source-ratios``); the series each saves are in docs/stargate.md."""

    histograms: bool = True       # the four gauge histograms: 40 series per vdisk
    source_ratios: bool = True    # Percent of each read source / write destination (the bytes/s stay)


class StargateCollector:
    """The exposition of one probe result, built fresh for every scrape (nothing is kept
    between probes but the Prism mapping, which is inventory). ``vdisk_names``: a
    :class:`VDiskNames` (YAML and Prism), or a plain vdisk id -> {"vm", "disk"} mapping."""

    def __init__(self, result: ProbeResult, vdisk_names: VDiskNames | dict[str, dict[str, str]] | None = None,
                 collectors: Collectors = Collectors()):
        self.result = result
        self.names = vdisk_names if isinstance(vdisk_names, VDiskNames) else VDiskNames(vdisk_names or {})
        self.collectors = collectors

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
        rejected = _gauge("stargate_rejected_rows", "Hosted VDisks rows and vdisk detail views of this probe rejected as "
                                                    "garbage (non-finite, negative or absurd values, bad vdisk ids), "
                                                    "each logged with the reason.")
        rejected.add("", float(r.rejected))
        fams: list[Family | GaugeHistogram] = [up, duration, cvm_up, info, rejected]
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
        hists = [(attr, GaugeHistogram(name, doc)) for attr, (name, doc) in _HISTOGRAMS.items()] \
            if self.collectors.histograms else []
        ratios = self.collectors.source_ratios
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
                if ratios:
                    src_r.add(lbl, ratio)
            for name, (rate, ratio) in d.write_destinations.items():
                lbl = f'{v},destination="{_lv(name)}"'
                dst.add(lbl, rate)
                if ratios:
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
        out: list[Family | GaugeHistogram] = [vinfo, *(fam for _, fam in simple), outstanding, outstanding_b, detail_up,
               src, *([src_r] if ratios else []), dst, *([dst_r] if ratios else []), rnd, seq, wss, upm]
        out.extend(hist for _, hist in hists)
        return out
