"""What an exporter hands the web front: its ExporterApp (name, probe handler, collectors), the
Probe it is asked for, and the two errors of the web front: BadRequest (one request, HTTP 400)
and StartupError (the process cannot start serving)."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client.registry import Collector

from ioparallax.exporters.common.web import landing

log = logging.getLogger(__name__)

#: Default of --web.timeout-offset: seconds kept free between our deadline and Prometheus'
#: scrape timeout (blackbox_exporter's default too).
DEFAULT_TIMEOUT_OFFSET = 0.5

#: A scrape-timeout header above this is taken as this. Prometheus' own scrape timeouts are
#: seconds to a minute or two; a larger value (or ``inf``, ``1e300``) would let one probe hold a
#: thread and its target's connections for hours.
MAX_SCRAPE_TIMEOUT_SECONDS = 120.0


class BadRequest(Exception):
    """A probe request that cannot be served (unknown target, bad parameter): HTTP 400."""


@dataclass
class Probe:
    """What a /probe request asks for."""

    target: str
    params: dict[str, str]
    deadline: float  # time.monotonic() value by which the answer must be written

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


#: Writes the exposition of one probe (bytes, text format 0.0.4): every exporter writes its own,
#: as its probes are too big for prometheus_client's per-sample objects. Must not raise for target
#: failures: those are reported as `<source>_up 0` in the exposition. May raise BadRequest for a
#: malformed request.
ProbeHandler = Callable[[Probe], bytes]

#: Content type of an exposition a probe handler wrote itself.
CONTENT_TYPE_TEXT_004 = "text/plain; version=0.0.4; charset=utf-8"


class StartupError(Exception):
    """The exporter cannot start serving: one line for the log, and the exit code."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class ExporterApp:
    name: str  # e.g. "stargate-exporter"
    description: str  # one paragraph for the landing page
    probe: ProbeHandler | None  # None: the exporter has no /probe (single-target)
    default_timeout: float = 10.0  # used when Prometheus sends no timeout header
    collectors: list[Collector] = field(default_factory=list)  # served on /metrics beside process metrics
    example_target: str = ""
    extra_links: list[tuple[str, str]] = field(default_factory=list)
    config_text: str = ""  # shown on the landing page (never with secrets)
    timeout_offset: float = DEFAULT_TIMEOUT_OFFSET  # --web.timeout-offset

    def landing_page(self) -> bytes:
        return landing.render(self)

    def probe_timeout(self, header: str | None) -> float:
        """Seconds a probe may take: the scrape-timeout header (ignored unless a positive finite
        number, at most MAX_SCRAPE_TIMEOUT_SECONDS) less the offset, or ``default_timeout``."""
        value = None
        if header:
            try:
                value = float(header)
            except ValueError:
                value = None
            if value is not None and not (math.isfinite(value) and value > 0):
                value = None
            if value is None:
                log.debug("ignoring scrape timeout header %r: not a positive number of seconds", header[:40])
        if value is None:
            return self.default_timeout
        return max(0.1, min(value, MAX_SCRAPE_TIMEOUT_SECONDS) - self.timeout_offset)
