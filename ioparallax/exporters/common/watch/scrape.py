"""One scrape of a watch exporter, the same in every one: poll the sources, build each source's
families in isolation, then ``<tool>_up`` and ``<tool>_scrape_duration_seconds``.

A tool's collector subclasses :class:`WatchCollector` and supplies :meth:`~WatchCollector.source`
(one source's families, its ``<tool>_source_up`` first) and what to show when that fails.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from ioparallax.exporters.common.families import MetricFamilies, scrape_health


def source_state(
    fams: MetricFamilies,
    prefix: str,
    up_help: str,
    error_help: str,
    source: list[str],
    up: bool,
    reason: str | None,
    error_labels: tuple[list[str], list[str]] = ([], []),
) -> None:
    """``<prefix>_source_up`` (1 or 0) and, while the source is down, ``<prefix>_source_error_info``
    with its ``reason`` (value 1), labelled ``source``. ``error_labels``: more (names, values) on
    the error family between ``source`` and ``reason`` (vdbench's ``file``)."""
    fams.gauge(f"{prefix}_source_up", up_help, ["source"], source, 1.0 if up else 0.0)
    if reason is not None:
        names, values = error_labels
        fams.gauge(
            f"{prefix}_source_error_info", error_help, ["source", *names, "reason"], source + values + [reason], 1.0
        )


class WatchCollector(Collector):
    """The families of every source a :class:`~ioparallax.exporters.common.watch.engine.Watcher`
    holds, fresh on each scrape. ``hygiene``: the tool's hygiene settings; ``clock``: wall time
    (tests); ``poll``: read what the files gained first (off for ``convert``, where everything
    was read already)."""

    #: the metric prefix (``fio``)
    prefix = ""
    #: the tool's output in log lines (``"fio output"``)
    output = ""
    up_help = ""
    duration_help = ""

    #: the tool's hygiene settings class (``HygieneConfig``), its defaults used when none is given
    hygiene_config: Callable[[], Any] = object

    def __init__(self, watcher: Any, hygiene: Any = None, clock: Callable[[], float] = time.time, poll: bool = True):
        self.log = logging.getLogger(type(self).__module__)  # the tool's logger
        self.watcher = watcher
        self.hygiene = hygiene or self.hygiene_config()
        self.clock = clock
        self.poll = poll

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on what the files hold; nothing to describe up front

    def collect(self) -> Iterable[Metric]:
        start = time.monotonic()
        fams = MetricFamilies()
        ok = True
        with self.watcher.lock:
            try:
                if self.poll:
                    self.watcher.poll()
                snapshot = self.take_snapshot()
            except Exception:  # a bug must not take /metrics down: <tool>_up 0 and a log line
                self.log.exception("reading %s failed", self.output)
                snapshot, ok = [], False
            if self.watcher.missing_paths:
                ok = False
            ok = self.sources(fams, snapshot) and ok
        yield from fams
        yield from scrape_health(self.prefix, ok, self.up_help, self.duration_help, start)

    def take_snapshot(self) -> list[Any]:
        """What the scrape shows, read from the watcher with its lock held."""
        return list(self.watcher.snapshot())

    def sources(self, fams: MetricFamilies, snapshot: list[Any]) -> bool:
        """Every source's families; False if one is down."""
        ok = True
        for row in snapshot:
            ok = self.isolated(fams, row) and ok
        return ok

    def isolated(self, fams: MetricFamilies, row: Any) -> bool:
        """One source's series; whatever goes wrong while building them costs only this source
        (like node_exporter's textfile collector): its staged series are dropped and
        :meth:`failed` shows it down with reason ``internal_error``."""
        fams.stage()
        try:
            up = self.source(fams, row)
            fams.commit()
            return up
        except Exception as exc:
            fams.discard()
            self.failed(fams, row, exc)
            return False

    def source(self, fams: MetricFamilies, row: Any) -> bool:
        """One source's families; whether it is up."""
        raise NotImplementedError

    def failed(self, fams: MetricFamilies, row: Any, exc: Exception) -> None:
        """Building ``row``'s families raised ``exc``: log it and show the source down."""
        raise NotImplementedError
