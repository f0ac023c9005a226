"""Benchmark hygiene checks on a DiskSPD target (pure functions), for the exporter and the check.

The same rules judge a target read from a ``-Rxml`` result (what DiskSPD ran) and one read from a
DiskSPD command line before the run (``ioparallax-check``): both are first turned into a
:class:`TargetSpec`. Each finding is a ``trap`` (the result will say more about the test than about
the storage) or ``cannot_tell`` (the input does not say: a ``sequential`` write pattern in the XML
is DiskSPD's default *or* ``-Zr``, which DiskSPD does not record). docs/hygiene.md explains each.
"""

from __future__ import annotations

from dataclasses import dataclass

from ioparallax.exporters.common.hygiene import CANNOT_TELL, TRAP, Finding, HygieneConfig
from ioparallax.exporters.diskspd.parse import TargetProfile, TargetResult, TimeSpanProfile

#: Problem names, as exported in the ``problem`` label, in the order they are checked. Shared with
#: fio's where the trap is the same (``zero_buffers``, ``buffered_io``, ``working_set_below_cache``,
#: ``short_runtime``).
PROBLEMS = (
    "zero_buffers",
    "default_write_pattern",
    "reads_unwritten_file",
    "buffered_io",
    "working_set_below_cache",
    "no_warmup",
    "short_runtime",
)


@dataclass(frozen=True)
class TargetSpec:
    """What a DiskSPD target was asked to do, whichever way we learnt it."""

    path: str
    write_ratio: int  # percent of I/Os that write (-w)
    #: sequential (DiskSPD's repeating 0x00..0xFF buffer: the default), zero (-Z), random
    #: (-Z<size>), random_per_io (-Zr), sequential_or_random_per_io (the XML's "sequential": it
    #: cannot tell the default from -Zr)
    write_pattern: str
    os_cache: bool  # True: buffered (no -Su/-Sh/-h)
    warmup_s: float
    duration_s: float
    working_set_bytes: int | None  # bytes the target's I/O ranges over; None when unknown
    creates_file: bool  # -c: DiskSPD (re)creates the file before the run


def _size(n: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n} B"


def find_problems(spec: TargetSpec, config: HygieneConfig) -> list[Finding]:
    out: list[Finding] = []
    writes = spec.write_ratio > 0
    reads = spec.write_ratio < 100
    if writes and spec.write_pattern == "zero":
        out.append(
            Finding(
                "zero_buffers",
                TRAP,
                "-Z writes all-zero buffers: the storage stores metadata only (zero suppression) "
                "and later reads of them touch no disk",
            )
        )
    if writes and spec.write_pattern == "sequential":
        out.append(
            Finding(
                "default_write_pattern",
                TRAP,
                "no -Z option: DiskSPD writes its default buffer, the bytes 0x00..0xFF repeated, "
                "which deduplicates and compresses to almost nothing",
            )
        )
    elif writes and spec.write_pattern == "sequential_or_random_per_io":
        out.append(
            Finding(
                "default_write_pattern",
                CANNOT_TELL,
                "the result says pattern 'sequential': DiskSPD's default repeating buffer "
                "(dedupes, compresses) or -Zr (fresh random data per I/O, fine); DiskSPD does not "
                "record which",
            )
        )
    if spec.creates_file and reads:
        out.append(
            Finding(
                "reads_unwritten_file",
                TRAP,
                "-c (re)creates the file before every run and, run elevated, only sets its valid "
                "length (SetFileValidData): reads then hit never-written blocks, which the storage "
                "answers from its zero buckets without a disk (else the file is filled with "
                "DiskSPD's repeating pattern, or zeros with -Z)",
            )
        )
    if spec.os_cache:
        out.append(
            Finding(
                "buffered_io",
                TRAP,
                "the OS cache is used (no -Sh/-Su): reads may come from the guest's memory and "
                "writes return when they reach it",
            )
        )
    if (
        config.cache_size_bytes
        and spec.working_set_bytes is not None
        and spec.working_set_bytes < config.cache_size_bytes
    ):
        out.append(
            Finding(
                "working_set_below_cache",
                TRAP,
                f"the target's working set ({_size(spec.working_set_bytes)}) is smaller than the "
                f"storage cache ({_size(config.cache_size_bytes)}): reads are served from memory",
            )
        )
    if spec.warmup_s <= 0:
        out.append(
            Finding(
                "no_warmup",
                TRAP,
                "-W0: measurement starts with the first I/O, while queues, caches and tiers are still filling",
            )
        )
    floor = config.min_scrape_intervals * config.scrape_interval_s
    if spec.duration_s < floor:
        out.append(
            Finding(
                "short_runtime",
                TRAP,
                f"the measured run lasts {spec.duration_s:g} s, under {config.min_scrape_intervals} "
                f"scrape intervals ({floor:g} s): the VM and storage views see a couple of samples at most",
            )
        )
    return out


def working_set(profile: TargetProfile, file_size: int | None) -> int | None:
    """Bytes the target's I/O ranges over: from the base offset (-B) to the max size (-f) or the
    file's size (the result's, else -c's); None when unknown."""
    size = file_size or profile.file_size
    end = profile.max_file_size or size
    if not end:
        return None
    if size:
        end = min(end, size)
    return max(end - profile.base_file_offset, 0)


def spec_from_result(profile: TimeSpanProfile, target: TargetResult) -> TargetSpec | None:
    """A target of a ``-Rxml`` result as a spec (None for a target that matches no profile target)."""
    tp = target.profile
    if tp is None:
        return None
    pattern = tp.write_pattern
    if pattern == "sequential":
        pattern = "sequential_or_random_per_io"
    return TargetSpec(
        path=tp.path,
        write_ratio=tp.write_ratio,
        write_pattern=pattern,
        os_cache=tp.os_cache or tp.memory_mapped_io,
        warmup_s=profile.warmup_s,
        duration_s=profile.duration_s,
        working_set_bytes=working_set(tp, target.file_size),
        creates_file=tp.file_size is not None and _is_file(tp.path),
    )


def _is_file(path: str) -> bool:
    """DiskSPD creates regular files only: not ``#<n>`` (a physical drive) nor ``X:`` (a volume)."""
    return not (path.startswith("#") or (len(path) == 2 and path[1] == ":"))
