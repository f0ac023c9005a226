"""Plausibility warnings for scenario files: numbers that validate but contradict each other.

``ioparallax-scenario check`` prints them after the file's OK line. They are warnings, not errors:
a scenario may contradict Little's law on purpose (``buffered-qd`` does), and then its ``expect:``
says what the rules make of it.

Little's law for a steady stream: I/Os in flight = ops/s x latency. A fio job without pacing keeps
its ``iodepth`` full, so the scenario's iodepth, IOPS and latency must agree within
:data:`LITTLE_TOLERANCE`; otherwise the simulated guest asks for a depth that its own numbers do
not reach (or exceed), and the burstiness rule reads bursts that the scenario did not model.
"""

from __future__ import annotations

from ioparallax.exporters.fio.hygiene import is_direct

from .model import DiskspdOptions, Scenario, Stream

# Asked iodepth over the concurrency the stream's rates imply, outside [1/x, x]: a warning. 1.5
# leaves room for the log-normal latency spread and for rounding a default depth; the library's
# direct streams sit within 1.4.
LITTLE_TOLERANCE = 1.5

# fio options that pace a job below its depth (a rate limit, think time, or sync calls between
# the I/Os whose time the stream's latency does not include): the depth is then only a maximum.
PACING_OPTIONS = ("rate", "rate_iops", "rate_min", "rate_iops_min", "thinktime", "fsync", "fdatasync")


def asked_iodepth(stream: Stream) -> int:
    """The depth the simulated fio job reports: its ``iodepth`` option, else the stream's."""
    try:
        return int(stream.fio_options.get("iodepth", stream.iodepth))
    except ValueError:
        return stream.iodepth


def implied_concurrency(stream: Stream) -> float:
    """I/Os in flight by Little's law while the stream is active (ops/s x mean latency)."""
    return stream.read_iops * stream.read_latency_s + stream.write_iops * stream.write_latency_s


def little_warnings(scenario: Scenario, tolerance: float = LITTLE_TOLERANCE) -> list[str]:
    """One line per stream whose iodepth, IOPS and latency contradict Little's law.

    Buffered streams (fio ``direct`` not set, or ``direct=0``) asking for more than one I/O warn
    that the depth will not be reached (buffered libaio submits synchronously). Direct, steady
    (no ``burst``), unpaced streams warn when the asked depth and the implied concurrency differ by
    more than ``tolerance`` either way. Each line names the stream's key in the file."""
    out: list[str] = []
    for vi, vm in enumerate(scenario.vms):
        for di, disk in enumerate(vm.disks):
            for si, s in enumerate(disk.streams):
                where = f"vms[{vi}].disks[{di}].streams[{si}] ({s.name})"
                depth, implied = asked_iodepth(s), implied_concurrency(s)
                ratio = depth / implied
                if vm.load_generator == "diskspd":
                    # DiskSPD's overlapped I/O keeps its -o outstanding even buffered; without -Sh
                    # (buffered) the guest's cache answers, which is DiskSPD hygiene, not Little's law.
                    if not (s.diskspd or DiskspdOptions()).disable_os_cache:
                        continue
                elif vm.load_generator != "fio":
                    pass  # vdbench: the depth is its threads= per SD, kept full direct or not
                elif not is_direct(s.fio_options):
                    if depth > 1:
                        out.append(
                            f"{where}: buffered I/O (fio direct not 1): iodepth {depth} will not be reached, "
                            f"buffered libaio submits synchronously; the rates imply {implied:.1f} in flight "
                            f'(asked/implied {ratio:.1f}). Set direct: "1", or a sync engine with numjobs.'
                        )
                    continue
                if s.burst is not None:
                    continue  # bursty: judged by the burstiness rule, not here
                paced = sorted(k for k in PACING_OPTIONS if k in s.fio_options)
                if ratio > tolerance and not paced:
                    fix = "Lower iodepth, raise the IOPS or latency, or pace" if depth > 1 else "Pace"
                    out.append(
                        f"{where}: iodepth {depth} but {s.read_iops + s.write_iops:g} IO/s at the stream's "
                        f"latency imply {implied:.2f} in flight (Little's law; asked/implied {ratio:.1f}, "
                        f"tolerance {tolerance:g}): a steady fio job keeps its depth full. {fix} the job "
                        "(fio_options rate_iops or thinktime)."
                    )
                elif ratio < 1 / tolerance:
                    out.append(
                        f"{where}: {s.read_iops + s.write_iops:g} IO/s at the stream's latency imply "
                        f"{implied:.2f} in flight, more than iodepth {depth} allows (Little's law; "
                        f"implied/asked {1 / ratio:.1f}, tolerance {tolerance:g}). Raise iodepth or "
                        "lower the IOPS or latency."
                    )
    return out
