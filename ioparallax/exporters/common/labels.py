"""The length of label values, the same for every exporter.

A label value is a name the data source or a file gave (a VM, vdisk, datastore or job name, a
file path): the source decides its length. Every series of an object carries its names, so a
long name is paid for on every line of every scrape, in the exporter, in Prometheus and in every
dashboard: four Prism VMs with 6 MB names made a 403 MB /probe answer (998 MB of RSS), a 1 MB
DiskSPD ComputerName a 50 MB /metrics answer.

Every exporter's label values go through :func:`cap` (in the shared exposition writer,
``exposition.label_block`` and ``escape_label_value``, and in the watch exporters'
``families.MetricFamilies``): a value longer than :data:`MAX_LABEL_VALUE_CHARS` is cut to that
length, its end replaced by ``...`` and 10 hex digits of its SHA-256, so two long names that
share their start stay two series. Each cut is counted in
``<exporter>_label_values_truncated_total`` on the exporter's own ``/metrics``, beside its
``<exporter>_build_info`` (``prism_exporter_label_values_truncated_total``), and the first is
logged.

1,024 characters keep every real name whole (a DNS name is at most 253, a vSphere or AHV
VM name 80, a Linux path component 255; full paths, the longest labels, are rarely past a few
hundred) and bound a series' labels to a few KB.

:data:`MAX_NAME_CHARS` and :data:`MAX_PATH_CHARS` are the longest host name / tool version and
Windows path a DiskSPD document may hold: longer ones make the document invalid (they cannot be
what DiskSPD wrote), refused before any label is built.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger(__name__)

#: Longest label value exposed, in characters (module docstring).
MAX_LABEL_VALUE_CHARS = 1024
#: A DiskSPD ComputerName, tool version or date: a DNS name is at most 255 characters.
MAX_NAME_CHARS = 255
#: A DiskSPD target path: Windows' long-path limit (32,767 UTF-16 units).
MAX_PATH_CHARS = 32767

_SUFFIX_HEX = 10
_KEEP = MAX_LABEL_VALUE_CHARS - 3 - _SUFFIX_HEX

_lock = threading.Lock()
_truncated = 0


def cap(value: str) -> str:
    """``value``, or its first characters, ``...`` and a hash of the whole when it is longer
    than :data:`MAX_LABEL_VALUE_CHARS` (counted)."""
    if len(value) <= MAX_LABEL_VALUE_CHARS:
        return value
    global _truncated
    with _lock:
        _truncated += 1
        first = _truncated == 1
    if first:
        log.warning(
            "a label value of %d characters was cut to %d (%r...); <exporter>_label_values_truncated_total "
            "counts every cut",
            len(value),
            MAX_LABEL_VALUE_CHARS,
            value[:40],
        )
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:_SUFFIX_HEX]
    return f"{value[:_KEEP]}...{digest}"


def truncated() -> int:
    """Label values cut since the process started."""
    return _truncated


class TruncationCollector(Collector):
    """``<exporter>_label_values_truncated_total`` on an exporter's own /metrics (beside
    ``<exporter>_build_info``: ``prism_exporter_label_values_truncated_total``)."""

    def __init__(self, program: str) -> None:
        self.name = re.sub(r"[^a-zA-Z0-9_]", "_", program) + "_label_values_truncated"

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        yield CounterMetricFamily(
            self.name,
            f"Label values cut to {MAX_LABEL_VALUE_CHARS} characters (their start, '...' and 10 hex "
            "digits of their SHA-256) since the exporter started: a name the source gave was longer.",
            value=_truncated,
        )
