"""json+ latency bins -> a Prometheus histogram (pure functions).

fio's ``clat_ns.bins`` maps a bucket midpoint in nanoseconds (a string) to a count, non-zero
buckets only, about 1 % wide (64 buckets per power of two). The counts are exact, so cumulating
them into fixed ``le`` edges gives a real histogram whose ``_count`` equals fio's ``N``. A bin
counts in every bucket whose edge is at or above its midpoint, so a bucket boundary can be off by
half a bin (< 1 %) of latency, never by a count.
"""

from __future__ import annotations

from bisect import bisect_left

#: Upper edges in seconds, 10 us to 10 s in a 1-2.5-5 series; documented in docs/fio.md.
#: +Inf is added by the exposition.
LATENCY_EDGES_SECONDS: tuple[float, ...] = (
    10e-6,
    25e-6,
    50e-6,
    100e-6,
    250e-6,
    500e-6,
    1e-3,
    2.5e-3,
    5e-3,
    10e-3,
    25e-3,
    50e-3,
    100e-3,
    250e-3,
    500e-3,
    1.0,
    2.5,
    5.0,
    10.0,
)


def cumulative_buckets(
    bins: dict[str, int], edges_s: tuple[float, ...] = LATENCY_EDGES_SECONDS
) -> tuple[list[int], int]:
    """Cumulative counts per edge (same order as ``edges_s``) and the total (the +Inf bucket)."""
    edges_ns = [e * 1e9 for e in edges_s]
    per_bucket = [0] * (len(edges_ns) + 1)
    total = 0
    for key, count in bins.items():
        try:
            mid = float(key)
            c = int(count)
        except (TypeError, ValueError):
            continue
        per_bucket[bisect_left(edges_ns, mid)] += c
        total += c
    out = []
    running = 0
    for c in per_bucket[:-1]:
        running += c
        out.append(running)
    return out, total


def quantile_from_buckets(
    q: float, cumulative: list[int], total: int, edges_s: tuple[float, ...] = LATENCY_EDGES_SECONDS
) -> float:
    """The upper edge of the first bucket holding the q-quantile (what a test can bound fio's own
    percentile by); +inf if it lies above the last edge."""
    rank = q * total
    for edge, c in zip(edges_s, cumulative):
        if c >= rank:
            return edge
    return float("inf")
