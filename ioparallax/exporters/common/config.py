"""Configuration checking shared by the exporters and simulators.

Every error raised here names the file and the key (a dotted path such as
``targets.vc1.password_env``) so a user can fix the file without reading code. Files are read by
the project's one YAML loader, :func:`ioparallax.yamlconf.load_yaml` (re-exported here with
:class:`ConfigError`, so ``from ioparallax.exporters.common.config import load_yaml`` keeps working).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

from ioparallax.yamlconf import ConfigError as ConfigError, cut, load_yaml as load_yaml

T = TypeVar("T")


class Section:
    """A mapping read from a config file that knows where it came from.

    ``Section(data, path, "targets.vc1").get("port", int, default=443)`` raises a
    ConfigError naming ``targets.vc1.port`` when the value has the wrong type.
    Unknown keys are reported by :meth:`reject_unknown`, so typos do not pass silently.
    """

    def __init__(self, data: Any, path: str | os.PathLike[str] | None, key: str = ""):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(path, key or None, f"expected a mapping, got {type(data).__name__}")
        self.data: dict[str, Any] = data
        self.path = path
        self.key = key
        self._seen: set[str] = set()

    def child_key(self, name: str | int) -> str:
        if isinstance(name, int):
            return f"{self.key}[{name}]"
        return f"{self.key}.{name}" if self.key else str(name)

    def error(self, name: str | None, message: str) -> ConfigError:
        return ConfigError(self.path, self.child_key(name) if name is not None else (self.key or None), message)

    _MISSING = object()

    def get(
        self, name: str, kind: type | tuple[type, ...] | Callable[[Any], T] = object, default: Any = _MISSING
    ) -> Any:
        self._seen.add(name)
        if name not in self.data or self.data[name] is None:
            if default is Section._MISSING:
                raise self.error(name, "is required")
            return default
        value = self.data[name]
        if isinstance(kind, type) or isinstance(kind, tuple):
            kinds = kind if isinstance(kind, tuple) else (kind,)
            # bool is an int in Python; a YAML `true` where a number is expected is a mistake.
            if bool not in kinds and isinstance(value, bool) and any(k in (int, float) for k in kinds):
                raise self.error(name, f"expected {_names(kinds)}, got a boolean")
            if float in kinds and isinstance(value, int) and not isinstance(value, bool):
                return float(value)
            if not isinstance(value, kinds):
                raise self.error(name, f"expected {_names(kinds)}, got {type(value).__name__} {cut(value)}")
            return value
        try:
            return kind(value)
        except (ValueError, TypeError, OverflowError) as exc:
            raise self.error(name, str(exc)) from exc

    def section(self, name: str, required: bool = False) -> Section:
        self._seen.add(name)
        if name not in self.data:
            if required:
                raise self.error(name, "is required")
            return Section({}, self.path, self.child_key(name))
        return Section(self.data[name], self.path, self.child_key(name))

    def sections(self, name: str, required: bool = False) -> list[Section]:
        """A list of mappings under ``name``."""
        self._seen.add(name)
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.error(name, "is required")
            return []
        if not isinstance(value, list):
            raise self.error(name, f"expected a list, got {type(value).__name__}")
        key = self.child_key(name)
        return [Section(item, self.path, f"{key}[{i}]") for i, item in enumerate(value)]

    def reject_unknown(self) -> None:
        unknown = sorted(set(self.data) - self._seen)
        if unknown:
            raise self.error(unknown[0], f"unknown key (known: {', '.join(sorted(self._seen)) or 'none'})")


def _names(kinds: tuple[type, ...]) -> str:
    words = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "a boolean",
        list: "a list",
        dict: "a mapping",
    }
    return " or ".join(words.get(k, k.__name__) for k in kinds)


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
