"""The simulator's vdbench output directory reads back through the exporter's reader to the
numbers it was given (within what vdbench's formats print), while it grows and once finished."""

from __future__ import annotations

import pytest

from ioparallax.exporters.vdbench.reader import WatchConfig, Watcher
from ioparallax.simulators.guest.vdbench import HostInterval, RunDefinition, VdbenchOutput, aggregate
from tests.exporters.vdbench.test_vdbench_reader import exposition, has, samples, value

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
