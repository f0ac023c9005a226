"""The simulator's vdbench output directory reads back through the exporter's reader to the
numbers it was given (within what vdbench's formats print), while it grows and once finished."""

from __future__ import annotations

import pytest

from ioparallax.exporters.vdbench.tailer import WatchConfig, Watcher
from ioparallax.simulators.guest.periodic import periodic_sum
from ioparallax.simulators.guest.vdbench import (
    HostInterval,
    RunDefinition,
    TraceVdbench,
    VdbenchOutput,
    _vm_series,
    aggregate,
)
from ioparallax.simulators.guest.writer import GuestWriter
from ioparallax.simulators.scenario import compile_scenario, load_scenario
from tests.vdbench.test_vdbench_reader import exposition, has, samples, value

T0 = 1_764_151_200.0  # 2025-11-26 10:00 UTC


def host_numbers(i: int) -> dict[str, HostInterval]:
    return {
        "vm-a": HostInterval(2000 + 10 * i, 7.8125 + i / 64, 70.0, 0.8, 2.4, 15.0, 0.6, 3.0, 12.5, 4.0),
        "vm-b": HostInterval(1000.5, 3.90625, 60.0, 1.6, 3.2, 25.0, 1.1, 2.5, 8.0, 2.0),
    }


def test_multihost_output_reads_back_to_the_given_numbers(tmp_path):
    out = tmp_path / "vdb-multi"
    runs = [RunDefinition("rd_mix", xfersize=4096, rdpct=70, threads=4, elapsed=600, interval=1)]
    sim = VdbenchOutput(out, runs, hosts=["vm-a", "vm-b"])
    sim.start()
    sim.begin_run("rd_mix", T0)
    watcher = Watcher(WatchConfig(paths=[str(tmp_path)], retention_s=float("inf")))
    given: list[dict[str, HostInterval]] = []
    for i in range(1, 6):
        given.append(host_numbers(i))
        sim.interval("rd_mix", given[-1], T0 + i)
        if i == 3:  # read while the run goes on: three intervals so far, not finished
            watcher.poll()
            d = watcher.dirs[str(out)]
            run = d.files["flatfile.html"].runs[0]
            assert run.rows == 3 and not run.finished
    sim.end_run("rd_mix", T0 + 6)
    sm = samples(exposition(tmp_path))
    src = str(out)
    for host in ("vm-a", "vm-b"):
        reads = sum(g[host].rate * g[host].read_pct / 100 for g in given)
        writes = sum(g[host].rate * (1 - g[host].read_pct / 100) for g in given)
        rsum = sum(g[host].rate * g[host].read_pct / 100 * g[host].read_resp_ms / 1000 for g in given)
        labels = {"source": src, "run": "rd_mix", "seq": 1, "host": host}
        assert value(sm, "vdbench_host_read_ops_total", **labels) == pytest.approx(reads, rel=1e-6)
        assert value(sm, "vdbench_host_write_ops_total", **labels) == pytest.approx(writes, rel=1e-6)
        assert value(sm, "vdbench_host_read_response_seconds_total", **labels) == pytest.approx(rsum, rel=1e-3)
        assert value(sm, "vdbench_host_interval_queue_depth", **labels) == given[-1][host].queue_depth
        assert value(sm, "vdbench_host_finished", **labels) == 1
    # the flatfile row is the hosts' aggregate; %10.4f keeps 4 decimals
    totals = [aggregate(list(g.values())) for g in given]
    labels = {"source": src, "run": "rd_mix", "seq": 1}
    assert value(sm, "vdbench_run_read_ops_total", **labels) == pytest.approx(
        sum(t.rate * t.read_pct / 100 for t in totals), rel=1e-6
    )
    nbytes = value(sm, "vdbench_run_read_bytes_total", **labels) + value(sm, "vdbench_run_write_bytes_total", **labels)
    assert nbytes == pytest.approx(sum(t.mb_per_s for t in totals) * 2**20, rel=1e-5)
    assert value(sm, "vdbench_run_interval_queue_depth", **labels) == pytest.approx(5.5)
    assert value(sm, "vdbench_run_average_first_interval", **labels) == 2
    assert value(sm, "vdbench_run_average_iops", **labels) == pytest.approx(sum(t.rate for t in totals[1:]) / 4)
    assert value(sm, "vdbench_run_threads", **labels) == 4
    assert value(sm, "vdbench_parmfile_sd_info", source=src, openflags="o_direct") == 1
    assert not has(sm, "vdbench_run_hygiene_problem")


def test_single_host_buffered_compressible_run_is_flagged(tmp_path):
    sim = VdbenchOutput(tmp_path / "vdb", [RunDefinition("rd1", openflags="", compratio=3.0, lunsize_gib=4)])
    sim.start()
    sim.begin_run("rd1", T0)
    for i in range(1, 4):
        sim.interval("rd1", HostInterval(500, 1.953125, 100.0, 0.3, 0.0, 2.0, 0.1, 0.2), T0 + i)
    sm = samples(exposition(tmp_path, cache=16 * 2**30))
    labels = {"run": "rd1", "seq": 1}
    assert value(sm, "vdbench_run_read_ops_total", **labels) == 1500
    assert value(sm, "vdbench_run_finished", **labels) == 0
    assert not has(sm, "vdbench_host_read_ops_total")
    problems = {dict(ls)["problem"] for (n, ls) in sm if n == "vdbench_run_hygiene_problem"}
    assert problems == {"buffered_io", "compratio_requested", "working_set_below_cache"}


def test_trace_run_reads_back_to_the_trace(tmp_path):
    """A multi-host run over two VMs of a library scenario: the exporter's per-host counters are
    the trace's own sums over the same seconds (within the host reports' printed precision)."""
    trace = compile_scenario(load_scenario("clean-oltp"))
    out = tmp_path / "vdb-oltp"
    sim = TraceVdbench(trace, out, ["oltp-01", "oltp-02"], run="rd_oltp", interval=5, elapsed=30)
    T0 = 1_764_151_200  # a period boundary of the 600 s scenario
    for T in range(T0, T0 + 41):
        sim.write(T)
    sm = samples(exposition(tmp_path))
    src = str(out)
    series = {vm.name: _vm_series(trace, vm) for vm in trace.scenario.vms if vm.name in ("oltp-01", "oltp-02")}
    for host, s in series.items():
        labels = {"source": src, "run": "rd_oltp", "seq": 1, "host": host}
        reads = periodic_sum(s.reads, trace.period, T0, T0 + 30)
        lat = periodic_sum(s.read_lat, trace.period, T0, T0 + 30)
        assert reads > 0
        assert value(sm, "vdbench_host_read_ops_total", **labels) == pytest.approx(reads, rel=2e-3)
        assert value(sm, "vdbench_host_read_response_seconds_total", **labels) == pytest.approx(lat, rel=5e-3)
        assert value(sm, "vdbench_host_finished", **labels) == 1
        assert value(sm, "vdbench_host_intervals_total", **labels) == 6  # 30 s of 5 s intervals
        # the second run has begun and has its first 5 s interval (T0+30 .. T0+40: two)
        assert value(sm, "vdbench_host_intervals_total", **{**labels, "seq": 2}) == 2
    run = {"source": src, "run": "rd_oltp", "seq": 1}
    assert value(sm, "vdbench_run_measured_seconds_total", **run) == 30
    assert value(sm, "vdbench_parmfile_sd_info", source=src, openflags="o_direct") == 1
    assert value(sm, "vdbench_parmfile_rd_info", source=src, rd="rd_oltp", interval="5", elapsed="30") == 1


def test_guest_writer_writes_the_vdbench_scenario_run(tmp_path):
    """vdbench-multihost: the guest simulator writes one vdbench run over the three workers
    (no fio stream), which the exporter reads as three hosts with the trace's numbers."""
    trace = compile_scenario(load_scenario("vdbench-multihost"))
    writer = GuestWriter(trace, tmp_path)
    paths = writer.setup()
    assert {where["vdbench"] for where in paths.values()} == {str(tmp_path / "vdbench" / "vdbench-multihost")}
    assert not any("stream" in where for where in paths.values())
    T0 = 1_764_151_200
    for T in range(T0, T0 + 21):
        writer.write(T)
    sm = samples(exposition(tmp_path / "vdbench"))
    src = str(tmp_path / "vdbench" / "vdbench-multihost")
    for vm in trace.scenario.vms:
        s = _vm_series(trace, vm)
        labels = {"source": src, "run": "rd1", "seq": 1, "host": vm.name}
        assert value(sm, "vdbench_host_read_ops_total", **labels) == pytest.approx(
            periodic_sum(s.reads, trace.period, T0, T0 + 20), rel=1e-3
        )
        assert value(sm, "vdbench_host_interval_queue_depth", **labels) == pytest.approx(
            (s.read_lat[1] + s.write_lat[1]), abs=0.05
        )
    assert value(sm, "vdbench_run_intervals_total", source=src, run="rd1") == 20
    assert value(sm, "vdbench_up") == 1
    assert not has(sm, "vdbench_run_hygiene_problem")
