"""The verdict logic on synthetic series: each verdict, each "Not measurable" cause, the edges of each
threshold (strictly above is Distorted, as in the alerts). Thresholds are the shipped config's."""

from __future__ import annotations

import numpy as np
import pytest

from ioparallax.mixin.config import load_config
from ioparallax.report.analysis import disk_input
from ioparallax.report.data import Dataset
from ioparallax.report.verdicts import (
    BUFFERED_ANCHOR,
    MISALIGNED_IO_ANCHOR,
    DiskInput,
    State,
    bursts,
    cache_fit,
    hygiene,
    judge,
    misalignment,
    views_agree,
    zero_reads,
    zero_writes,
)

T = load_config().thresholds
N = 60
BUSY = 50 * 2**20  # 50 MiB/s: well above busy_bytes_per_second


def const(v: float, n: int = N) -> np.ndarray:
    return np.full(n, float(v))


def nan(n: int = N) -> np.ndarray:
    return np.full(n, np.nan)


def storage(**kw) -> DiskInput:
    base = dict(
        storage_read_bytes=const(BUSY),
        storage_write_bytes=const(BUSY),
        read_zero=const(0.0),
        write_zero=const(0.0),
        read_zero_measurable=const(1),
        write_zero_measurable=const(1),
        read_cache=const(0.1),
        working_set_to_cache=const(10.0),
        rmw_read_to_write=const(0.0),
    )
    base.update(kw)
    return DiskInput(**base)


# -- zero reads / writes ------------------------------------------------------------------------


def test_zero_reads_distorted_above_threshold_with_the_mean_share():
    v = zero_reads(storage(read_zero=const(0.4)), T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(0.4) and v.number == "40 %"
    assert v.anchor == "ioparallaxzeroheavyreads"


@pytest.mark.parametrize(
    "share,state", [(T.zero_read_ratio, State.OK), (T.zero_read_ratio + 1e-9, State.DISTORTED), (0.0, State.OK)]
)
def test_zero_reads_edge(share, state):
    assert zero_reads(storage(read_zero=const(share)), T).state is state


def test_zero_share_judged_only_while_busy():
    # 40 % zeros while idle (unwritten blocks of an idle vdisk) and 5 % while busy: OK at 5 %.
    traffic = np.where(np.arange(N) < 30, 1000.0, BUSY)
    share = np.where(np.arange(N) < 30, 0.4, 0.05)
    v = zero_reads(storage(storage_read_bytes=traffic, read_zero=share), T)
    assert v.state is State.OK and v.value == pytest.approx(0.05)


def test_zero_reads_idle_vdisk_is_ok_and_says_idle():
    v = zero_reads(storage(storage_read_bytes=const(1000), read_zero=const(1.0)), T)
    assert v.state is State.OK and v.number == "idle"


def test_zero_writes_not_measurable_without_oplog_zero():
    # A 2015 page build: the write share rule is absent, the measurable flag is 0.
    v = zero_writes(storage(write_zero=None, write_zero_measurable=const(0)), T)
    assert v.state is State.NOT_MEASURABLE
    assert "no Oplog Zero write destination" in v.sentence


def test_zero_not_measurable_when_the_storage_view_is_missing():
    inp = DiskInput(missing_views={"storage": 'every target of up{job="stargate"} was down'})
    for verdict in (zero_reads(inp, T), zero_writes(inp, T), cache_fit(inp, T)):
        assert verdict.state is State.NOT_MEASURABLE
        assert "storage view (Stargate exporter) missing" in verdict.sentence


def test_zero_reads_not_measurable_when_the_page_has_no_zero_source():
    v = zero_reads(storage(read_zero=None, read_zero_measurable=const(0)), T)
    assert v.state is State.NOT_MEASURABLE and "no zero read source" in v.sentence


# -- cache fit ------------------------------------------------------------------------------------


def test_cache_fit_distorted_when_reads_from_cache_and_working_set_fits():
    v = cache_fit(storage(read_cache=const(0.95), working_set_to_cache=const(0.4)), T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(0.95)


def test_cache_fit_ok_when_the_working_set_is_larger_than_the_cache():
    # The largest working set of the range counts: once above the cache, reads are not all from DRAM.
    wss = np.where(np.arange(N) == 10, 1.5, 0.4)
    v = cache_fit(storage(read_cache=const(0.95), working_set_to_cache=wss), T)
    assert v.state is State.OK and "larger than the cache" in v.sentence


@pytest.mark.parametrize("share,state", [(T.cache_read_ratio, State.OK), (T.cache_read_ratio + 0.001, State.DISTORTED)])
def test_cache_fit_edge(share, state):
    assert cache_fit(storage(read_cache=const(share), working_set_to_cache=const(0.5)), T).state is state


def test_cache_fit_not_measurable_without_working_set():
    v = cache_fit(storage(read_cache=const(0.95), working_set_to_cache=None), T)
    assert v.state is State.NOT_MEASURABLE and "working set" in v.sentence


# -- bursts ---------------------------------------------------------------------------------------


def guest_vm(iodepth: float, outstanding: float, **kw) -> DiskInput:
    base = dict(
        vm_bytes=const(BUSY),
        guest_bytes=const(BUSY),
        iodepth=const(iodepth),
        vm_outstanding=const(outstanding),
        buffered=const(0),
    )
    base.update(kw)
    return DiskInput(**base)


def test_bursts_distorted_is_littles_law_over_the_range():
    # QD 32 asked, 1.6 in flight by the VM's throughput x latency: ratio 20 (a 1 s burst every 20 s).
    v = bursts(guest_vm(32, 1.6), T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(20)


def test_bursts_ratio_of_means_not_mean_of_ratios():
    # The postgres sawtooth: 1m ratios of ~3 and ~110 (a window missing the checkpoint); the range's
    # Little's law gives 32 / mean(10, 10, 0.29) ~ 4.7: below 5, as the 5m ratio and the silent alert say.
    outstanding = np.tile([10.0, 10.0, 0.29], N // 3)
    v = bursts(guest_vm(32, 0, vm_outstanding=outstanding), T)
    assert v.state is State.OK and v.value == pytest.approx(32 / outstanding.mean())


@pytest.mark.parametrize(
    "outstanding,state", [(32 / T.burstiness_ratio, State.OK), (32 / T.burstiness_ratio * 0.999, State.DISTORTED)]
)
def test_bursts_edge(outstanding, state):
    assert bursts(guest_vm(32, outstanding), T).state is state


def test_buffered_io_is_not_called_bursts():
    v = bursts(guest_vm(16, 2, buffered=const(1)), T)
    assert v.state is State.NOT_MEASURABLE
    assert "asked queue depth not reached (buffered I/O)" in v.sentence
    assert "bursts averaged away" not in v.sentence.lower()
    assert v.anchor == BUFFERED_ANCHOR and v.value == pytest.approx(8)


def test_bursts_not_measurable_without_guest_or_vm_view():
    assert bursts(DiskInput(missing_views={"vm": "no target"}), T).state is State.NOT_MEASURABLE
    v = bursts(DiskInput(missing_views={"guest": "no target"}, vm_bytes=const(BUSY)), T)
    assert (
        v.state is State.NOT_MEASURABLE
        and "guest view (fio, DiskSPD or vdbench exporter) missing (no target)" in v.sentence
    )


def test_bursts_not_measurable_without_fio_job():
    inp = guest_vm(0, 1)
    inp.iodepth = nan()
    v = bursts(inp, T)
    assert v.state is State.NOT_MEASURABLE and "no fio job" in v.sentence


# -- bursts in the 2 s VM view (esxtop) -----------------------------------------------------------


def test_bursts_judged_on_esxtop_where_a_capture_covers_the_disk():
    # bursty-1m: esxtop's 2 s sample holding the 1 s burst over vCenter's 20 s sample reads 10. Little's
    # law (20 here) is not what the cell says: the VM view's own samples are.
    v = bursts(guest_vm(32, 1.6, esxtop_peak_ratio=const(10.0), esxtop_sample_seconds=2.0), T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(10)
    assert v.threshold == f"esxtop 2 s peak / vCenter 20 s peak > {T.burstiness_ratio:g}"
    assert "The VM view's 2 s samples (esxtop) peak at 10.0 times vCenter's 20 s ones" in v.sentence
    assert v.anchor == "ioparallaxburstaveragedaway"


def test_bursts_on_esxtop_need_no_guest_view_and_say_its_period():
    inp = DiskInput(
        missing_views={"guest": "no target"},
        vm_bytes=const(BUSY),
        esxtop_peak_ratio=const(1.1),
        esxtop_sample_seconds=5.0,
    )
    v = bursts(inp, T)
    assert v.state is State.OK and v.value == pytest.approx(1.1)
    assert "5 s samples (esxtop)" in v.sentence and "vCenter's 20 s" in v.sentence


@pytest.mark.parametrize("r,state", [(T.burstiness_ratio, State.OK), (T.burstiness_ratio * 1.001, State.DISTORTED)])
def test_bursts_esxtop_edge(r, state):
    assert bursts(guest_vm(1, 1, esxtop_peak_ratio=const(r), esxtop_sample_seconds=2.0), T).state is state


def test_bursts_on_esxtop_judge_a_buffered_disk_and_note_its_asked_depth():
    v = bursts(guest_vm(16, 2, buffered=const(1), esxtop_peak_ratio=const(1.0), esxtop_sample_seconds=2.0), T)
    assert v.state is State.OK and "runs buffered (direct=0)" in v.sentence


def test_bursts_fall_back_to_littles_law_where_esxtop_has_no_value_while_busy():
    # esxtop's ratio only where the disk is idle (vCenter's peak 0 elsewhere: no ratio): Little's law.
    ratio = nan()
    ratio[:5] = 10.0
    vm_bytes = const(BUSY)
    vm_bytes[:5] = 0.0
    v = bursts(guest_vm(32, 1.6, vm_bytes=vm_bytes, esxtop_peak_ratio=ratio), T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(20) and "asks QD 32" in v.sentence


# -- views agree ----------------------------------------------------------------------------------


def test_views_agree_ok_and_distorted():
    ok = views_agree(DiskInput(vm_bytes=const(BUSY), guest_bytes=const(BUSY * 1.1), storage_bytes=const(BUSY)), T)
    assert ok.state is State.OK
    bad = views_agree(DiskInput(vm_bytes=const(BUSY), guest_bytes=const(BUSY * 2), storage_bytes=const(BUSY)), T)
    assert bad.state is State.DISTORTED and bad.value == pytest.approx(2) and "guest" in bad.sentence


@pytest.mark.parametrize(
    "r,state",
    [
        (T.views_bytes_ratio, State.OK),
        (T.views_bytes_ratio * 1.001, State.DISTORTED),
        (1 / T.views_bytes_ratio, State.OK),
        (1 / T.views_bytes_ratio * 0.999, State.DISTORTED),
    ],
)
def test_views_agree_edges(r, state):
    assert views_agree(DiskInput(vm_bytes=const(BUSY), guest_bytes=const(BUSY * r)), T).state is state


def test_views_agree_skips_storage_while_bursting():
    inp = DiskInput(vm_bytes=const(BUSY), guest_bytes=const(BUSY), storage_bytes=const(BUSY * 1.8))
    assert views_agree(inp, T).state is State.DISTORTED
    v = views_agree(inp, T, bursting=True)
    assert v.state is State.OK and "storage not judged" in v.sentence


def test_views_agree_not_measurable_without_vm_view():
    v = views_agree(DiskInput(missing_views={"vm": "Prometheus scrapes no target"}, guest_bytes=const(BUSY)), T)
    assert v.state is State.NOT_MEASURABLE and "VM view (vCenter or Prism exporter) missing" in v.sentence


# -- misalignment ---------------------------------------------------------------------------------


def test_misaligned_partition_is_distorted():
    v = misalignment(DiskInput(partitions={"sdb1": 1536.0}), T)
    assert v.state is State.DISTORTED and "1,536 bytes" in v.sentence


def test_aligned_partition_and_no_rmw_is_ok():
    v = misalignment(storage(partitions={"sdb1": 1048576.0}, storage_read_bytes=const(0)), T)
    assert v.state is State.OK and v.number == "aligned"


def test_storage_rmw_heuristic_on_a_write_only_disk():
    v = misalignment(storage(partitions=None, storage_read_bytes=const(0), rmw_read_to_write=const(0.008)), T)
    assert v.state is State.DISTORTED and v.anchor == MISALIGNED_IO_ANCHOR and "heuristic" in v.sentence
    # Not write-only (the guest reads as much as it writes): the heuristic does not apply.
    v = misalignment(storage(partitions=None, storage_read_bytes=const(BUSY), rmw_read_to_write=const(0.008)), T)
    assert v.state is State.NOT_MEASURABLE


@pytest.mark.parametrize(
    "rmw,state",
    [(T.misaligned_read_to_write_ratio, State.OK), (T.misaligned_read_to_write_ratio * 1.01, State.DISTORTED)],
)
def test_rmw_edge(rmw, state):
    v = misalignment(storage(partitions={}, storage_read_bytes=const(0), rmw_read_to_write=const(rmw)), T)
    assert v.state is state


def test_misalignment_not_measurable_without_guest_and_storage():
    v = misalignment(DiskInput(missing_views={"guest": "down", "storage": "down"}), T)
    assert v.state is State.NOT_MEASURABLE and "guest view" in v.sentence and "storage view" in v.sentence


# -- hygiene --------------------------------------------------------------------------------------


def test_hygiene():
    assert hygiene(DiskInput(hygiene_problems=set()), T).state is State.OK
    v = hygiene(DiskInput(hygiene_problems={"zero_buffers"}), T)
    assert v.state is State.DISTORTED and "zero_buffers" in v.number
    v = hygiene(DiskInput(hygiene_problems=set(), buffered=const(1)), T)
    assert v.state is State.DISTORTED and "buffered_io" in v.number
    assert hygiene(DiskInput(missing_views={"guest": "down"}), T).state is State.NOT_MEASURABLE
    assert hygiene(DiskInput(), T).state is State.NOT_MEASURABLE


def test_judge_gives_every_trap_in_order():
    out = judge(
        storage(
            vm_bytes=const(BUSY),
            guest_bytes=const(BUSY),
            storage_bytes=const(BUSY),
            iodepth=const(4),
            vm_outstanding=const(4),
            buffered=const(0),
            partitions={},
            hygiene_problems=set(),
        ),
        T,
    )
    assert list(out) == ["views_agree", "zero_reads", "zero_writes", "cache_fit", "bursts", "misalignment", "hygiene"]
    assert {k for k, v in out.items() if v.state is not State.OK} == set()


def test_misalignment_without_vcenter_says_why_the_guest_cannot_be_matched():
    v = misalignment(DiskInput(missing_views={"vm": "every target was down"}), T)
    assert v.state is State.NOT_MEASURABLE
    assert "matched to VM disks by vCenter's disk UUID" in v.sentence and "every target was down" in v.sentence


# -- views agree at a ramp step (a fio job that started less than the settling time ago) ---------

SETTLE = 85.0  # 1m window + 20 s vCenter sample + a 5 s step


def joins_at(k: int, n: int = N, step: float = 5.0) -> DiskInput:
    """A VM disk whose fio job starts at step ``k`` (a VM joining a ramp): fio's rate per run second is
    full at once, the VM and storage 1m rates climb over the window (and vCenter's sample) after it."""
    i = np.arange(n, dtype=float)
    age = (i - k) * step  # seconds the job has run at each step
    climb = np.clip((age - 20) / 60, 0, 1)  # the VM's 1m rate, 20 s behind
    guest = np.where(age >= 0, float(BUSY), np.nan)
    return DiskInput(
        guest_bytes=guest,
        vm_bytes=BUSY * climb,
        storage_bytes=BUSY * np.clip(age / 60, 0, 1),
        job_elapsed=np.where(age >= 0, age, np.nan),
        settle_seconds=SETTLE,
    )


def test_views_agree_leaves_out_the_steps_before_a_joining_job_settled():
    inp = joins_at(35)  # 120 s of the job in the range
    # Without the job's age (an exporter without fio_job_elapsed_seconds) the climb reads Distorted...
    old = views_agree(DiskInput(guest_bytes=inp.guest_bytes, vm_bytes=inp.vm_bytes, storage_bytes=inp.storage_bytes), T)
    assert old.state is State.DISTORTED and old.value > T.views_bytes_ratio
    # ...with it, the steps where the job had run less than 85 s are left out and the rest agree exactly.
    v = views_agree(inp, T)
    assert v.state is State.OK and v.value == pytest.approx(1.0), v.sentence
    busy = inp.vm_bytes > T.busy_bytes_per_second
    left_out = int((busy & (inp.job_elapsed < SETTLE)).sum())
    assert left_out == 12 and f"{left_out} of {int(busy.sum())} busy steps left out" in v.sentence
    assert "a fio job had run less than the settling time (85 s" in v.sentence


def test_views_agree_still_distorted_after_the_join_when_the_views_differ():
    inp = joins_at(10)
    inp.guest_bytes = inp.guest_bytes * 1.5  # a settled disagreement is not hidden
    v = views_agree(inp, T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(1.5) and "left out" in v.sentence


def test_views_agree_not_measurable_when_the_job_never_settles():
    inp = joins_at(N - 10)  # joins 50 s before the range's end
    v = views_agree(inp, T)
    assert v.state is State.NOT_MEASURABLE and v.number == ""
    assert "no settled step" in v.sentence and "a fio job had run less than the settling time" in v.sentence


def test_views_agree_judges_steps_without_a_running_job():
    # Steps without a running job (the job's age absent: no job, or one that finished) are judged as
    # before: only a known young age leaves a step out.
    inp = DiskInput(
        vm_bytes=const(BUSY),
        guest_bytes=const(BUSY),
        storage_bytes=const(BUSY),
        job_elapsed=nan(),
        settle_seconds=SETTLE,
    )
    v = views_agree(inp, T)
    assert v.state is State.OK and "left out" not in v.sentence


def stops_at(k: int, n: int = N, step: float = 5.0, vm_lag: float = 25.0) -> DiskInput:
    """A VM disk whose fio job has run for long and stops at step ``k`` (its job's age absent from
    then: a finished job): the storage's 1m rate (2 s counters) drains over the window from the stop,
    the VM's ``vm_lag`` seconds later (a 20 s sample published late, then probed)."""
    t = np.arange(n, dtype=float) * step
    stop = k * step
    storage = BUSY * np.clip(1 - (t - stop) / 60, 0, 1)
    vm = BUSY * np.clip(1 - (t - stop - vm_lag) / 60, 0, 1)
    return DiskInput(
        guest_bytes=np.where(t < stop, float(BUSY), np.nan),
        vm_bytes=vm,
        storage_bytes=storage,
        job_elapsed=np.where(t < stop, 600 + t, np.nan),
        settle_seconds=SETTLE,
        step_seconds=step,
    )


def test_views_agree_leaves_out_the_steps_while_a_stopped_jobs_windows_drain():
    # A job stops 30 s into the range: the storage's rate drains at once, the VM's 25 s later, so over
    # the draining steps storage/VM reads low (0.71 here; the e2e db-density once read 0.78 on a busy
    # machine, where vCenter's lag grows): a lag, not bytes the views disagree on.
    inp = stops_at(6)
    old = views_agree(DiskInput(guest_bytes=inp.guest_bytes, vm_bytes=inp.vm_bytes, storage_bytes=inp.storage_bytes), T)
    assert old.state is State.DISTORTED and old.value < 1 / T.views_bytes_ratio, old.sentence
    v = views_agree(inp, T)
    assert v.state is State.OK and v.value == pytest.approx(1.0), v.sentence
    assert "busy steps left out: a fio job had stopped less than the settling time before (85 s" in v.sentence
    assert "still draining" in v.sentence and "had run less" not in v.sentence
    # Without the step (a caller that does not know it) only the start is known: judged as before.
    inp.step_seconds = 0.0
    assert views_agree(inp, T).state is State.DISTORTED


def test_views_agree_leaves_out_the_drain_of_a_job_that_stopped_just_before_the_range():
    # No job runs at the range's first step, but fio's own 1m rate still has its bytes: it stopped
    # within the window, and the first settling time of steps drains: every busy step here.
    inp = stops_at(0)
    inp.guest_bytes = np.where(np.arange(N) < 10, float(BUSY) * (1 - np.arange(N) / 12), np.nan)
    v = views_agree(inp, T)
    assert v.state is State.NOT_MEASURABLE and "no settled step" in v.sentence, v.sentence
    assert "still draining" in v.sentence and "had run less" not in v.sentence
    # With no trace of a job before it (fio's rate empty at the first step) the steps are judged.
    inp.guest_bytes = nan()
    assert views_agree(inp, T).state is State.DISTORTED


def test_views_agree_not_measurable_for_a_job_shorter_than_the_settling_time():
    # db-density's last VM: a 60 s job (shorter than the 85 s settling time) inside the range: every
    # busy step is climbing or draining, none says whether the views count the same bytes.
    inp = joins_at(20)
    t = np.arange(N, dtype=float) * 5.0
    stop = 32 * 5.0
    inp.job_elapsed = np.where(t < stop, inp.job_elapsed, np.nan)
    inp.storage_bytes = np.where(t < stop, inp.storage_bytes, BUSY * np.clip(1 - (t - stop) / 60, 0, 1))
    inp.vm_bytes = np.where(t < stop + 20, inp.vm_bytes, inp.vm_bytes.max() * np.clip(1 - (t - stop - 20) / 60, 0, 1))
    inp.step_seconds = 5.0
    v = views_agree(inp, T)
    assert v.state is State.NOT_MEASURABLE, v.sentence
    assert "no settled step" in v.sentence and "had run less" in v.sentence and "still draining" in v.sentence


def test_settling_sentence_names_the_configs_rate_window():
    # A config with windows.rate 2m settles in 145 s (2m + 20 s + a 5 s step): the sentence names the
    # window the rules were made with, not the shipped 1m.
    inp = joins_at(10)
    inp.settle_seconds, inp.rate_window = 145.0, "2m"
    v = views_agree(inp, T)
    assert "settling time (145 s: the rules' 2m rate window, a 20 s vCenter sample and a step)" in v.sentence
    assert "2m rates were still climbing" in v.sentence and "1m" not in v.sentence
    b = bursts(joins_at_qd(10, asked=32, true_ratio=1, settle=145.0, window="2m"), T)
    assert "the rules' 2m rate window" in b.sentence and "1m" not in b.sentence


def test_settling_sentence_from_the_dataset_the_report_fetched():
    # analysis.disk_input hands the verdicts the window data.fetch took from the config (ctx.config.w).
    ds = Dataset(times=np.arange(N) * 5.0, settle_seconds=145.0, rate_window="2m")
    assert disk_input(ds, ("vm1", "scsi0:1")).rate_window == "2m"


# -- bursts at a ramp step: the same bias as views_agree had --------------------------------------


def joins_at_qd(k: int, asked: float, true_ratio: float, settle: float = SETTLE, window: str = "") -> DiskInput:
    """A direct fio job at QD ``asked`` that starts at step ``k``: the asked depth is there at once
    (vm_disk:ioparallax_guest_iodepth:sum is a gauge), the VM view's Little's-law concurrency
    (rate of latency x ops over the 1m window, from 20 s samples published late) climbs from 0 with
    the VM's bytes; settled, it is ``asked / true_ratio``."""
    inp = joins_at(k)
    climb = inp.vm_bytes / BUSY
    age = inp.job_elapsed
    inp.iodepth = np.where(age >= 0, asked, np.nan)
    inp.vm_outstanding = asked / true_ratio * climb
    inp.buffered = np.where(age >= 0, 0.0, np.nan)
    inp.settle_seconds, inp.rate_window = settle, window
    return inp


def _without_age(inp: DiskInput) -> DiskInput:
    """The same series without the job's age (an exporter without fio_job_elapsed_seconds, or the
    verdict before it left unsettled steps out)."""
    return DiskInput(
        vm_bytes=inp.vm_bytes, guest_bytes=inp.guest_bytes, iodepth=inp.iodepth, vm_outstanding=inp.vm_outstanding
    )


def test_bursts_steady_job_joining_near_the_end_is_not_called_bursts():
    # Steady QD 32 (asked = implied once settled) joining 35 s before the range's end: the VM view is
    # busy at 25, 30, 35 s of the job's age, its implied concurrency then 1/12 to 1/4 of the asked
    # depth: the range's Little's law reads 6, "bursts", on a steady disk.
    inp = joins_at_qd(N - 8, asked=32, true_ratio=1)
    old = bursts(_without_age(inp), T)
    assert old.state is State.DISTORTED and old.value == pytest.approx(6.0)
    v = bursts(inp, T)
    assert v.state is State.NOT_MEASURABLE and v.number == ""
    assert "no settled step: at each of the 3 steps" in v.sentence
    assert "the concurrency the VM view implies" in v.sentence and "asked queue depth was there at once" in v.sentence


def test_bursts_mid_range_join_biases_the_ratio_of_means_upwards():
    # A truly moderate burstiness of 4 (below 5) joining mid-range (120 s of the job in the range):
    # the 12 climbing steps pull the VM's mean concurrency down to 0.725 of its settled value, and
    # the range reads 4 / 0.725 = 5.5: Distorted. Over the settled steps it is 4 exactly.
    inp = joins_at_qd(35, asked=32, true_ratio=4)
    old = bursts(_without_age(inp), T)
    assert old.state is State.DISTORTED and old.value == pytest.approx(4 / 0.725)
    v = bursts(inp, T)
    assert v.state is State.OK and v.value == pytest.approx(4.0), v.sentence
    assert "12 of 20 busy steps left out: a fio job had run less than the settling time (85 s" in v.sentence


def test_bursts_still_distorted_when_a_joining_job_really_bursts():
    # Leaving the climb out hides no real burst: a 1 s burst every 20 s (ratio 20) stays Distorted.
    v = bursts(joins_at_qd(10, asked=32, true_ratio=20), T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(20) and "left out" in v.sentence


def test_bursts_judges_steps_without_a_running_job_age():
    v = bursts(guest_vm(32, 1.6, job_elapsed=nan(), settle_seconds=SETTLE), T)
    assert v.state is State.DISTORTED and v.value == pytest.approx(20) and "left out" not in v.sentence


def test_verdicts_name_prism_and_its_30s_samples_on_ahv():
    # the same numbers as on ESXi give the same states; only the words name the VM view's source
    inp = guest_vm(32, 1.6)
    inp.vm_source, inp.vm_sample_seconds = "prism", 30.0
    v = bursts(inp, T)
    assert v.state is State.DISTORTED and "Prism's 30 s samples average away" in v.sentence
    assert "vCenter" not in v.sentence
    esx = bursts(guest_vm(32, 1.6), T)
    assert esx.state is v.state and "vCenter's 20 s samples" in esx.sentence
    off = DiskInput(vm_bytes=const(BUSY), guest_bytes=const(BUSY * 2), vm_source="prism", vm_sample_seconds=30.0)
    d = views_agree(off, T)
    assert d.state is State.DISTORTED and "the bytes Prism counted" in d.sentence


def test_misalignment_on_a_windows_guest_is_judged_by_its_split_ios():
    """windows_exporter has no partition offset: Windows' split I/O share is the guest's hint."""
    split = DiskInput(split_ios=np.full(N, 0.98))
    v = misalignment(split, T)
    assert v.state is State.DISTORTED and v.number == "split 98 %" and v.anchor == "ioparallaxguestsplitio"
    v = misalignment(DiskInput(split_ios=np.r_[np.zeros(N - 1), np.nan]), T)
    assert v.state is State.OK and v.number == "split 0 %" and "windows_exporter" in v.sentence
    # a Linux partition offset, where there is one, is the reliable signal and comes first
    v = misalignment(DiskInput(partitions={"sdb1": 1536.0}, split_ios=np.zeros(N)), T)
    assert v.state is State.DISTORTED and v.number == "sdb1 at 1,536 B"


def test_hygiene_names_the_tool_and_its_runbook_section():
    busy = np.full(N, 50e6)
    v = hygiene(
        DiskInput(vm_bytes=busy, guest_bytes=busy, hygiene_problems={"reads_unwritten_file"}, tool="diskspd"), T
    )
    assert v.state is State.DISTORTED and v.number == "reads_unwritten_file"
    assert v.anchor == "ioparallaxdiskspdtargethygiene" and v.sentence.startswith("The DiskSPD result's options")
    v = hygiene(DiskInput(vm_bytes=busy, guest_bytes=busy, hygiene_problems=set(), tool="fio"), T)
    assert v.state is State.OK and v.anchor == "ioparallaxfiojobhygiene" and "fio job's" in v.sentence
