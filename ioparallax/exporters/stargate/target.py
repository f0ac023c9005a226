"""One probe of a CVM (or, with discovery, of its whole cluster): which pages to fetch, their
parsing, and the merge of their vdisks into a :class:`ProbeResult` (written by collector.py).

Collected when Prometheus scrapes: the main page, then every hosted vdisk's detail view (followed
from the page's links), ``concurrency`` at a time over keep-alive connections. A failing detail
page marks that vdisk (``stargate_vdisk_detail_up 0``), not the target; a failing main page gives
``stargate_up 0`` and one log line naming the target and the cause, and no vdisk values.

One deadline bounds the probe (transport.Budget): every fetch runs in the probe's own thread, in
one ``select`` loop bounded by the time left (client.py), so at the deadline the probe stops,
closes its connections and answers ``stargate_up 0`` with a "deadline exceeded" line naming what
was pending; nothing is left running. Which URLs may be fetched at all is decided in address.py.

With a :class:`~.parsepool.ParsePool` (``parse_workers``), the pages are parsed in worker
processes, shared by all probes, so concurrent probes use every core; the detail views go over in
batches as they arrive, and the deadline cancels the batches still queued. The pool decides per
batch (ParsePool.hand_over: with ``parse_workers: auto`` only while another probe runs too and
the workers have room); a batch it keeps, and every page without a pool, is parsed in the
probe's thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import CounterMetricFamily

from ioparallax.exporters.stargate.address import (
    Origin,
    TargetError,
    TargetPolicy,
    cluster_cvms,
    parse_target,
    same_origin_link,
)
from ioparallax.exporters.stargate.client import (
    DEFAULT_CONCURRENCY,
    Budget,
    DeadlineExceeded,
    FetchError,
    Limits,
    PageClient,
)
from ioparallax.exporters.stargate.parse import MainPage, StargatePageError, VDiskDetail, VDiskRow, parse_main_page
from ioparallax.exporters.stargate.parsepool import DETAIL_BATCH, DetailResult, ParsePool, parse_details

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_CONCURRENCY", "CvmResult", "ProbeResult", "probe"]


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
    vdisks: dict[str, tuple[str, VDiskRow]]  # vdisk id -> (cvm url, main-page row)
    details: dict[str, VDiskDetail | None]  # vdisk id -> detail (None: failed)
    detail_errors: dict[str, str]
    duration: float
    up: bool
    error: str = ""
    rejected: int = 0  # main-page rows and detail views rejected as garbage
    #: (page, table, kind, item) -> pages of this probe holding it: what the parse does not read
    #: (parse.py, Parse coverage); page is "main" or "vdisk".
    unknown: dict[tuple[str, str, str, str], int] = field(default_factory=dict)


#: Seconds kept for writing the exposition after the last fetch: a base, and per vdisk
#: (rendering a 1,000-vdisk probe takes ~0.12 s, see docs/stargate.md).
RENDER_RESERVE_SECONDS = 0.05
RENDER_RESERVE_PER_VDISK = 0.0002
#: Batches of detail views one probe may have waiting for the parse workers; past that it stops
#: fetching until the oldest is parsed, so a probe that fetches faster than the workers parse
#: holds ~3 x 16 pages in memory, not all of its pages (bench/stargate_cluster.py: peak RSS).
MAX_QUEUED_BATCHES = 3
#: Per-vdisk failures logged one by one in a probe; the rest are summed up in one line.
_LOGGED_DETAIL_ERRORS = 5
#: Unknown fields already logged by this process, by (build, page, table, kind, item): each is
#: logged once (per page build), then only counted. Bounded: past the cap, nothing more is logged.
_LOGGED_UNKNOWN: set[tuple[str, ...]] = set()
_LOGGED_UNKNOWN_CAP = 10_000
_LOGGED_UNKNOWN_LOCK = threading.Lock()


class DetailReads:
    """Detail views read since the exporter started, by reader (served on /metrics): the strict
    reader (strict.py) or its lxml fallback, for a page in any other shape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.strict = 0
        self.lxml = 0

    def add(self, details: dict[str, VDiskDetail | None]) -> tuple[int, int]:
        strict = sum(1 for d in details.values() if d is not None and d.strict)
        lxml = sum(1 for d in details.values() if d is not None) - strict
        with self._lock:
            self.strict += strict
            self.lxml += lxml
        return strict, lxml

    def collect(self) -> Iterator[CounterMetricFamily]:
        fam = CounterMetricFamily(
            "stargate_parse_detail_views",
            "Vdisk detail views read since the exporter started, by reader: strict (the fast reader of the "
            "exact page shape Stargate emits) or lxml (its fallback, for a page in any other shape; the "
            "same record). Views rejected as garbage are not counted.",
            labels=["reader"],
        )
        with self._lock:
            fam.add_metric(["strict"], float(self.strict))
            fam.add_metric(["lxml"], float(self.lxml))
        yield fam


#: This process' tally (cli.py serves it on /metrics).
DETAIL_READS = DetailReads()


class _Deadline(Exception):
    def __init__(self, pending: str):
        self.pending = pending


def probe(
    client: PageClient,
    target: str,
    deadline: float,
    discover: bool = False,
    concurrency: int = DEFAULT_CONCURRENCY,
    limits: Limits = Limits(),
    policy: TargetPolicy | None = None,
    discovery_ports: tuple[int, ...] = (),
    parse_pool: ParsePool | None = None,
) -> ProbeResult:
    """One probe: never raises for anything the target, its pages or the target string do;
    ends by ``deadline`` (``time.monotonic()``) whatever the servers do, with every connection
    closed and nothing left running. ``policy`` decides which Cluster State CVMs ``discover``
    may visit (the target itself is checked by the caller). ``parse_pool``: parse the pages in
    its worker processes (None: in this thread)."""
    if parse_pool is None:
        return _probe(client, target, deadline, discover, concurrency, limits, policy, discovery_ports, None)
    with parse_pool.probing():
        return _probe(client, target, deadline, discover, concurrency, limits, policy, discovery_ports, parse_pool)


def _probe(
    client: PageClient,
    target: str,
    deadline: float,
    discover: bool,
    concurrency: int,
    limits: Limits,
    policy: TargetPolicy | None,
    discovery_ports: tuple[int, ...],
    parse_pool: ParsePool | None,
) -> ProbeResult:
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
    cvms: list[CvmResult] = []
    try:
        [first] = _main_pages(client, [(t.origin, t.path)], budget, 1, parse_pool, f"main page {t.url}", False)
        cvms.append(first)
        if first.page is None:
            return failed(f"main page failed: {first.error}", cvms)
        if discover:
            others, refused = cluster_cvms(t, first.page.cvm_urls, policy, discovery_ports)
            for reason in refused:
                log.warning("stargate target %s: %s; not followed", target, reason)
            cvms.extend(
                _main_pages(
                    client, [(o, "/") for o in others], budget, concurrency, parse_pool, "Cluster State CVM main pages"
                )
            )
        for cvm in cvms[1:]:
            if cvm.page is None:
                log.warning("stargate target %s: CVM main page failed: %s", target, cvm.error)
        # Merge by vdisk id: a vdisk that moved between two main-page reads is listed by two CVMs;
        # keep the first listing (the probed target's own page is read first) so it counts once.
        vdisks: dict[str, tuple[str, VDiskRow]] = {}
        origins: dict[str, Origin] = {}
        rejected = 0
        for cvm in cvms:
            if cvm.page is None or cvm.origin is None:  # a page read always has its origin
                continue
            for reason in cvm.page.rejected:
                log.warning("stargate target %s: %s: row rejected as garbage: %s", target, cvm.url, reason)
            rejected += len(cvm.page.rejected)
            for row in cvm.page.vdisks:
                if row.vdisk_id not in vdisks:
                    vdisks[row.vdisk_id] = (cvm.url, row)
                    origins[row.vdisk_id] = cvm.origin
        budget.deadline = min(
            budget.deadline, deadline - RENDER_RESERVE_SECONDS - RENDER_RESERVE_PER_VDISK * len(vdisks)
        )
        pages = len(cvms) + len(vdisks)
        if pages > limits.max_pages:
            return failed(
                f"{len(cvms)} main pages and {len(vdisks)} vdisk detail views are over "
                f"max_pages_per_probe ({limits.max_pages}); nothing more fetched",
                cvms,
            )
        results = _details(client, parse_pool, vdisks, origins, budget, concurrency)
    except _Deadline as exc:
        return failed(f"deadline exceeded after {time.monotonic() - start:.2f} s: {exc.pending}", cvms)
    finally:
        budget.close()
    details: dict[str, VDiskDetail | None] = {}
    errors: dict[str, str] = {}
    for vid, (details[vid], err, garbage) in results.items():
        if err:
            errors[vid] = err
            rejected += garbage
    unknown = _coverage(target, cvms, vdisks, details)
    strict, lxml = DETAIL_READS.add(details)
    if lxml:
        log.debug(
            "stargate target %s: %d of %d detail views read with lxml (not in the strict reader's shape)",
            target,
            lxml,
            strict + lxml,
        )
    for n, (vid, err) in enumerate(errors.items()):
        if n < _LOGGED_DETAIL_ERRORS:
            log.warning("stargate target %s: vdisk %s detail view failed: %s", target, vid, err)
    if len(errors) > _LOGGED_DETAIL_ERRORS:
        log.warning(
            "stargate target %s: %d more vdisk detail views failed", target, len(errors) - _LOGGED_DETAIL_ERRORS
        )
    return ProbeResult(target, cvms, vdisks, details, errors, time.monotonic() - start, True, "", rejected, unknown)


def _coverage(
    target: str,
    cvms: list[CvmResult],
    vdisks: dict[str, tuple[str, VDiskRow]],
    details: dict[str, VDiskDetail | None],
) -> dict[tuple[str, str, str, str], int]:
    """What the probe's pages hold that the parse does not read: (page, table, kind, item) ->
    the pages holding it; each logged once per process and page build, with that build."""
    out: dict[tuple[str, str, str, str], int] = {}
    first: dict[tuple[str, str, str, str], tuple[str, str]] = {}  # -> (page URL, build)
    builds: dict[str, str] = {}
    for cvm in cvms:
        if cvm.page is None:
            continue
        build = builds[cvm.url] = cvm.page.overview.get("Build version", "")
        for table, kind, item in cvm.page.unknown:
            key = ("main", table, kind, item)
            out[key] = out.get(key, 0) + 1
            first.setdefault(key, (cvm.url, build))
    for vid, detail in details.items():
        if detail is None or not detail.unknown:
            continue
        cvm_url = vdisks[vid][0]
        for table, kind, item in detail.unknown:
            key = ("vdisk", table, kind, item)
            out[key] = out.get(key, 0) + 1
            first.setdefault(key, (f"{cvm_url} vdisk {vid}", builds.get(cvm_url, "")))
    for key, (where, build) in first.items():
        logged = (build, *key)
        with _LOGGED_UNKNOWN_LOCK:
            if logged in _LOGGED_UNKNOWN or len(_LOGGED_UNKNOWN) >= _LOGGED_UNKNOWN_CAP:
                continue
            _LOGGED_UNKNOWN.add(logged)
        page, table, kind, item = key
        what = (
            f"a table {item!r}"
            if kind == "table"
            else f"a cell that is not a number in column {item!r} of table {table}"
            if kind == "cell"
            else f"a {kind} {item!r} in table {table}"
        )
        log.warning(
            "stargate target %s: a %s page of build %r (%s) holds %s that ioparallax does not read "
            "(counted in stargate_parse_unknown_field_pages; logged once per build): capture the pages and "
            "report them, see 'Reporting a page or answer ioparallax misreads' in the README",
            target,
            "main" if page == "main" else "vdisk detail",
            build or "unknown",
            where,
            what,
        )
    return out


def _main_pages(
    client: PageClient,
    wanted: list[tuple[Origin, str]],
    budget: Budget,
    concurrency: int,
    parse_pool: ParsePool | None,
    what: str,
    counted: bool = True,
) -> list[CvmResult]:
    """CVM main pages, fetched ``concurrency`` at a time and parsed (in the workers with a
    pool, as they arrive); _Deadline naming ``what`` (``counted``: with how many were pending)
    at the deadline."""
    out = [CvmResult(o.page_url(p), None, "", o) for o, p in wanted]
    parsing: list[tuple[CvmResult, bytes, Future]] = []
    try:
        for i, got in client.get_many(wanted, budget, concurrency):
            cvm = out[i]
            if isinstance(got, FetchError):
                cvm.error = str(got)
            elif parse_pool is None or not parse_pool.hand_over():
                _parse_main(cvm, parse_main_page, got, cvm.url)
            else:
                parsing.append((cvm, got, parse_pool.submit_main(got, cvm.url)))
    except DeadlineExceeded as exc:
        for _, _, fut in parsing:
            fut.cancel()
        raise _Deadline(f"{exc.pending} of {len(wanted)} {what} pending" if counted else f"{what} pending") from None
    for n, (cvm, body, fut) in enumerate(parsing):
        assert parse_pool is not None
        try:
            _parse_main(cvm, parse_pool.main_result, fut, body, cvm.url, max(0.0, budget.remaining()))
        except TimeoutError:
            for _, _, later in parsing[n:]:
                later.cancel()
            raise _Deadline(what + " still being parsed") from None
    return out


def _parse_main(cvm: CvmResult, parse: Callable[..., MainPage], *args: Any) -> None:
    """``cvm.page = parse(*args)``; a page that is not a Stargate main page, or a bug, is the
    CVM's error (TimeoutError goes through: the deadline)."""
    try:
        cvm.page = parse(*args)
    except StargatePageError as exc:
        cvm.error = f"{cvm.url}: {exc}"
    except TimeoutError:
        raise
    except Exception as exc:  # a bug must cost this CVM, not the answer (never an HTTP 500)
        log.exception("parsing %s", cvm.url)
        cvm.error = f"{cvm.url}: internal error {exc.__class__.__name__}"


def _details(
    client: PageClient,
    parse_pool: ParsePool | None,
    vdisks: dict[str, tuple[str, VDiskRow]],
    origins: dict[str, Origin],
    budget: Budget,
    concurrency: int,
) -> dict[str, DetailResult]:
    """Every vdisk's detail view, fetched ``concurrency`` at a time and parsed as they arrive: in
    this thread, or handed to the parse workers in batches of DETAIL_BATCH. A batch's pages are
    kept (to parse them here if its worker dies) only until its answer is in. _Deadline at the
    deadline (queued batches cancelled)."""
    results: dict[str, DetailResult] = {}
    wanted: list[tuple[Origin, str]] = []
    keys: list[tuple[str, str]] = []  # (vdisk id, href) of each wanted page
    for vid, (_, row) in vdisks.items():
        try:
            wanted.append((origins[vid], same_origin_link(origins[vid], row.href)))
        except TargetError as exc:
            results[vid] = (None, f"link {row.href[:200]!r} not followed: {exc}", 0)
            continue
        keys.append((vid, row.href))
    total = len(vdisks)
    pending: list[tuple[list[str], list[tuple[str, bytes]], Future]] = []  # batches not yet answered
    vids: list[str] = []
    pages: list[tuple[str, bytes]] = []

    def flush() -> None:
        if pages:
            assert parse_pool is not None
            if parse_pool.hand_over():
                pending.append((list(vids), list(pages), parse_pool.submit_details(list(pages))))
            else:  # the pool keeps this batch out of the workers: parsed here, now
                results.update(zip(vids, parse_details(pages)))
            vids.clear()
            pages.clear()

    def harvest_oldest() -> None:
        assert parse_pool is not None
        bvids, bpages, fut = pending[0]
        try:
            out = parse_pool.details_result(fut, bpages, max(0.0, budget.remaining()))
        except TimeoutError:
            left = sum(len(b[0]) for b in pending)
            raise _Deadline(f"{left} of {total} vdisk detail views still being parsed") from None
        results.update(zip(bvids, out))
        pending.pop(0)

    def harvest(wait_all: bool) -> None:
        while pending and (wait_all or pending[0][2].done()):
            harvest_oldest()

    try:
        try:
            for i, got in client.get_many(wanted, budget, concurrency):
                vid, href = keys[i]
                if isinstance(got, FetchError):
                    results[vid] = (None, str(got), 0)
                elif parse_pool is None:
                    [results[vid]] = parse_details([(href, got)], len(results) % DETAIL_BATCH == 0)
                else:
                    vids.append(vid)
                    pages.append((href, got))
                    if len(pages) >= DETAIL_BATCH:
                        flush()
                        harvest(wait_all=False)
                        if len(pending) > MAX_QUEUED_BATCHES:
                            # Back-pressure: the workers are behind, so this probe fetches no
                            # more pages until its oldest batch is parsed (its pages, not the
                            # whole probe's, wait in memory).
                            harvest_oldest()
        except DeadlineExceeded as exc:
            raise _Deadline(f"{exc.pending} of {total} vdisk detail views pending") from None
        if parse_pool is not None:
            flush()
            harvest(wait_all=True)
    except _Deadline:
        for _, _, fut in pending:
            fut.cancel()
        raise
    return results
