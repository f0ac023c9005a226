"""Sizes and durations as the project's files and flags write them (exporters, simulators, the
mixin, the report, ioparallax-check): one grammar each, in one place.

Each parser raises ValueError with a short message quoting the value (:func:`ioparallax.yamlconf.cut`);
:meth:`ioparallax.yamlconf.Section.get` turns it into a ConfigError naming the file and the key.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ioparallax.yamlconf import cut

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
    "tib": 1024**4,
}


def parse_bytes(value: Any) -> int:
    """``4k``, ``4KiB``, ``1 MiB``, ``20GB`` or a plain number -> bytes (binary multiples,
    as fio and Nutanix use them)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size such as 4KiB, got {cut(value)}")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise ValueError(f"expected a size of 0 bytes or more, got {cut(value)}")
        return int(value)
    text = str(value).strip().lower().replace(" ", "")
    num = text.rstrip("kmgtib")
    unit = text[len(num) :]
    if unit not in _UNITS or not num or not num.isascii() or "_" in num:  # float() takes "1_0" and "４"
        raise ValueError(f"expected a size such as 4KiB or 1MiB, got {cut(value)}")
    try:
        n = float(num)
    except ValueError:
        raise ValueError(f"expected a size such as 4KiB or 1MiB, got {cut(value)}") from None
    size = n * _UNITS[unit]
    if size < 0 or not math.isfinite(size):
        raise ValueError(f"expected a size of 0 bytes or more, got {cut(value)}")
    return int(size)


# -- durations: the one grammar of the project (exporters, simulators, mixin, report) ----------

#: Prometheus' units, largest first, in seconds (a year is 365 days, as Prometheus counts it).
_PROMETHEUS_UNITS = (
    ("y", 365 * 86400),
    ("w", 7 * 86400),
    ("d", 86400),
    ("h", 3600),
    ("m", 60),
    ("s", 1),
    ("ms", 0.001),
)
#: Prometheus' duration grammar (prometheus/common ``model.ParseDuration``): whole numbers, each
#: unit at most once and from the largest down: ``1h30m``, ``500ms``, ``2d``, ``1w``, ``1y``.
_PROMETHEUS_DURATION = re.compile("".join(f"(?:([0-9]+){unit})?" for unit, _ in _PROMETHEUS_UNITS))
#: One decimal number with one unit (``1.5m``, ``250us``), the form the exporters' flags and files
#: took before they took Prometheus' grammar.
_SINGLE_UNIT = {"us": 1e-6, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def prometheus_duration_seconds(text: str) -> float | None:
    """Seconds of a duration in Prometheus' grammar (lower case, as Prometheus has it; a bare
    ``0`` too, as Prometheus takes it), or None when ``text`` is not one."""
    if text == "0":
        return 0.0
    m = _PROMETHEUS_DURATION.fullmatch(text)
    if not text or m is None:
        return None
    # Prometheus holds a duration in Go's time.Duration, int64 nanoseconds: past ~292 years
    # (106751d23h47m16s854ms) it refuses the text as out of range, and so does this.
    nanoseconds = sum(int(n) * round(mult * 1e9) for n, (_, mult) in zip(m.groups(), _PROMETHEUS_UNITS) if n)
    if nanoseconds > 2**63 - 1:
        return None
    return float(sum(int(n) * mult for n, (_, mult) in zip(m.groups(), _PROMETHEUS_UNITS) if n))


def parse_prometheus_duration(value: Any) -> str:
    """A duration written into rules and PromQL (``rate(x[1m])``, ``for: 5m``): exactly
    Prometheus' grammar, returned as written."""
    text = value.strip() if isinstance(value, str) else None
    if text is None or prometheus_duration_seconds(text) is None:
        raise ValueError(f"expected a Prometheus duration such as 30s, 1m, 5m or 1h30m, got {cut(value)}")
    return text


def parse_duration(value: Any) -> float:
    """A duration in seconds from a config file or flag: Prometheus' grammar (``1h30m``, ``500ms``,
    ``2d``, ``1w``, ``1y``), or one decimal number with one unit of us, ms, s, m, h (``1.5m``,
    ``250us``), or a plain number of seconds (``20``, ``0.5``); units in any case (``20S``)."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 20s, got {cut(value)}")
    seconds: float | None
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        seconds = prometheus_duration_seconds(text)
        if seconds is None:
            seconds = _single_unit_seconds(text)
    if seconds is None or not math.isfinite(seconds):
        raise ValueError(f"expected a duration such as 500ms, 20s, 5m or 1h30m, got {cut(value)}")
    return seconds


def _single_unit_seconds(text: str) -> float | None:
    number, unit = text, ""
    for suffix in ("us", "ms", "s", "m", "h"):  # "ms" and "us" before "s"
        if text.endswith(suffix):
            number, unit = text[: -len(suffix)], suffix
            break
    try:
        return float(number) * _SINGLE_UNIT.get(unit, 1.0)
    except ValueError:
        return None
