"""esxtop-exporter as a process: a folder of captures served on /metrics, a growing capture read
further at each scrape (esxtop writing a sample every 2 s over SSH into the watched folder)."""

from __future__ import annotations

import shutil

import requests

from tests.exporters.esxtop.test_esxtop_reader import BUILT, NFS, VSCSI
from tests.support import first_scrape, promtool_check_metrics, samples, start_exporter, value

EXPORTER = "esxtop-exporter"
DEVICE = "naa.6000c29a5e3b2f1d0c9b8a7f6e5d4c3b"


def test_serve_follows_a_growing_capture(tmp_path, processes):
    folder = tmp_path / "esxtop"
    folder.mkdir()
    shutil.copy(NFS, folder / "esx-old.csv")
    shutil.copy(VSCSI, folder / "esx01-vscsi.csv")
    lines = BUILT.read_text().splitlines(keepends=True)
    live = folder / "esx01.csv"
    live.write_text(lines[0] + lines[1])  # esxtop started: the header and its first sample
    port, proc = start_exporter(processes, EXPORTER, "--esxtop.watch", folder)
    _, text, sm = first_scrape(port, proc, "esxtop-exporter")
    assert value(sm, "esxtop_exporter_build_info") == 1
    assert value(sm, "esxtop_device_sample_commands_per_second", device=DEVICE) == 1200
    assert value(sm, "esxtop_device_commands_total", device=DEVICE) == 0  # the first sample waits for an interval
    assert value(sm, "vscsistats_io_length_bytes_count", vm="app-01", disk="scsi0:0") == 793
    assert value(sm, "esxtop_nfs_volume_samples_total", datastore="NFS_Datastore") == 10
    check = promtool_check_metrics(text)
    assert check.returncode == 0, check.stderr.decode()
    # two more samples arrive: the next scrape reads them
    with live.open("a") as fh:
        fh.write(lines[2] + lines[3])
    sm = samples(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text)
    assert value(sm, "esxtop_device_commands_total", device=DEVICE) == 17400
    assert value(sm, "esxtop_device_sample_kernel_latency_seconds", device=DEVICE) == 0.012
    assert value(sm, "esxtop_source_rows_total", source=live) == 3
    assert requests.get(f"http://127.0.0.1:{port}/probe?target=x", timeout=5).status_code == 404
