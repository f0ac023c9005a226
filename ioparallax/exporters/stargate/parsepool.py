"""Stargate pages parsed in worker processes, so that concurrent probes use every core
(``parse_workers``: none by default; ``auto`` decides from the probes running at once and the
cores, see default_workers and :meth:`ParsePool.hand_over`; ``N`` hands every page to N).

Before the strict reader (strict.py), parsing was most of a probe's CPU (~0.8 ms a detail view
with lxml), so probes running at once in one process (Prometheus scrapes every CVM at the same
moment) queued on the interpreter lock. A :class:`ParsePool` is created once per exporter when
``parse_workers`` asks for one and shared by every probe: each probe still fetches its pages in
its own thread (deadline, size limit, allowed links: client.py, address.py); the bytes of a
batch of pages go to a worker process, plain records (parse.py's dataclasses) come back.
Batches, not single pages: handing one page over costs ~0.4 ms of the exporter's CPU, a batch of
16 ~0.1 ms a page (see docs/stargate.md).

A probe that reaches its deadline cancels its batches still queued; a batch already in a worker
runs to its end (at most ``DETAIL_BATCH`` pages within ``body_size_limit``, well under a second)
and its answer is dropped, so abandoning a probe never leaks or kills a worker. A worker that
dies (killed, out of memory) breaks the pool: the pages of that moment are parsed in the
exporter's own process, the pool is replaced, and it is logged once.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import select
import threading
import traceback
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager

from ioparallax.exporters.stargate.parse import (
    MainPage,
    StargatePageError,
    VDiskDetail,
    parse_main_page,
    parse_vdisk_page,
)

log = logging.getLogger(__name__)

#: Detail views handed to a worker at once (see the module docstring).
DETAIL_BATCH = 16

#: (detail, error, 1 if the view was rejected as garbage): the result of one detail view.
DetailResult = tuple[VDiskDetail | None, str, int]


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


#: ``parse_workers: auto``: batches waiting per worker past which a probe parses its next batch
#: itself (a safety valve for many more probes than workers: each probe already waits once it has
#: MAX_QUEUED_BATCHES + 1 batches out, probe.py). Not a short queue: a batch's answer is marked
#: done by the pool's result thread, which waits for the interpreter lock behind the probes'
#: threads, so a queue of 2-8 read "behind" while the worker idled (bench/stargate_cluster.py,
#: 16 probes: with 2 per worker the worker parsed ~10 % of the pages, with 8 ~40 %).
QUEUED_PER_WORKER = 64

#: ``parse_workers: auto``: see default_workers.
AUTO = "auto"


def default_workers() -> int:
    """Parse workers when neither the command line nor the config file says: none, whatever the
    cores. Since the strict reader (strict.py) a detail view costs ~0.2 ms to read and
    ~0.1 ms more of the exporter's CPU to hand to a worker and take its record back, and each
    worker costs memory. ``auto`` (:func:`auto_workers`, opt-in only) has
    ``usable_cores() - 1`` workers, started the first time two probes run at once, and a probe
    hands its pages over only while another probe is running too (:meth:`ParsePool.hand_over`);
    a lone probe, a ``discover=true`` one included, parses in its own thread. On 2 cores it takes
    ~40 % of the CPU off the exporter's own process when 16 probes run at once (the bound on the
    slowest probe on an idle machine), for ~1.17x the CPU in all and ~50 MB more memory (PSS: a
    worker, the fork server, multiprocessing's resource tracker), which puts it over the 150 MB
    of bench/stargate_cluster.py; on the shared machine at load 20-28 its wall gain was not
    measurable (docs/stargate.md, Cluster scale). Not the default until both are settled."""
    return 0


def auto_workers() -> int:
    """The workers ``auto`` starts: one per core beyond the one the exporter's process uses,
    at most 4 (the exporter's own process is the bottleneck past that)."""
    return max(0, min(usable_cores() - 1, 4))


def parse_details(pages: list[tuple[str, bytes]], check_headers: bool = True) -> list[DetailResult]:
    """(href, body) -> detail results, in order; never raises (runs in a worker, or in-process).
    ``check_headers``: name the columns of the first page's tables (parse.py: their names are the
    same on every page of a build, so one page of a batch is enough)."""
    out: list[DetailResult] = []
    for i, (href, body) in enumerate(pages):
        try:
            out.append((parse_vdisk_page(body, check_headers and i == 0), "", 0))
        except StargatePageError as exc:
            out.append((None, f"{href}: {exc}", 1))
        except Exception as exc:  # a bug must cost this vdisk, not the answer (never an HTTP 500)
            out.append(
                (None, f"{href}: internal error {exc.__class__.__name__}: {traceback.format_exc(limit=-3)!r}", 0)
            )
    return out


def _warm() -> int:
    return os.getpid()


def _exit_with(exporter: int) -> None:
    """Worker initializer: exit as soon as the exporter that started the pool is gone, even when it
    was killed (SIGKILL, OOM) and could not shut the pool down. The pool's workers are children of
    multiprocessing's fork server, not of the exporter, so no parent-death signal reaches them; the
    fork server and the resource tracker live as long as a worker holds their pipes, so they go too.
    Linux' pidfd (5.3+) becomes readable when the process exits; elsewhere the pool's own shutdown
    is what stops the workers."""
    try:
        fd = os.pidfd_open(exporter)
    except ProcessLookupError:  # the exporter died while this worker started
        os._exit(0)
    except (AttributeError, OSError):
        return

    def watch() -> None:
        select.select([fd], [], [])
        os._exit(0)

    threading.Thread(target=watch, name="exit-with-exporter", daemon=True).start()


class ParsePool:
    """``workers`` processes parsing Stargate pages for every probe of one exporter.

    ``adaptive`` (``parse_workers: auto``): probes hand pages over only while another probe runs
    too and the workers have room (:meth:`hand_over`); the workers start the first time two
    probes run at once. Otherwise every probe hands every page over."""

    def __init__(self, workers: int, adaptive: bool = False):
        if workers < 1:
            raise ValueError(f"parse workers: at least 1, got {workers}")
        self.workers = workers
        self.adaptive = adaptive
        self._lock = threading.Lock()
        # adaptive: no process (nor multiprocessing's resource tracker) until two probes run at once
        self._executor: ProcessPoolExecutor | None = None if adaptive else self._new()
        self.batches_handed = 0  # batches submitted to the workers (tests, the bench)
        self._probes = 0  # probes running now (probing())
        self._queued = 0  # batches submitted and not yet answered
        self._ready = not adaptive  # adaptive: the workers answered their warm-up
        self._starting = False

    def _new(self) -> ProcessPoolExecutor:
        # forkserver: workers are forked from a clean server process, never from this
        # multi-threaded one (fork would copy locks held by other threads). The server preloads
        # this module only, not __main__ (multiprocessing's default: the whole exporter, its web
        # front and prometheus_client), so it and the workers it forks stay small.
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])
        return ProcessPoolExecutor(
            self.workers,
            mp_context=ctx,
            initializer=_exit_with,
            initargs=(os.getpid(),),
        )

    @contextmanager
    def probing(self) -> Iterator[None]:
        """Count a probe as running for as long as the block runs (hand_over asks how many)."""
        with self._lock:
            self._probes += 1
            start = self.adaptive and self._probes >= 2 and not self._ready and not self._starting
            if start:
                self._starting = True
        if start:  # the first time two probes run at once: start the workers, without waiting
            threading.Thread(target=self._start_workers, name="parse-workers-start", daemon=True).start()
        try:
            yield
        finally:
            with self._lock:
                self._probes -= 1

    def _start_workers(self) -> None:
        try:
            with self._lock:
                if self._executor is None:
                    self._executor = self._new()
            self.warm_up()
            log.info("two probes ran at once: %d parse worker processes started (parse_workers auto)", self.workers)
        except Exception as exc:  # pages stay in the probes' threads
            log.warning(
                "parse workers did not start (%s: %s); pages parsed in each probe's thread", type(exc).__name__, exc
            )
            return
        self._ready = True

    def hand_over(self) -> bool:
        """Whether a probe should hand its next batch to the workers now, or parse it in its
        thread: always when not adaptive; adaptive, only while another probe is running too, the
        workers have started, and fewer than QUEUED_PER_WORKER batches per worker are waiting
        (past that the workers are behind, and this process' core parses the batch sooner)."""
        if not self.adaptive:
            return True
        return self._ready and self._probes >= 2 and self._queued < QUEUED_PER_WORKER * self.workers

    def _count(self, fut: Future) -> Future:
        with self._lock:
            self._queued += 1
            self.batches_handed += 1
        fut.add_done_callback(self._answered)
        return fut

    def _answered(self, _: Future) -> None:
        with self._lock:
            self._queued -= 1

    def _pool(self) -> ProcessPoolExecutor:
        executor = self._executor
        if executor is None:  # hand_over() said no until the workers started
            raise RuntimeError("parse workers not started")
        return executor

    def warm_up(self) -> None:
        """Start the workers now (each imports lxml: ~0.3 s), not in the first probe."""
        for fut in [self._pool().submit(_warm) for _ in range(self.workers)]:
            fut.result(timeout=60)

    def submit_details(self, pages: list[tuple[str, bytes]]) -> Future:
        """A future of ``parse_details(pages)``; parsed in-process if the pool is broken."""
        executor = self._pool()
        try:
            return self._count(executor.submit(parse_details, pages))
        except (BrokenProcessPool, RuntimeError) as exc:
            self._replace(executor, exc)
            return _done(parse_details(pages))

    def details_result(self, fut: Future, pages: list[tuple[str, bytes]], timeout: float) -> list[DetailResult]:
        """The batch's results; TimeoutError at ``timeout``; a worker that died while it ran
        has the batch parsed here."""
        try:
            return fut.result(timeout=timeout)
        except BrokenProcessPool as exc:
            self._replace(None, exc)
            return parse_details(pages)

    def submit_main(self, body: bytes, url: str) -> Future:
        """A future of ``parse_main_page(body, url)``; parsed in-process if the pool is broken."""
        executor = self._pool()
        try:
            return self._count(executor.submit(parse_main_page, body, url))
        except (BrokenProcessPool, RuntimeError) as exc:
            self._replace(executor, exc)
            fut: Future = Future()
            try:
                fut.set_result(parse_main_page(body, url))
            except Exception as err:  # StargatePageError (or a bug) as the worker would give it
                fut.set_exception(err)
            return fut

    def main_result(self, fut: Future, body: bytes, url: str, timeout: float) -> MainPage:
        """The main page parsed (StargatePageError as parse_main_page raises it); TimeoutError at
        ``timeout`` (the parse is cancelled if it has not started); a worker that died while it
        ran has the page parsed here."""
        try:
            return fut.result(timeout=timeout)
        except BrokenProcessPool as exc:
            self._replace(None, exc)
            return parse_main_page(body, url)
        except TimeoutError:
            fut.cancel()
            raise

    def _replace(self, broken: ProcessPoolExecutor | None, exc: BaseException) -> None:
        with self._lock:
            if broken is not None and broken is not self._executor:
                return  # another thread already replaced it
            if broken is None and not getattr(self._executor, "_broken", False):
                return
            log.warning(
                "stargate parse workers failed (%s: %s); pages of this moment are parsed in the "
                "exporter's process, %d new workers started",
                exc.__class__.__name__,
                exc,
                self.workers,
            )
            old, self._executor = self._executor, self._new()
        if old is not None:
            old.shutdown(wait=False, cancel_futures=True)

    def pids(self) -> list[int]:
        """The worker processes' ids (tests and the bench)."""
        return [p.pid for p in list((getattr(self._executor, "_processes", None) or {}).values()) if p.pid]

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)


def _done(value) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut
