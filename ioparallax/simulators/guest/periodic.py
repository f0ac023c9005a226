"""Per-second series of one scenario period, kept as prefix sums so that a sum over any stretch of
wall-clock seconds (which may span many periods) costs two look-ups. The fio and diskstats models
of the guest simulator count this way, and so do its Windows counters: :func:`io_seconds` and
:class:`IoSums` give each of them a disk's (or one stream's) I/O."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ioparallax.simulators.scenario import BlockSizeMix, Disk, Trace


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


#: Per period second: read ops, write ops, read bytes, write bytes, read latency, write latency.
IoSeconds = tuple[list[float], list[float], list[float], list[float], list[float], list[float]]


@dataclass(frozen=True)
class IoSums:
    """What a disk (or one stream of it) did per direction over one period, as prefix sums (index
    t: seconds [0, t)): ops, bytes and latency (the sum over the ops of their latency), and per
    second (not a prefix) the average number of requests in flight (Little's law: the latency sum
    of the second)."""

    read_ops: tuple[float, ...]
    write_ops: tuple[float, ...]
    read_bytes: tuple[float, ...]
    write_bytes: tuple[float, ...]
    read_latency: tuple[float, ...]
    write_latency: tuple[float, ...]
    inflight: tuple[float, ...]

    @classmethod
    def of(cls, seconds: IoSeconds, latency_unit: float = 1.0) -> IoSums:
        """The sums of the per-second series of :func:`io_seconds` (``latency_unit`` as given there)."""
        ro, wo, rb, wb, rl, wl = (prefix_sums(v) for v in seconds)
        inflight = tuple((r + w) / latency_unit for r, w in zip(seconds[4], seconds[5]))
        return cls(ro, wo, rb, wb, rl, wl, inflight)


def io_seconds(
    trace: Trace,
    disk: Disk,
    streams: Iterable[int] | None = None,
    *,
    requests: Callable[[BlockSizeMix], float] | None = None,
    latency_unit: float = 1.0,
) -> IoSeconds:
    """Per period second, summed over the ``streams`` of ``disk`` (indexes, default all): read
    ops, write ops, read bytes, write bytes, read latency, write latency. ``requests(size mix)``
    is the number of requests an op of the stream becomes (ops and latency count requests; default
    1); ``latency_unit`` is the latency's unit per second (1000.0: milliseconds)."""
    p = trace.period
    ro, wo, rb, wb, rl, wl = ([0.0] * p for _ in range(6))
    for si in range(len(disk.streams)) if streams is None else streams:
        s = disk.streams[si]
        fr, fw = (requests(s.read_size), requests(s.write_size)) if requests else (1.0, 1.0)
        for t, a in enumerate(trace.activity[disk.key][si]):
            if a <= 0:
                continue
            r, w = s.read_iops * a, s.write_iops * a
            ro[t] += r * fr
            wo[t] += w * fw
            rb[t] += r * s.read_size.mean_bytes
            wb[t] += w * s.write_size.mean_bytes
            rl[t] += r * fr * s.read_latency_s * latency_unit
            wl[t] += w * fw * s.write_latency_s * latency_unit
    return ro, wo, rb, wb, rl, wl
