"""Every esxtop sample with the capture's own timestamps: through real promtool into TSDB blocks
(read back with ``promtool tsdb dump``), in both formats, and refused where there is nothing to
backfill."""

from __future__ import annotations

from tests.exporters.esxtop.test_esxtop_reader import BUILT, NFS, VSCSI
from tests.support import backfill_dump, dumped_series, run_entry_point

T0 = 1795860000  # 2026-11-28 10:00:00 UTC, built-lab-host.csv's first sample


def test_promtool_creates_blocks_with_the_captures_timestamps(tmp_path):
    dump = backfill_dump("esxtop-exporter", [BUILT, NFS], tmp_path)

    def series(name: str, match: str) -> list[tuple[int, float]]:
        return dumped_series(dump, name, match)

    # the device's kernel latency at each of its three samples, at the sample's own time
    kavg = series("esxtop_device_sample_kernel_latency_seconds", 'device="naa.')
    assert kavg == [(T0 * 1000, 0.0005), ((T0 + 2) * 1000, 0.00025), ((T0 + 4) * 1000, 0.012)]
    # the real NFS capture of 2012: ten samples, the burst at 20:20:06-16
    nfs = series("esxtop_nfs_volume_sample_read_guest_latency_seconds", 'datastore="NFS_Datastore"')
    assert len(nfs) == 10
    assert nfs[4] == (1355257213 * 1000, 0.17145)
    ready = series("esxtop_vm_cpu_sample_ready_ratio", 'vm="app-01"')
    assert [v for _, v in ready] == [0.025, 0.30, 0.025]


def test_prometheus_text_with_millisecond_timestamps_and_nothing_to_backfill(tmp_path):
    out = run_entry_point("esxtop-exporter", ["backfill", "--format", "prometheus", NFS])
    assert out.returncode == 0, out.stderr
    assert "# EOF" not in out.stdout
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("esxtop_nfs_volume_sample_read_ops_per_second"))
    assert line.endswith(" 0.0 1355257200000")
    # a vscsiStats output has no samples in time; --tsdb needs a file to hand promtool
    out = run_entry_point("esxtop-exporter", ["backfill", VSCSI])
    assert out.returncode == 1
    assert "a vscsiStats output has no samples in time" in out.stderr
    out = run_entry_point("esxtop-exporter", ["backfill", "--tsdb", tmp_path, NFS])
    assert out.returncode == 2
    assert "--tsdb: needs --output FILE" in out.stderr
