"""Timestamped series for backfilling, shared by the exporters whose tools record a run's own
series (diskspd-exporter's ``-D`` intervals, esxtop-exporter's samples).

A scrape carries one sample per series, stamped "now"; a finished run's series happened in the
past. They are written as a file with their own timestamps and loaded once:

- OpenMetrics (timestamps in seconds, ``# EOF``), for ``promtool tsdb create-blocks-from
  openmetrics FILE DATA_DIR`` (Prometheus picks the new blocks up);
- Prometheus text 0.0.4 with millisecond timestamps, for VictoriaMetrics'
  ``/api/v1/import/prometheus`` (the long-term store, docs/long-term.md).

Both want a family's samples together and each series' samples in time order. A
:class:`BackfillWriter` takes samples in any family order (a reader adds each row's samples to
many families at once) and spools each family's lines to a temporary file, so memory stays at one
row whatever the run's length; :meth:`BackfillWriter.write` then copies the families out in the
order they were declared. Samples of one series must be added in time order (they are: rows
come in time order).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from typing import IO, TextIO

from ioparallax.exporters.common.exposition import format_value, header, label_block

FORMATS = ("openmetrics", "prometheus")


class BackfillWriter:
    """Families declared up front (name -> HELP, all gauges), samples spooled per family."""

    def __init__(self, families: dict[str, str], fmt: str = "openmetrics") -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}: openmetrics or prometheus")
        self.families = families
        self.fmt = fmt
        self._spool: dict[str, IO[str]] = {}
        self.samples = 0

    def add(self, name: str, labels: str, timestamp_s: float, value: float) -> None:
        """One sample: ``labels`` a label block without braces (common.exposition.label_block)."""
        fh = self._spool.get(name)
        if fh is None:
            if name not in self.families:
                raise KeyError(f"{name} is not a declared family")
            fh = self._spool[name] = tempfile.TemporaryFile("w+", encoding="utf-8")
        ts = f"{timestamp_s:.3f}" if self.fmt == "openmetrics" else str(round(timestamp_s * 1000))
        fh.write(f"{name}{{{labels}}} {format_value(value)} {ts}\n")
        self.samples += 1

    def add_labelled(
        self, name: str, names: Sequence[str], values: Sequence[object], timestamp_s: float, value: float
    ) -> None:
        self.add(name, label_block(names, values), timestamp_s, value)

    def write(self, out: TextIO) -> None:
        """Every family with samples (HELP and TYPE, then its lines), ``# EOF`` for OpenMetrics."""
        for name, help_text in self.families.items():
            fh = self._spool.get(name)
            if fh is None:
                continue
            out.write(header(name, "gauge", help_text))
            fh.seek(0)
            shutil.copyfileobj(fh, out)
        if self.fmt == "openmetrics":
            out.write("# EOF\n")

    def close(self) -> None:
        for fh in self._spool.values():
            fh.close()
        self._spool.clear()

    def __enter__(self) -> BackfillWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
