"""A VM disk whose fio job ended at (or just before) the report range's start: the guest view has no
value for it in the range, while the VM and storage views' 1m windows still show the I/O that
ended before the range for up to a window and a vCenter sample (scaling-ramp's jobs all end at
the period's wrap). Synthetic series on the report's step grid."""

from __future__ import annotations

import numpy as np

from ioparallax.mixin.config import load_config
from ioparallax.report.data import Dataset
from ioparallax.report.verdicts import DiskInput, State, hygiene

T = load_config().thresholds
N = 75  # a 75 s range at a 1 s step
SETTLE = 81  # 1m window + 20 s vCenter sample + 1 step
BUSY = 50 * 2**20
A, B = ("web-01", "scsi0:1"), ("web-02", "scsi0:1")


def decay(last: int, n: int = N) -> np.ndarray:
    """Busy until index ``last`` (the window forgetting I/O from before the range), then 0."""
    out = np.zeros(n)
    out[: last + 1] = np.linspace(BUSY, BUSY / 20, last + 1)
    return out


def dataset(vm_b: np.ndarray, storage_b: np.ndarray, guest_b: np.ndarray | None = None) -> Dataset:
    busy = np.full(N, float(BUSY))
    guest = {A: busy}
    if guest_b is not None:
        guest[B] = guest_b
    return Dataset(
        times=np.arange(N, dtype=float),
        settle_points=SETTLE,
        series={
            "guest_read_bytes": guest,
            "vm_read_bytes": {A: busy, B: vm_b},
            "storage_read_bytes": {A: busy, B: storage_b},
        },
    )


def test_windows_tail_of_io_before_the_range_is_idle_not_judged():
    ds = dataset(decay(55), decay(58))
    assert ds.tail_only(B) and not ds.tail_only(A)
    assert ds.disks() == [A] and ds.idle_disks() == [B]


def test_io_after_the_windows_settled_is_judged_even_without_a_fio_job():
    vm_b = decay(55)
    vm_b[-5:] = BUSY  # I/O well after the windows' memory of the range's start
    ds = dataset(vm_b, decay(58))
    assert not ds.tail_only(B) and ds.disks() == [A, B]
    # A 3-minute range: busy at 100 s, past the settle steps.
    ds = Dataset(
        times=np.arange(180.0),
        settle_points=SETTLE,
        series={
            "guest_read_bytes": {A: np.full(180, float(BUSY))},
            "vm_read_bytes": {A: np.full(180, float(BUSY)), B: np.where(np.arange(180) == 100, BUSY, 0.0)},
        },
    )
    assert ds.disks() == [A, B]


def test_a_disk_with_a_fio_job_in_the_range_is_judged():
    guest_b = np.full(N, np.nan)
    guest_b[60:] = BUSY
    ds = dataset(decay(55), decay(58), guest_b)
    assert not ds.tail_only(B) and ds.disks() == [A, B]


def test_without_any_guest_view_nothing_is_dropped():
    ds = Dataset(
        times=np.arange(N, dtype=float),
        settle_points=SETTLE,
        series={"vm_read_bytes": {A: decay(55)}, "storage_read_bytes": {A: decay(58)}},
    )
    assert ds.disks() == [A]


def test_hygiene_says_the_vm_view_saw_io_that_no_fio_job_explains():
    vm_b = np.zeros(N)
    vm_b[20:40] = BUSY
    v = hygiene(DiskInput(vm_bytes=vm_b, guest_bytes=None), T)
    assert v.state is State.NOT_MEASURABLE
    assert "no fio job, DiskSPD run or vdbench host measured this disk at any step of the range" in v.sentence
    assert "busy (above 1 MiB/s) at 20 of 75 steps" in v.sentence or "at 20 of 75 steps" in v.sentence
    assert (
        hygiene(DiskInput(vm_bytes=np.zeros(N)), T).sentence
        == "Not measurable: no fio job, DiskSPD run or vdbench host on this disk."
    )
