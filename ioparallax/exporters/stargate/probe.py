"""One probe of a CVM (or, with discovery, of its whole cluster): which pages to fetch, their
parsing, and the merge of their vdisks into a :class:`ProbeResult` (written by exposition.py).

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

from .parse import MainPage, StargatePageError, VDiskDetail, VDiskRow, parse_main_page, parse_vdisk_page
from .parsepool import DETAIL_BATCH, DetailResult, ParsePool
from .targets import Origin, TargetError, TargetPolicy, cluster_cvms, parse_target, same_origin_link
from .transport import Budget, FetchError, Limits, PageClient

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
    vdisks: dict[str, tuple[str, VDiskRow]]  # vdisk id -> (cvm url, main-page row)
    details: dict[str, VDiskDetail | None]  # vdisk id -> detail (None: failed)
    detail_errors: dict[str, str]
    duration: float
    up: bool
    error: str = ""
    rejected: int = 0  # main-page rows and detail views rejected as garbage


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
                cvms.extend(
                    cast(CvmResult, f.result())
                    if f.done() and not f.cancelled()
                    # parse=True
                    else CvmResult(o.url, None, f"{o.url}: deadline exceeded", o)
                    for o, f in zip(others, futs)
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
        if parse_pool is None:
            dfuts = {
                vid: pool.submit(_detail, client, origins[vid], row.href, budget) for vid, (_, row) in vdisks.items()
            }
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
        log.warning(
            "stargate target %s: %d more vdisk detail views failed", target, len(errors) - _LOGGED_DETAIL_ERRORS
        )
    return ProbeResult(target, cvms, vdisks, details, errors, time.monotonic() - start, True, "", rejected)


def _details_in_workers(
    pool: ThreadPoolExecutor,
    parse_pool: ParsePool,
    client: PageClient,
    vdisks: dict[str, tuple[str, VDiskRow]],
    origins: dict[str, Origin],
    budget: Budget,
) -> dict[str, DetailResult]:
    """Fetch every detail view in the probe's threads; hand the pages to the parse workers in
    batches of DETAIL_BATCH as they arrive. A batch's pages are kept (to parse them here if its
    worker dies) only until its answer is in. _Deadline at the deadline (queued batches cancelled)."""
    results: dict[str, DetailResult] = {}
    ffuts = {
        pool.submit(_fetch_detail, client, origins[vid], row.href, budget): (vid, row.href)
        for vid, (_, row) in vdisks.items()
    }
    total = len(ffuts)
    pending: list[tuple[list[str], list[tuple[str, bytes]], Future]] = []  # batches not yet answered
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
                vid, href = ffuts.pop(f)  # as_completed drops it too: its page is not kept
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


def _fetch_detail(client: PageClient, origin: Origin, href: str, budget: Budget) -> tuple[bytes | None, str]:
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


def _main(
    client: PageClient,
    origin: Origin,
    path: str,
    budget: Budget,
    parse: bool = True,
    parse_pool: ParsePool | None = None,
) -> CvmResult | tuple[CvmResult, bytes]:
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


def _parse_main(
    fetched: CvmResult | tuple[CvmResult, bytes], parse_pool: ParsePool | None = None, budget: Budget | None = None
) -> CvmResult:
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


def _detail(client: PageClient, origin: Origin, href: str, budget: Budget) -> tuple[VDiskDetail | None, str, int]:
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
