"""Stargate pages parsed in worker processes, so that concurrent probes use every core (opt-in:
``parse_workers``; the default is none, see default_workers).

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
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

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


def default_workers() -> int:
    """Parse workers when neither the command line nor the config file says: none, whatever the
    cores. Since the strict reader (strict.py) a detail view costs ~0.1-0.2 ms to read, about
    what handing it to a worker and its record back costs, and each worker is ~55 MB more: on 2
    cores bench/stargate_cluster.py measured 16 concurrent probes of 250 vdisks in-process within
    its targets (slowest probe 2.9-3.4 s median under load 9-20, against 2.5-2.9 s with 2 workers,
    whose 3 processes get more of the contended cores), for 12-16 % less CPU and 129-135 MB summed
    over the exporter's processes against ~253 MB (docs/stargate.md, Cluster scale). Workers still
    help a host with many cores that scrapes many large CVMs at once (``--stargate.parse-workers``)."""
    return 0


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
    """``workers`` processes parsing Stargate pages for every probe of one exporter."""

    def __init__(self, workers: int):
        if workers < 1:
            raise ValueError(f"parse workers: at least 1, got {workers}")
        self.workers = workers
        self._lock = threading.Lock()
        self._executor = self._new()

    def _new(self) -> ProcessPoolExecutor:
        # forkserver: workers are forked from a clean server process, never from this
        # multi-threaded one (fork would copy locks held by other threads).
        return ProcessPoolExecutor(
            self.workers,
            mp_context=multiprocessing.get_context("forkserver"),
            initializer=_exit_with,
            initargs=(os.getpid(),),
        )

    def warm_up(self) -> None:
        """Start the workers now (each imports lxml: ~0.3 s), not in the first probe."""
        for fut in [self._executor.submit(_warm) for _ in range(self.workers)]:
            fut.result(timeout=60)

    def submit_details(self, pages: list[tuple[str, bytes]]) -> Future:
        """A future of ``parse_details(pages)``; parsed in-process if the pool is broken."""
        executor = self._executor
        try:
            return executor.submit(parse_details, pages)
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
        executor = self._executor
        try:
            return executor.submit(parse_main_page, body, url)
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
        old.shutdown(wait=False, cancel_futures=True)

    def pids(self) -> list[int]:
        """The worker processes' ids (tests and the bench)."""
        return [p.pid for p in list(getattr(self._executor, "_processes", {}).values()) if p.pid]

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


def _done(value) -> Future:
    fut: Future = Future()
    fut.set_result(value)
    return fut
