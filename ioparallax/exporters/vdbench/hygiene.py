"""Benchmark hygiene checks on a vdbench parameter file (pure functions).

The same traps as fio's (docs/hygiene.md), read from what vdbench was asked to do: the
``sd=``/``wd=``/``rd=`` definitions of parmfile.html (or a parameter file before the run, for
``ioparallax-check``) and, once the run writes them, the flatfile's requested columns
(``lunsize``, ``compratio``, ``dedupratio``). A run is judged on the storage definitions it
uses: ``rd=`` -> its ``wd=`` (wildcards allowed) -> their ``sd=``.

Without a parmfile the parmfile checks cannot tell and find nothing (never "OK" by guess): the
collector exports only what the flatfile shows.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass

from ioparallax.exporters.common.hygiene import HygieneConfig
from ioparallax.exporters.vdbench.parse import Parmfile, parse_vdbench_size

#: Problem names (the ``problem`` label), in the order they are checked. ``buffered_io``,
#: ``working_set_below_cache`` and ``short_runtime`` are fio's names for the same traps.
PROBLEMS = (
    "buffered_io",
    "working_set_below_cache",
    "compratio_requested",
    "dedupratio_requested",
    "short_runtime",
    "percentile_from_stddev",
)

#: openflags values that bypass the guest's page cache (Linux o_direct, Solaris directio).
DIRECT_FLAGS = ("o_direct", "directio")
#: Raw devices that are unbuffered whatever the flags (Solaris rdsk, Linux raw bindings).
RAW_DEVICE = re.compile(r"^/dev/(rdsk|raw)/")


@dataclass(frozen=True)
class Finding:
    problem: str
    where: str  # "rd=rd1", "sd=sd1": the definition the finding is about
    detail: str


def _names(value: str | None, names: list[str]) -> list[str]:
    """The definitions a ``wd=``/``sd=`` value names: ``sd1``, ``sd*``, ``(sd1,sd2)``."""
    if not value:
        return []
    out: list[str] = []
    for pat in value.strip("()").split(","):
        pat = pat.strip()
        if pat:
            out.extend(n for n in names if fnmatch.fnmatchcase(n, pat) and n not in out)
    return out


def run_storage(pf: Parmfile, rd: str) -> tuple[list[str], list[str]]:
    """(wd names, sd names) a run uses."""
    wds = _names(pf.rd.get(rd, {}).get("wd"), list(pf.wd))
    sds: list[str] = []
    for wd in wds:
        for sd in _names(pf.wd[wd].get("sd"), list(pf.sd)):
            if sd not in sds:
                sds.append(sd)
    return wds, sds


def is_direct(sd: dict[str, str]) -> bool:
    flags = sd.get("openflags", "").lower()
    if any(f in flags for f in DIRECT_FLAGS):
        return True
    return bool(RAW_DEVICE.match(sd.get("lun", "")))


def _ratio(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _range_share(value: str | None) -> float:
    """The share of the LUN a ``range=(lo,hi)`` covers (percent of the LUN; 1 when absent)."""
    if not value:
        return 1.0
    parts = value.strip("()").split(",")
    try:
        if len(parts) == 2:
            lo, hi = float(parts[0]), float(parts[1])
        else:
            lo, hi = 0.0, float(parts[0])
    except ValueError:
        return 1.0
    if 0 <= lo < hi <= 100:
        return (hi - lo) / 100.0
    return 1.0


def working_set_bytes(pf: Parmfile, rd: str, lunsize_bytes: float | None = None) -> float | None:
    """The bytes a run touches: its sds' ``size=`` (or the flatfile's ``lunsize``, all LUNs),
    narrowed by the wds' ``range=`` (the widest one). None when no size is known."""
    wds, sds = run_storage(pf, rd)
    sizes = [parse_vdbench_size(pf.sd[s].get("size")) for s in sds]
    total: float | None
    if sds and all(s is not None for s in sizes):
        total = float(sum(s for s in sizes if s is not None))
    else:
        total = lunsize_bytes
    if total is None:
        return None
    shares = [_range_share(pf.wd[w].get("range")) for w in wds] or [1.0]
    return total * max(shares)


def parmfile_findings(pf: Parmfile, config: HygieneConfig, lunsize_bytes: float | None = None) -> list[Finding]:
    """Every trap in a parameter file, per definition (what ``ioparallax-check`` prints)."""
    out: list[Finding] = []
    for name, sd in pf.sd.items():
        if not is_direct(sd):
            out.append(
                Finding(
                    "buffered_io",
                    f"sd={name}",
                    f"lun={sd.get('lun', '?')} has no openflags=o_direct: reads and writes go through the "
                    "guest's page cache",
                )
            )
    for rd in pf.rd:
        if config.cache_size_bytes:
            wss = working_set_bytes(pf, rd, lunsize_bytes)
            if wss is not None and wss < config.cache_size_bytes:
                out.append(
                    Finding(
                        "working_set_below_cache",
                        f"rd={rd}",
                        f"touches {wss / 2**30:.3g} GiB, less than the {config.cache_size_bytes / 2**30:.3g} GiB cache",
                    )
                )
        elapsed = _ratio(pf.rd[rd].get("elapsed"))
        if elapsed is not None and elapsed < config.min_scrape_intervals * config.scrape_interval_s:
            out.append(
                Finding(
                    "short_runtime",
                    f"rd={rd}",
                    f"elapsed={elapsed:g}s is under {config.min_scrape_intervals} scrape intervals "
                    f"({config.scrape_interval_s:g}s)",
                )
            )
    for key, problem in (("compratio", "compratio_requested"), ("dedupratio", "dedupratio_requested")):
        value = _ratio(pf.general.get(key))
        if value is not None and value > 1:
            out.append(
                Finding(
                    problem,
                    f"{key}={value:g}",
                    f"vdbench writes data that reduces {value:g}:1 by design; the result holds only if the "
                    "storage achieves that ratio (compare with what the storage reports)",
                )
            )
    return out


def run_problems(
    pf: Parmfile | None,
    rd: str,
    requested: dict[str, float | None],
    config: HygieneConfig,
    normal_percentile: bool = False,
) -> list[str]:
    """Problem names for one run: the parmfile's definitions it uses, and the flatfile's
    requested columns (``compratio``, ``dedupratio``, ``lunsize`` in GiB) of its rows."""
    found: list[str] = []
    lunsize = requested.get("lunsize")
    lunsize_bytes = lunsize * 2**30 if lunsize is not None else None
    if pf is not None and rd in pf.rd:
        _, sds = run_storage(pf, rd)
        if any(not is_direct(pf.sd[s]) for s in sds):
            found.append("buffered_io")
        if config.cache_size_bytes:
            wss = working_set_bytes(pf, rd, lunsize_bytes)
            if wss is not None and wss < config.cache_size_bytes:
                found.append("working_set_below_cache")
    elif config.cache_size_bytes and lunsize_bytes is not None and lunsize_bytes < config.cache_size_bytes:
        found.append("working_set_below_cache")
    general = pf.general if pf is not None else {}
    for key, problem in (("compratio", "compratio_requested"), ("dedupratio", "dedupratio_requested")):
        value = requested.get(key)
        if value is None:
            value = _ratio(general.get(key))
        if value is not None and value > 1:
            found.append(problem)
    if pf is not None and rd in pf.rd:
        elapsed = _ratio(pf.rd[rd].get("elapsed"))
        if elapsed is not None and elapsed < config.min_scrape_intervals * config.scrape_interval_s:
            found.append("short_runtime")
    if normal_percentile:
        found.append("percentile_from_stddev")
    return found


def run_cannot_tell(
    pf: Parmfile | None, rd: str, requested: dict[str, float | None], config: HygieneConfig
) -> list[str]:
    """Checks that cannot decide for this run (said so rather than passed as OK): buffered I/O
    and a short run need the run's parmfile definitions; the working set needs a size."""
    out: list[str] = []
    known = pf is not None and rd in pf.rd
    if not known:
        out.append("buffered_io")
    if config.cache_size_bytes:
        lunsize = requested.get("lunsize")
        lunsize_bytes = lunsize * 2**30 if lunsize is not None else None
        if (working_set_bytes(pf, rd, lunsize_bytes) if known and pf is not None else lunsize_bytes) is None:
            out.append("working_set_below_cache")
    if not known:
        out.append("short_runtime")
    return out


def normal_percentile_matches(stated_ms: float, mean_ms: float, stddev_ms: float, tolerance: float = 0.02) -> bool:
    """Whether a stated '95th percentile' is mean + 1.645 x stddev (within ``tolerance``)."""
    estimate = mean_ms + 1.645 * stddev_ms
    return abs(stated_ms - estimate) <= tolerance * max(estimate, 1e-9)
