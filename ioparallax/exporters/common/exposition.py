"""A small writer of Prometheus' text exposition format (version 0.0.4), for the /probe answers
of the network exporters (stargate, vcenter, prism). The exporters that watch files (fio, diskspd,
vdbench, esxtop, pgbench) serve /metrics through prometheus_client and use this module for their
label values (:func:`printable`) and for the backfill files of diskspd and esxtop
(:mod:`~ioparallax.exporters.common.backfill`).

A probe of 1,000 vdisks or VMs has 60,000-100,000 sample lines. prometheus_client builds a
Python object per sample and re-validates and re-escapes every label of every line in
``generate_latest`` (~1-1.5 s of CPU for such a probe). Here a caller escapes a row's label
block once (:func:`label_block`, or by hand with :func:`escape_label_value`) and reuses it for
every family of that row; each sample line is one f-string (~0.1 s for such a probe).

The output is what ``generate_latest`` writes for the same families (HELP and TYPE also for a
family without samples; counters named with ``_total``; a gauge histogram as a ``histogram``
family of ``_bucket`` lines followed by ``_gcount`` and ``_gsum`` gauge families), except for
sample values: a float is written in Python's shortest round-trip form (``20971520.0``, where
``generate_latest`` writes ``2.097152e+07``), an int as an integer (``1``, where it writes
``1.0``). Prometheus parses each to the same float.

A bucket's ``le`` is a label value, not a number, to Prometheus 2.x: ``le="1048576.0"`` and
``le="1.048576e+06"`` are two different series. So ``le`` is written exactly as
``generate_latest`` writes it, with prometheus_client's own ``floatToGoString`` (``4096.0``,
``0.001``, ``1.048576e+06``, ``+Inf``): an exponent from 1e6 up, as Go's ``strconv`` 'g' form
that client_golang writes (which differs only for whole numbers below 1e6: ``4096``).

Label values longer than 1,024 characters are cut (``labels.cap``, counted). Escaping, as the
format defines it: label values escape backslash, double quote and line feed;
HELP text escapes backslash and line feed. Before that, a label value's lone surrogates (text
UTF-8 cannot carry: see :func:`printable`) are written as ``\\xff`` or ``\\ud800``. Metric and
label names are the callers' constants and are not checked here.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Sequence

from prometheus_client.utils import floatToGoString

from ioparallax.exporters.common.labels import cap

_LABEL_VALUE_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n"})
_HELP_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n"})


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def printable(value: str) -> str:
    """``value`` as text UTF-8 can carry. A file name that is not valid UTF-8 comes from the OS
    with each undecodable byte as a lone surrogate (Python's surrogateescape); JSON's ``\\ud800``
    gives one too. UTF-8 cannot encode them, so one of them in a label value failed the whole
    exposition (an HTTP 500 hiding every other series). Each byte is written ``\\xff`` (the way
    the logs and ``ls -b`` show it), any other lone surrogate ``\\ud800``; other text is returned
    as it is (the common case costs one ``isascii``)."""
    if value.isascii():
        return value
    return _SURROGATE.sub(_escape_surrogate, value)


def escape_label_value(value: object) -> str:
    return printable(cap(str(value))).translate(_LABEL_VALUE_ESCAPES)


def escape_help(text: str) -> str:
    return text.translate(_HELP_ESCAPES)


def label_block(names: Iterable[str], values: Iterable[object]) -> str:
    """``vm="a",disk="scsi0:1"`` (no braces): escape once, reuse for every family of a row."""
    return ",".join(f'{n}="{printable(cap(str(v))).translate(_LABEL_VALUE_ESCAPES)}"' for n, v in zip(names, values))


def format_value(value: float) -> str:
    """A sample value: a float in its shortest exact form (``1.0``, ``0.08``, ``1e-06``), an int
    as an integer (``1``), and the format's spellings ``NaN``, ``+Inf``, ``-Inf``."""
    if type(value) is float and value - value == 0:  # finite: the common case first
        return repr(value)
    if type(value) is int:
        return str(value)
    value = float(value)
    if value != value:
        return "NaN"
    if value - value != 0:
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def header(name: str, kind: str, help_text: str) -> str:
    """The ``# HELP`` and ``# TYPE`` lines of a family."""
    return f"# HELP {name} {help_text.translate(_HELP_ESCAPES)}\n# TYPE {name} {kind}\n"


class Family:
    """One family filled a sample at a time, for writers that walk their rows once and add to
    many families per row. ``labels``: a label block without braces ("" for none)."""

    __slots__ = ("name", "kind", "help", "lines")

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name, self.kind, self.help = name, kind, help_text
        self.lines: list[str] = []

    def add(self, labels: str, value: float) -> None:
        self.lines.append(
            f"{self.name}{{{labels}}} {format_value(value)}\n" if labels else f"{self.name} {format_value(value)}\n"
        )

    def write(self, parts: list[str]) -> None:
        parts.append(header(self.name, self.kind, self.help))
        parts.extend(self.lines)

    def text(self) -> str:
        parts: list[str] = []
        self.write(parts)
        return "".join(parts)


class GaugeHistogram:
    """A gauge histogram (a distribution of a recent window, not cumulative over time), written
    as ``generate_latest`` writes prometheus_client's GaugeHistogramMetricFamily in format 0.0.4:
    a ``histogram``-typed family of cumulative ``_bucket`` lines, then ``_gcount`` and ``_gsum``
    gauge families with the same HELP."""

    __slots__ = ("name", "buckets", "gcount", "gsum", "_les")

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.buckets = Family(name, "histogram", help_text)
        self.gcount = Family(f"{name}_gcount", "gauge", help_text)
        self.gsum = Family(f"{name}_gsum", "gauge", help_text)
        self._les: dict[tuple[float, ...], list[str]] = {}  # bounds -> their written `le="..."}`

    def add(self, labels: str, bounds: Sequence[float], counts: Iterable[float], total: float) -> None:
        """One histogram: ``bounds`` ascending upper bounds (the last +Inf), ``counts`` per
        bucket (not cumulative), ``total`` the sum of the observations."""
        key = tuple(bounds)
        les = self._les.get(key)
        if les is None:  # the same few bound lists for every row: written once
            les = self._les[key] = [f'le="{floatToGoString(b)}"}} ' for b in key]
        prefix = f"{self.name}_bucket{{{labels}," if labels else f"{self.name}_bucket{{"
        lines = self.buckets.lines
        cum = 0.0
        for le, count in zip(les, counts):
            cum += count
            lines.append(f"{prefix}{le}{format_value(cum)}\n")
        self.gcount.add(labels, cum)
        self.gsum.add(labels, total)

    def write(self, parts: list[str]) -> None:
        self.buckets.write(parts)
        self.gcount.write(parts)
        self.gsum.write(parts)

    def text(self) -> str:
        parts: list[str] = []
        self.write(parts)
        return "".join(parts)


class Exposition:
    """Families appended in order; :meth:`render` gives the body of the HTTP answer."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def family(self, name: str, kind: str, help_text: str, samples: Iterable[tuple[str, float]] = ()) -> None:
        """One family: HELP and TYPE (also when it has no sample, as prometheus_client does),
        then one line per (label block, value); an empty label block writes no braces."""
        parts = self._parts
        parts.append(header(name, kind, help_text))
        fmt = format_value
        parts.extend([f"{name}{{{labels}}} {fmt(v)}\n" if labels else f"{name} {fmt(v)}\n" for labels, v in samples])

    def unlabelled(self, families: Iterable[tuple[str, str, str, float]]) -> None:
        """Families of one sample without labels, in order: (name, type, HELP, value) each."""
        for name, kind, help_text, value in families:
            self.family(name, kind, help_text, [("", value)])

    def add(self, *families: Family | GaugeHistogram) -> None:
        """Families filled sample by sample."""
        for fam in families:
            fam.write(self._parts)

    def append_text(self, text: str) -> None:
        """Families already written (e.g. kept from an earlier probe)."""
        self._parts.append(text)

    def text(self) -> str:
        return "".join(self._parts)

    def render(self) -> bytes:
        text = "".join(self._parts)
        # Let the ~100,000 line strings go before encoding: the peak is then the lines and the
        # text, or the text and the bytes, not all three (~6 MB less for a 1,000-vdisk probe).
        self._parts = [text]
        return text.encode("utf-8")


def write_families(families: Iterable[Family | GaugeHistogram]) -> bytes:
    """The body of an answer from families given one at a time (a generator that fills each and
    then lets it go): each family's lines become bytes as soon as it is written, so the peak is
    the body and one family's lines, not every line, the text and the body at once (a
    4,000-vdisk Stargate answer: ~40 MB less)."""
    body = io.BytesIO()
    for fam in families:
        parts: list[str] = []
        fam.write(parts)
        body.write("".join(parts).encode("utf-8"))
        del parts
    return body.getvalue()  # the buffer itself (shrunk), not a copy
