"""Start the e2e stacks ahead of the tests that use them, a few at a time.

Most of an e2e test's time is waiting: rate windows must fill (1m), vCenter must have produced a
20 s sample, alerts get a minute to misfire. A stack needs about 0.1 of a core while it runs, so
several can age side by side on two cores. ``StackPool`` knows the order in which the tests will
ask for stacks (from the collected items, after pytest's reordering) and keeps up to ``window``
of them running: when a test asks for the stack it needs, the next ones in line are already up
and aging, and most of their waits have passed by the time their tests run.

Entries are started in background threads; a failure to start is kept and raised in the test that
asks for the entry. Every entry is stopped when its tests are done (``release``) or at the end of
the session, whichever comes first.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)


@dataclass
class Entry:
    """How to start and stop one pooled thing (a stack, a demo command)."""

    start: Callable[[], Any]  # returns the started thing; may take tens of seconds
    stop: Callable[[Any], None]
    # Started with the pool, if a test will ask for it, and not counted in the window: for a thing
    # that runs a fixed time by itself (the demo command) whatever the order of the tests.
    eager: bool = False


class StackPool:
    def __init__(self, order: list[str], entries: dict[str, Entry], window: int) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.order = [key for key in order if key in entries]
        self.entries = entries
        self.window = window
        self.futures: dict[str, Future] = {}
        self.released: set[str] = set()
        self.lock = threading.Lock()
        self.eager = {key for key in self.order if entries[key].eager}
        self.executor = ThreadPoolExecutor(max_workers=window + len(self.eager) + 1, thread_name_prefix="e2e-stack")
        with self.lock:
            for key in self.order:
                if key in self.eager:
                    self._launch(key)

    def _launch(self, key: str) -> None:
        if key not in self.futures:
            log.info("starting %s in the background", key)
            self.futures[key] = self.executor.submit(self.entries[key].start)

    def _top_up(self, window: int | None = None) -> None:
        """Start entries in test order until ``window`` are running or starting."""
        window = self.window if window is None else window
        live = sum(1 for key in self.futures if key not in self.released and key not in self.eager)
        for key in self.order:
            if live >= window:
                break
            if key not in self.futures:
                self._launch(key)
                live += 1

    def start_ahead(self, count: int | None = None) -> None:
        """Start the first ``count`` (at most ``window``) entries in test order now (the session's
        unit tests run while they age), rather than when the first test asks for one."""
        with self.lock:
            self._top_up(self.window if count is None else min(count, self.window))

    def get(self, key: str, timeout: float = 300.0) -> Any:
        """The started entry ``key`` (starting it now if it is not in line), raising its start error."""
        with self.lock:
            if key in self.released:
                raise RuntimeError(f"{key} was already stopped: its tests are not grouped together")
            self._launch(key)
            self._top_up()
            future = self.futures[key]
        return future.result(timeout=timeout)

    @contextmanager
    def lease(self, key: str) -> Iterator[Any]:
        """``get`` then, when the block ends (its tests are done), ``release``."""
        try:
            yield self.get(key)
        finally:
            self.release(key)

    def release(self, key: str) -> None:
        """Stop ``key`` (its tests are done) and start the next entries in line; once only."""
        with self.lock:
            if key in self.released:
                return
            future = self.futures.get(key)
            self.released.add(key)
            self._top_up()
        if future is not None:
            self._stop(key, future)

    def _stop(self, key: str, future: Future) -> None:
        try:
            thing = future.result()
        except BaseException:  # it never started: its start cleaned up after itself
            return
        try:
            self.entries[key].stop(thing)
        except Exception:
            log.exception("stopping %s failed", key)

    def close(self) -> None:
        """Stop everything still running, including entries started for tests that never ran."""
        with self.lock:
            pending = [(key, f) for key, f in self.futures.items() if key not in self.released]
            self.released.update(key for key, _ in pending)
        for key, future in pending:
            self._stop(key, future)
        self.executor.shutdown(wait=True, cancel_futures=True)
