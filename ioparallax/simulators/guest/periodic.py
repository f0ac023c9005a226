"""Per-second series of one scenario period, kept as prefix sums so that a sum over any stretch of
wall-clock seconds (which may span many periods) costs two look-ups. The fio and diskstats models
of the guest simulator both count this way."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def prefix_sums(values: Iterable[float]) -> tuple[float, ...]:
    """``out[t]`` = sum of ``values[:t]`` (``len(values) + 1`` entries, ``out[0]`` = 0)."""
    out = [0.0]
    acc = 0.0
    for v in values:
        acc += v
        out.append(acc)
    return tuple(out)


def periodic_sum(prefix: Sequence[float], period: int, a: int, b: int) -> float:
    """Sum over seconds [a, b) since the origin of the series that repeats every ``period`` seconds
    and whose prefix sums over one period are ``prefix``. For wall-clock seconds use
    :meth:`Trace.periodic_sum`, which subtracts the scenario's origin first."""

    def upto(x: int) -> float:
        return (x // period) * prefix[period] + prefix[x % period]

    return upto(b) - upto(a)
