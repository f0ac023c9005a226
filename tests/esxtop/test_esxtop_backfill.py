"""Every esxtop sample with the capture's own timestamps: through real promtool into TSDB blocks
(read back with ``promtool tsdb dump``), in both formats, and refused where there is nothing to
backfill."""

from __future__ import annotations

import re
import subprocess

from tests.esxtop.test_esxtop_reader import BUILT, NFS, VSCSI
from tests.support import require_tool, run_entry_point, venv_tool

T0 = 1795860000  # 2026-11-28 10:00:00 UTC, built-lab-host.csv's first sample


def test_promtool_creates_blocks_with_the_captures_timestamps(tmp_path):
    require_tool("promtool")
    om = tmp_path / "esxtop.om"
    tsdb = tmp_path / "tsdb"
    out = subprocess.run(
        [venv_tool("esxtop-exporter"), "backfill", "--output", str(om), "--tsdb", str(tsdb), str(BUILT), str(NFS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert om.read_text().endswith("# EOF\n")
    (tsdb / "wal").mkdir()  # promtool's dump opens the head's WAL; backfilled blocks have none
    dump = subprocess.run(["promtool", "tsdb", "dump", str(tsdb)], capture_output=True, text=True, timeout=120)
    assert dump.returncode == 0, dump.stderr

    def series(name: str, match: str) -> list[tuple[int, float]]:
        return sorted(
            (int(m.group(2)), float(m.group(1)))
            for line in dump.stdout.splitlines()
            if name in line and match in line and (m := re.search(r"\} (\S+) (\d+)$", line))
        )

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
