"""The sources of a watch exporter: finding, reading in isolation, up/down state, retention.

:class:`Watcher` is subclassed by each tool's ``reader.py``; the tool supplies
:meth:`Watcher.new_source` and :meth:`Watcher.read` (and, where it differs on purpose, the other
hooks). Everything it does is under :attr:`Watcher.lock`, a re-entrant lock the collector holds
while it builds a scrape, so a concurrent scrape's poll never changes a source half-way through an
exposition.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from typing import Any, Generic, Protocol, TypeVar

from ioparallax.exporters.common.watchdir import display_name, list_files


class Health(Protocol):
    """What the engine reads and writes of a source's state: why it is down (None: up) and the
    cause in words, as logged."""

    reason: str | None
    detail: str | None


S = TypeVar("S")
V = TypeVar("V")


def writer_ended(now: float, last_growth: float, idle_s: float, spacing_s: float | None = None) -> bool:
    """Whether the tool writing a file has ended, judged from the file alone: it has not grown for
    ``idle_s``, nor for 3 of the tool's own intervals (``spacing_s``: a status every 30 s is not
    a stop after a 10 s idle timeout)."""
    idle = max(idle_s, 3 * spacing_s) if spacing_s else idle_s
    return now - last_growth > idle


def view(cls: Callable[..., V], state: Any, **more: Any) -> V:
    """A snapshot of a source for the collector: ``state``'s fields copied into ``cls`` (a
    dataclass extending the state's, with what the scrape adds: whether the run ended, whether it
    is still shown), then ``more`` (those, and copies of the mutable fields the watcher goes on
    changing). The watcher can read on while the collector builds the scrape from it."""
    return cls(**{**{f.name: getattr(state, f.name) for f in fields(state)}, **more})


def retained(now: float, ended: bool, last_change: float, retention_s: float) -> bool:
    """Whether a source is still shown: while its writer runs, and for ``retention_s`` after
    ``last_change``."""
    return not ended or now - last_change <= retention_s


class Watcher(Generic[S]):
    """Every source under the watched paths (``config.paths``, files matching
    ``config.pattern`` inside watched directories), by path; thread-safe.

    A subclass sets :attr:`what` (the source in log lines: ``"fio output file"``) and supplies
    :meth:`new_source` and :meth:`read`."""

    #: the source as log lines name it
    what = "file"
    #: log an unreadable source in words of its own ("cannot read <what> <path>: <cause>", "<what>
    #: readable again: <path>") rather than as any other reason ("<what> <path> is down
    #: (unreadable): <cause>"); the log lines each exporter has always written
    unreadable_in_own_words = False

    def __init__(self, config: Any, clock: Callable[[], float] = time.time):
        """``config``: the tool's WatchConfig (``paths``, ``pattern``, ``retention_s``,
        ``idle_s`` and its own settings); ``clock``: wall time (tests)."""
        #: the tool's own logger (``ioparallax.exporters.fio.reader``): its lines keep their
        #: ``logger=`` name, whatever of them the engine writes
        self.log = logging.getLogger(type(self).__module__)
        self.config = config
        self.clock = clock
        self.sources: dict[str, S] = {}
        #: ``"<path>: <cause>"`` for each watched path that cannot be read (the exporter's
        #: ``<tool>_up`` is 0 while there is one)
        self.missing_paths: list[str] = []
        #: held by poll() and snapshot(); the collector holds it while it builds a scrape
        self.lock = threading.RLock()
        #: wrapper mode: path -> "is the process writing it still running?" (asked before each
        #: read, so a run is only called ended after its last bytes were read); such a path is
        #: not missing before the process has created it
        self.process_running: dict[str, Callable[[], bool]] = {}

    # ---- finding
    def discover(self) -> list[str]:
        """The paths of the sources present now; records :attr:`missing_paths`."""
        found, missing = list_files(self.config.paths, self.config.pattern, lambda p: p in self.process_running)
        self.note_missing(missing)
        return found

    def note_missing(self, missing: list[str]) -> None:
        """The watched paths that cannot be read now: each logged once, when it goes missing."""
        shown = [display_name(m) for m in missing]
        for m in shown:
            if m not in self.missing_paths:
                self.log.warning("watched path cannot be read: %s", m)
        self.missing_paths = shown

    def forget_gone(self, found: list[str]) -> None:
        present = set(found)
        for gone in sorted(p for p in self.sources if p not in present):
            self.log.info("%s is gone, forgetting it: %s", self.what, display_name(gone))
            del self.sources[gone]

    # ---- reading
    def poll(self) -> None:
        """Read what every source gained since the last poll. One source's failure, whatever it
        is, marks only that source down."""
        with self.lock:
            found = self.discover()
            self.forget_gone(found)
            for path in found:
                state = self.open_source(path, self.sources.get(path))
                if state is None:
                    continue
                try:
                    self.read(state)
                except Exception as exc:  # a bug must cost only this source, never the scrape
                    self.log.exception("reading %s %s failed", self.what, display_name(path))
                    self.internal_error(state, f"{type(exc).__name__}: {exc}")

    def open_source(self, path: str, old: S | None) -> S | None:
        """The state to read ``path`` into: ``old``, or a new one for a path found the first time
        (None: nothing to read on this poll)."""
        if old is None:
            old = self.sources[path] = self.new_source(path)
        return old

    def new_source(self, path: str) -> S:
        raise NotImplementedError

    def read(self, state: S) -> None:
        """Read what the source gained; errors it expects are its own state, never raised."""
        raise NotImplementedError

    def internal_error(self, state: S, detail: str) -> None:
        """A bug while reading ``state`` (already logged with its traceback)."""
        self.down(state, "internal_error", detail, logged=True)  # type: ignore[arg-type]

    def finish(self) -> None:
        """End of input (``convert``, ``backfill``): what is left unfinished is judged."""
        with self.lock:
            for state in self.sources.values():
                self.finish_source(state)

    def finish_source(self, state: S) -> None:
        pass

    # ---- up and down
    def down(self, state: Health, reason: str, detail: str, logged: bool = False) -> None:
        """The source is down for ``reason``: one log line when that changes (none if ``logged``:
        the caller logged it), and :meth:`hide` drops what must not be shown as fresh."""
        if (reason, detail) != (state.reason, state.detail) and not logged:
            name = display_name(self.path_of(state))
            if reason == "unreadable" and self.unreadable_in_own_words:
                self.log.warning("cannot read %s %s: %s", self.what, name, detail)
            else:
                self.log.warning("%s %s is down (%s): %s", self.what, name, reason, detail)
        state.reason, state.detail = reason, detail
        self.hide(state, reason)

    def up(self, state: Health) -> None:
        if state.reason == "unreadable" and self.unreadable_in_own_words:
            self.log.info("%s readable again: %s", self.what, display_name(self.path_of(state)))
        elif state.reason is not None:
            self.log.info(
                "%s %s is up again (was down: %s)", self.what, display_name(self.path_of(state)), state.reason
            )
        state.reason = state.detail = None

    def unreadable(self, state: Any, exc: OSError) -> None:
        """Reading the source failed: one more read error, and down with reason ``unreadable``."""
        state.read_errors += 1
        self.down(state, "unreadable", exc.strerror or str(exc))

    def hide(self, state: Any, reason: str) -> None:
        """What a source going down for ``reason`` stops showing (nothing by default)."""

    def mark_failed(self, path: str, reason: str, detail: str) -> None:
        """The collector could not expose the source: down until it changes."""
        with self.lock:
            state = self.sources.get(path)
            if state is not None:
                self.down(state, reason, detail, logged=True)  # type: ignore[arg-type]

    @staticmethod
    def path_of(state: Any) -> str:
        return str(state.path)

    # ---- state for the collector
    def ended(self, state: S, now: float) -> bool:
        """Whether the source's writer has ended. Default: the wrapped process exited, else
        :func:`writer_ended` on ``state.last_growth`` and the tool's interval (:meth:`spacing`)."""
        running = getattr(state, "process_running", None)
        if running is not None:
            return not running
        return writer_ended(now, state.last_growth, self.config.idle_s, self.spacing(state))  # type: ignore[attr-defined]

    def spacing(self, state: S) -> float | None:
        """Seconds between the tool's last two records in the source, if known."""
        return None

    def visible(self, state: S, ended: bool, now: float) -> bool:
        """Whether the source is still shown. Default: for the retention after its last change
        or, for results copied in with their old mtimes (scp -p, rsync -a), after the exporter
        found them."""
        last = max(state.last_growth, state.first_seen)  # type: ignore[attr-defined]
        return retained(now, ended, last, self.config.retention_s)

    def snapshot(self) -> list[tuple[S, bool, bool]]:
        """(source, its writer ended, still shown) per source, sorted by path; call with
        :attr:`lock` held for a consistent scrape."""
        now = self.clock()
        with self.lock:
            out = []
            for path in sorted(self.sources):
                state = self.sources[path]
                ended = self.ended(state, now)
                out.append((state, ended, self.visible(state, ended, now)))
            return out
