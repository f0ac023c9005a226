"""The storage model: every value derived from the scenario trace, mutually consistent."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from ioparallax.simulators.scenario import compile_scenario, list_scenarios, load_scenario
from ioparallax.simulators.scenario.storage import (
    EXTENT_GROUP_BYTES,
    MISALIGNED_SIGMA_EXTRA,
    OPLOG_CAPACITY_BYTES,
    RATE_WINDOW_S,
    READ_SOURCE_ROWS,
    WRITE_DESTINATION_ROWS,
    ZERO_READ_OPLOG_SHARE,
    StorageModel,
    _allocate,
    fold,
    lognormal_buckets,
    remote_share,
)

from .stargate_sim_helpers import EPOCH, moving_scenario, variant

LIBRARY = list_scenarios()


def model_for(name_or_sc, history_start: float = EPOCH - 7200):
    sc = load_scenario(name_or_sc) if isinstance(name_or_sc, str) else name_or_sc
    trace = compile_scenario(sc)
    return sc, trace, StorageModel(trace, history_start)


def views_and_windows(name: str, nows: tuple[float, ...]):
    """(the model's view, the trace's rate window) of every disk of scenario ``name`` at each of ``nows``."""
    sc, trace, model = model_for(name)
    for now in nows:
        t = trace.now(now)
        for disk in sc.disks:
            yield model.view(disk, now), trace.window(disk, t, RATE_WINDOW_S)


@pytest.mark.parametrize("name", LIBRARY)
def test_rates_and_totals_are_the_traces(name):
    for v, w in views_and_windows(name, (EPOCH, EPOCH + 37, EPOCH + 301)):
        assert v.read_ops_s == pytest.approx(w.read_ops / RATE_WINDOW_S)
        assert v.write_ops_s == pytest.approx(w.write_ops / RATE_WINDOW_S)
        assert v.read_bytes_s == pytest.approx(w.read_bytes / RATE_WINDOW_S)
        assert v.write_bytes_s == pytest.approx(w.write_bytes / RATE_WINDOW_S)
        assert v.read_latency_s == pytest.approx(w.read_latency_s)
        assert v.write_latency_s == pytest.approx(w.write_latency_s)
        assert v.random_ops_s == pytest.approx((w.read_random_ops + w.write_random_ops) / RATE_WINDOW_S)
        # Read sources add up to the frontend reads plus back-end RMW reads; destinations to writes.
        assert v.read_source_total == pytest.approx(v.read_bytes_s + v.rmw_read_bytes_s)
        assert v.write_destination_total == pytest.approx(v.write_bytes_s)
        assert all(b >= 0 for b in v.read_sources.values())
        # Zero reads: exactly the scenario's share, split estore / oplog zero.
        zero = v.read_sources["estore_zero"] + v.read_sources["oplog_zero"]
        assert zero == pytest.approx(w.read_zero_bytes / RATE_WINDOW_S)
        assert v.read_sources["oplog_zero"] == pytest.approx(zero * ZERO_READ_OPLOG_SHARE)
        assert v.write_destinations["oplog_zero"] == pytest.approx(w.write_zero_bytes / RATE_WINDOW_S)
        # Little's law and the derived means.
        assert v.qlen == pytest.approx((w.read_outstanding_s + w.write_outstanding_s) / RATE_WINDOW_S)
        assert 0 <= v.busy_ratio < 1
        # Folded page rows of every build add up to the same totals.
        for build in (2014, 2015, 2016):
            assert sum(b for _, b in fold(v.read_sources, READ_SOURCE_ROWS[build])) == pytest.approx(
                v.read_source_total
            )
            assert sum(b for _, b in fold(v.write_destinations, WRITE_DESTINATION_ROWS[build])) == pytest.approx(
                v.write_destination_total
            )


@pytest.mark.parametrize("name", LIBRARY)
def test_histograms_count_the_ops_of_the_window(name):
    for v, w in views_and_windows(name, (EPOCH, EPOCH + 5, EPOCH + 130)):
        assert v.read_latency_hist.total == round(w.read_ops)
        assert v.write_latency_hist.total == round(w.write_ops)
        assert v.read_size_hist.total == round(w.read_ops)
        assert v.write_size_hist.total == round(w.write_ops)
        for h, mean in ((v.read_latency_hist, w.read_latency_s), (v.write_latency_hist, w.write_latency_s)):
            assert len(h.counts) == 8
            if h.total:
                assert sum(h.percents) == pytest.approx(100.0)
                # Count-weighted mean of the bucket averages is the trace mean (up to the
                # integer split of counts).
                assert h.average == pytest.approx(mean, rel=0.02)
            for c, a, lo, hi in zip(
                h.counts,
                h.averages,
                (0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1),
                (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, math.inf),
            ):
                if c:
                    assert lo <= a < hi
                else:
                    assert a == 0
        if v.read_size_hist.total:
            assert v.read_size_hist.average == pytest.approx(w.read_bytes / w.read_ops, rel=0.01)


def test_clean_oltp_numbers_match_the_reference_row():
    sc, trace, model = model_for("clean-oltp")
    v = model.view(sc.disks[0], EPOCH)
    assert round(v.read_ops_s / 1000) == 2 and round(v.write_ops_s / 1000) == 1
    assert v.read_random_ratio == 1.0 and v.write_random_ratio == 1.0
    # reads mostly under 1 ms at ~400 us; writes mostly 2-5 ms at ~4.2 ms
    assert v.read_latency_hist.percents[0] > 90
    assert max(range(8), key=lambda i: v.write_latency_hist.counts[i]) == 2
    assert v.write_destinations["oplog"] == pytest.approx(v.write_bytes_s)
    assert {k for k, b in v.write_destinations.items() if b} == {"oplog"}
    assert v.read_size_hist.counts[1] == v.read_size_hist.total  # all 4 KiB


def test_cache_fit():
    # Working set inside the DRAM cache: every non-zero read from DRAM ("hero numbers").
    sc, _, model = model_for("cache-hero")
    v = model.view(sc.disks[0], EPOCH)
    assert v.read_sources["cache_dram"] == pytest.approx(v.read_bytes_s)
    # 200 GiB working set, 20 GiB cache: 10 % DRAM, flash cache up to 4x, rest SSD extent store.
    sc, _, model = model_for("clean-oltp")
    v = model.view(sc.disks[0], EPOCH)
    nonzero = v.read_bytes_s - v.read_sources["oplog"]
    assert v.read_sources["cache_dram"] / nonzero == pytest.approx(0.10)
    assert v.read_sources["cache_ssd"] / nonzero == pytest.approx(0.30)
    assert v.read_sources["estore_ssd"] / nonzero == pytest.approx(0.60)
    assert v.read_sources["estore_hdd"] == 0
    # A larger cache moves reads up: DRAM share follows dram_cache / working_set.
    sc, _, model = model_for(variant("clean-oltp", dram_cache="100GiB"))
    v = model.view(sc.disks[0], EPOCH)
    nonzero = v.read_bytes_s - v.read_sources["oplog"]
    assert v.read_sources["cache_dram"] / nonzero == pytest.approx(0.5)
    assert v.read_sources["estore_ssd"] == pytest.approx(0.0, abs=1e-6)


def test_ilm_moves_reads_from_hdd_to_ssd_to_cache_and_counts_upmigrations():
    sc, trace, model = model_for("ilm-upmigration", history_start=EPOCH - 86400 * 2)
    disk = sc.disks[0]
    base = EPOCH - trace.now(EPOCH)  # wall time of period second 0
    shares = []
    for t in (3, 30, 60, 90, 120, 150, 183, 250):
        v = model.view(disk, base + t)
        total = v.read_bytes_s
        shares.append(
            (
                t,
                v.read_sources["estore_hdd"] / total,
                v.read_sources["estore_ssd"] / total,
                (v.read_sources["cache_dram"] + v.read_sources["extent_cache"]) / total,
            )
        )
    hdd = [s[1] for s in shares]
    cache = [s[3] for s in shares]
    assert hdd[0] > 0.95  # cold: from HDD
    assert all(a > b for a, b in zip(hdd, hdd[1:6]))  # HDD share falls...
    assert hdd[-2] == 0 and hdd[-1] == 0  # ...to nothing after the 180 s ramp
    assert all(a <= b for a, b in zip(cache, cache[1:]))  # cache warms
    assert cache[-1] == pytest.approx(20 / 30)  # DRAM fit of 20 GiB cache / 30 GiB
    mid = {s[0]: s for s in shares}[90]
    assert mid[2] > mid[3]  # half way: more SSD than cache
    # Up-migrations: 30 GiB / 4 MiB extent groups per ramp, once per 300 s period.
    per_period = 30 * 1024**3 / EXTENT_GROUP_BYTES
    v = model.view(disk, base + 250)
    assert v.upmigrations == {300: round(per_period), 3600: round(12 * per_period), 86400: round(288 * per_period)}
    # Any 300 s window holds one whole ramp: at 90 s, the last 90 s of the previous one and the
    # first 90 s of this one.
    v = model.view(disk, base + 90)
    assert v.upmigrations[300] == round(per_period)


def test_upmigration_counts_are_clipped_to_history():
    sc, trace, _ = model_for("ilm-upmigration")
    base = EPOCH - trace.now(EPOCH)
    model = StorageModel(trace, history_start=base + 60)
    v = model.view(sc.disks[0], base + 120)
    per_period = 30 * 1024**3 / EXTENT_GROUP_BYTES
    assert v.upmigrations[300] == v.upmigrations[86400] == round(per_period * 60 / 180)
    # Not hybrid: no HDD tier, nothing to move up.
    sc, _, model = model_for(variant("ilm-upmigration", hybrid=False))
    v = model.view(sc.disks[0], EPOCH)
    assert v.read_sources["estore_hdd"] == 0 and v.upmigrations == {300: 0, 3600: 0, 86400: 0}


def test_working_set_one_hour_reads_zero_until_an_hour_of_history():
    sc, trace, _ = model_for("clean-oltp")
    disk = sc.disks[0]
    young = StorageModel(trace, history_start=EPOCH - 3599).view(disk, EPOCH)
    old = StorageModel(trace, history_start=EPOCH - 3600).view(disk, EPOCH)
    for kind in ("read", "write", "union"):
        assert young.wss[(kind, 3600)] == 0
        assert old.wss[(kind, 3600)] > old.wss[(kind, 120)] > 0
        assert young.wss[(kind, 120)] == old.wss[(kind, 120)]
    for v in (young, old):
        for span in (120, 3600):
            r, w, u = v.wss[("read", span)], v.wss[("write", span)], v.wss[("union", span)]
            assert max(r, w) <= u <= r + w + 1e-6
            assert u <= 200 * 1024**3
    # 2 minutes of 4 KiB random I/O over 200 GiB: nearly every byte is new.
    touched_r = 120 * 2000 * 4096
    assert old.wss[("read", 120)] == pytest.approx(touched_r, rel=0.01)
    # A working set that is covered many times over is capped at its size.
    sc, trace, model = model_for("cache-hero")
    v = model.view(sc.disks[0], EPOCH)
    assert v.wss[("read", 3600)] == pytest.approx(8 * 1024**3)


def test_write_destinations_oplog_or_extent_store():
    sc, _, model = model_for("postgres")
    data, log = sc.disks
    v = model.view(log, EPOCH)  # 16-32 KiB sequential log writes: into the oplog
    assert v.write_destinations["oplog"] == pytest.approx(v.write_bytes_s)
    assert v.write_random_ratio == pytest.approx(0.05)
    sc, _, model = model_for("misaligned")
    for disk in sc.disks:  # 1 MiB sequential: bypass the oplog
        v = model.view(disk, EPOCH)
        assert v.write_destinations["estore_ssd"] == pytest.approx(v.write_bytes_s)
        assert v.oplog_bytes == 0
    sc, _, model = model_for("zero-heavy")
    v = model.view(sc.disks[0], EPOCH)
    assert v.write_destinations["oplog_zero"] / v.write_destination_total == pytest.approx(0.40)
    assert v.write_destinations["oplog"] / v.write_destination_total == pytest.approx(0.60)
    zero = (v.read_sources["estore_zero"] + v.read_sources["oplog_zero"]) / v.read_source_total
    assert zero == pytest.approx(0.357)


def test_oplog_fills_during_checkpoint_bursts_and_drains_after():
    sc, trace, model = model_for("postgres")
    data = sc.disks[0]
    base = EPOCH - trace.now(EPOCH)
    levels = [model.view(data, base + t).oplog_bytes for t in range(60)]
    burst_end = 15
    assert all(a < b for a, b in zip(levels[:burst_end], levels[1 : burst_end + 1]))  # filling
    assert all(a > b for a, b in zip(levels[burst_end + 1 : 59], levels[burst_end + 2 : 60]))  # draining
    assert 0 < min(levels) and max(levels) <= OPLOG_CAPACITY_BYTES
    v = model.view(data, base + 10)
    assert v.oplog_fragments == pytest.approx(v.oplog_bytes / 8192)
    assert v.oplog_drain_ops_s == pytest.approx(v.oplog_drain_bytes_s / 8192)
    # Periodic steady state: the level at second 0 equals the one a period later.
    assert model.view(data, base).oplog_bytes == pytest.approx(model.view(data, base + 600).oplog_bytes)


def test_misaligned_write_only_disk_has_backend_reads_and_later_writes():
    sc, _, model = model_for("misaligned")
    aligned, misaligned = sc.disks
    va, vm = model.view(aligned, EPOCH), model.view(misaligned, EPOCH)
    assert va.read_ops_s == vm.read_ops_s == 0
    assert va.read_source_total == 0 and va.rmw_read_bytes_s == 0
    assert vm.rmw_read_bytes_s == pytest.approx(vm.write_ops_s * 2 * 4096)
    assert vm.read_sources["estore_ssd"] == pytest.approx(vm.rmw_read_bytes_s)
    assert vm.estore_outstanding > va.estore_outstanding * 2
    # The write latency distribution is widened beyond the stream's own sigma (same mean).
    s = misaligned.streams[0]
    plain = lognormal_buckets(s.write_latency_s, s.latency_sigma)
    tail_plain = sum(p for p, _ in plain[6:])
    tail = sum(vm.write_latency_hist.counts[6:]) / vm.write_latency_hist.total
    assert tail > tail_plain
    wide = lognormal_buckets(s.write_latency_s, s.latency_sigma + MISALIGNED_SIGMA_EXTRA)
    assert sum(p * m for p, m in wide) == pytest.approx(s.write_latency_s, rel=1e-6)


def test_moves_make_estore_reads_remote_then_local_again():
    sc = moving_scenario()
    mover = sc.disks[0]
    assert remote_share(mover, 299) == pytest.approx(1 / 300)  # localised since the move back at 0
    assert remote_share(mover, 300) == 1.0
    assert remote_share(mover, 450) == pytest.approx(0.5)
    assert remote_share(mover, 599) == pytest.approx(1 / 300)
    assert remote_share(mover, 0) == 1.0  # moves back to cvm-1 at the period start
    assert remote_share(sc.disks[1], 300) == 0.0
    _, trace, model = model_for(sc)
    base = EPOCH - trace.now(EPOCH)
    v = model.view(mover, base + 303)
    assert v.hosted_by == "cvm-2"
    assert v.read_sources["estore_ssd_remote"] > 0.9 * (
        v.read_sources["estore_ssd"] + v.read_sources["estore_ssd_remote"]
    )


def test_bursts_shorter_than_the_window_are_averaged():
    sc, trace, model = model_for("bursty-1m")
    base = EPOCH - trace.now(EPOCH)
    v = model.view(sc.disks[0], base + 1)  # window = seconds 598, 599, 0: the burst at 0
    assert v.write_ops_s == pytest.approx(400 / 3)
    assert v.write_latency_hist.total == 400
    v = model.view(sc.disks[0], base + 10)
    assert v.write_ops_s == 0 and v.write_latency_hist.total == 0 and v.busy_ratio == 0


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=12), st.integers(0, 10**7))
def test_allocate_sums_exactly(expected, total):
    counts = _allocate(expected, total)
    if sum(expected) > 0:
        assert sum(counts) == total
        assert all(c >= 0 for c in counts)
        assert all(c == 0 for c, e in zip(counts, expected) if e == 0)
    else:
        assert counts == [0] * len(expected)


@given(st.floats(min_value=1e-5, max_value=0.5), st.floats(min_value=0.05, max_value=1.5))
def test_lognormal_buckets_probabilities_and_mean(mean, sigma):
    buckets = lognormal_buckets(mean, sigma)
    assert sum(p for p, _ in buckets) == pytest.approx(1.0, abs=1e-9)
    assert sum(p * m for p, m in buckets) == pytest.approx(mean, rel=1e-6)


def test_views_are_cached_per_second():
    sc, _, model = model_for("zero-heavy")
    a = model.view(sc.disks[0], EPOCH + 0.1)
    assert model.view(sc.disks[0], EPOCH + 0.9) is a
    assert model.view(sc.disks[0], EPOCH + 1.0) is not a
