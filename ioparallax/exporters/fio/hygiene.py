"""Benchmark hygiene checks on a job's merged fio options (pure functions).

Each problem is a trap that makes a fio result say more about the test than about the storage;
docs/hygiene.md explains each one and what to change. Options are read as fio prints them in its
JSON: raw strings, only options given *with a value* (a bare ``zero_buffers`` line in a job file
is not printed by fio and cannot be seen here: write ``zero_buffers=1``).
"""

from __future__ import annotations

import re

from ioparallax.exporters.common.hygiene import HygieneConfig
from ioparallax.exporters.fio.parse import JobRecord

#: Problem names, as exported in the ``problem`` label, in the order they are checked.
PROBLEMS = (
    "zero_buffers",
    "compressible_without_pattern",
    "compressible_without_refill",
    "buffered_io",
    "gtod_reduce",
    "working_set_below_cache",
    "short_runtime",
)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtpe]?)(i?)(b?)\s*$", re.IGNORECASE)
_POW = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5, "e": 6}


def fio_size(value: str | None) -> int | None:
    """fio's size syntax (``4k``, ``64m``, ``1GiB``, ``512``) in bytes, base 1024 as fio's default
    ``kb_base``; None for what is not a plain size (percentages, ranges, missing)."""
    if value is None:
        return None
    m = _SIZE.match(value)
    if not m:
        return None
    size = float(m.group(1)) * 1024 ** _POW[m.group(2).lower()]
    if not size < 2**64:  # also infinity: beyond any size fio takes (a 400-digit "size")
        return None
    return int(size)


_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(us|usec|ms|msec|s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_TIME_UNITS = {
    None: 1.0,
    "s": 1.0,
    "sec": 1.0,
    "us": 1e-6,
    "usec": 1e-6,
    "ms": 1e-3,
    "msec": 1e-3,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def fio_seconds(value: str | None) -> float | None:
    """fio's time syntax (``30``, ``30s``, ``2m``, ``500ms``; plain numbers are seconds)."""
    if value is None:
        return None
    m = _TIME.match(value)
    if not m:
        return None
    unit = m.group(2).lower() if m.group(2) else None
    return float(m.group(1)) * _TIME_UNITS[unit]


def _flag(options: dict[str, str], name: str) -> bool | None:
    """A boolean option: True/False when given, None when fio did not print it."""
    raw = options.get(name)
    if raw is None:
        return None
    return raw.strip().lower() not in ("0", "false", "no", "off", "")


def _int_option(options: dict[str, str], name: str) -> int | None:
    raw = options.get(name)
    if raw is None:
        return None
    try:
        return int(raw.strip().rstrip("%"))
    except ValueError:
        return None


def is_direct(options: dict[str, str]) -> bool:
    """``direct=1`` or ``buffered=0``; neither given means buffered I/O (fio's default)."""
    direct = _flag(options, "direct")
    if direct is not None:
        return direct
    buffered = _flag(options, "buffered")
    return buffered is False


def working_set_bytes(options: dict[str, str]) -> int | None:
    """The job's working set from ``size`` (or ``filesize``), or None when not a plain size."""
    for key in ("size", "filesize", "io_size"):
        value = fio_size(options.get(key))
        if value:
            return value
    return None


def find_problems(job: JobRecord, config: HygieneConfig, finished: bool = False) -> list[str]:
    """Problems found in ``job.options`` (global options already merged in)."""
    opts = job.options
    found: list[str] = []
    if _flag(opts, "zero_buffers"):
        found.append("zero_buffers")
    compress = _int_option(opts, "buffer_compress_percentage")
    compressible = compress is not None and compress > 0
    if compressible and not opts.get("buffer_pattern"):
        found.append("compressible_without_pattern")
    if compressible and not _flag(opts, "refill_buffers"):
        found.append("compressible_without_refill")
    if not is_direct(opts):
        found.append("buffered_io")
    if _flag(opts, "gtod_reduce"):
        found.append("gtod_reduce")
    wss = working_set_bytes(opts)
    if config.cache_size_bytes and wss is not None and wss < config.cache_size_bytes:
        found.append("working_set_below_cache")
    runtime = fio_seconds(opts.get("runtime"))
    if runtime is None and finished and job.job_runtime_ms is not None:
        runtime = job.job_runtime_ms / 1000.0
    if runtime is not None and runtime < config.min_scrape_intervals * config.scrape_interval_s:
        found.append("short_runtime")
    return found
