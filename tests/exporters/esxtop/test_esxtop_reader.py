"""esxtop-exporter on real captures: the per-virtual-disk rates and the older builds' VM UUID
(elatov-vdisk-2012.csv), an NFS datastore's read rate and guest latency integrated over samples
3-4 s apart (elatov-nfs-2012.csv), vscsiStats histograms per VM disk (vscsistats-2099979.csv);
and the latency split of devices, paths and adapters and the VMs' CPU on a document built in
the documented layout (built-lab-host.csv: no public capture holds them, fixtures/README.md)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ioparallax.exporters.esxtop.parse import (
    InvalidLine,
    parse_column,
    parse_header,
    parse_timestamp,
    parse_vdisk_instance,
)
from ioparallax.exporters.esxtop.vscsi import VscsiError, parse_vscsistats
from tests.support import has, promtool_check_metrics, run_entry_point, samples, value

FIXTURES = Path(__file__).parent / "fixtures"
VDISK = FIXTURES / "elatov-vdisk-2012.csv"
NFS = FIXTURES / "elatov-nfs-2012.csv"
VSCSI = FIXTURES / "vscsistats-2099979.csv"
BUILT = FIXTURES / "built-lab-host.csv"
MIB = 1048576


def convert(*paths: Path, flags: tuple[str, ...] = ()) -> tuple[int, str, str, dict]:
    out = run_entry_point("esxtop-exporter", ["convert", *flags, *paths])
    check = promtool_check_metrics(out.stdout)
    assert check.returncode == 0, check.stdout.decode() + check.stderr.decode()
    return out.returncode, out.stdout, out.stderr, samples(out.stdout)


def test_real_capture_gives_the_per_virtual_disk_rates_joined_by_vm_and_disk():
    rc, _, err, sm = convert(VDISK)
    assert rc == 0, err
    # the row of 12/11/2012 20:20:13: SQL01's scsi0:1 read 345.87/s, SQL02's scsi0:1 6.36/s
    assert value(sm, "esxtop_virtual_disk_sample_read_ops_per_second", vm="SQL01", disk="scsi0:1") == 345.87
    assert value(sm, "esxtop_virtual_disk_sample_read_ops_per_second", vm="SQL02", disk="scsi0:1") == 6.36
    assert value(sm, "esxtop_virtual_disk_sample_read_ops_per_second", vm="Linux", disk="scsi0:0") == 0.0
    assert value(sm, "esxtop_virtual_disk_sample_timestamp_seconds", vm="SQL01", disk="scsi0:1") == 1355257213.0
    # vm is the name alone (as vCenter names it); the UUID older builds add is on the info metric
    assert value(sm, "esxtop_vm_info", vm="SQL01", vm_uuid="104c07ff-3663-44fb-9d89-a563c801611c") == 1
    disks = {dict(ls)["disk"] for (n, ls) in sm if n == "esxtop_virtual_disk_sample_read_ops_per_second"}
    assert disks == {f"scsi0:{i}" for i in range(6)}  # never the VM's own row (disk "")
    # one sample: shown, and not integrated (no interval to integrate it over yet)
    assert value(sm, "esxtop_virtual_disk_read_ops_total", vm="SQL01", disk="scsi0:1") == 0
    assert value(sm, "esxtop_virtual_disk_samples_total", vm="SQL01", disk="scsi0:1") == 0
    # only the counters whose columns the capture has: Reads/sec, no bytes or latency
    assert not has(sm, "esxtop_virtual_disk_read_bytes_total")
    assert not has(sm, "esxtop_virtual_disk_read_latency_seconds_total")
    assert value(sm, "esxtop_source_selected_columns", source=VDISK) == 12
    assert value(sm, "esxtop_source_info", source=VDISK, host="local") == 1


def test_real_nfs_datastore_reads_and_guest_latency_integrated_over_uneven_intervals():
    rc, _, err, sm = convert(NFS)
    assert rc == 0, err
    ds = {"datastore": "NFS_Datastore", "host": "local"}
    # samples 3 or 4 s apart (1 s timestamps); each rate x the time since the previous sample:
    # 418.35 x 3 (20:20:06) + 481.29 x 4 (20:20:10) + 352.22 x 3 + 430.02 x 3
    reads = 418.35 * 3 + 481.29 * 4 + 352.22 * 3 + 430.02 * 3
    assert value(sm, "esxtop_nfs_volume_read_ops_total", **ds) == pytest.approx(reads, rel=1e-12)
    lat = (418.35 * 3 * 90.91 + 481.29 * 4 * 120.69 + 352.22 * 3 * 171.45 + 430.02 * 3 * 113.84) / 1000
    assert value(sm, "esxtop_nfs_volume_read_guest_latency_seconds_total", **ds) == pytest.approx(lat, rel=1e-12)
    # the mean read latency over the burst, as rate()/rate() gives it: ~122 ms, where the
    # samples' plain average (90.91, 120.69, 171.45, 113.84 and six 0s) would say 49.7 ms
    assert lat / reads == pytest.approx(0.12203, abs=1e-5)
    assert value(sm, "esxtop_nfs_volume_samples_total", **ds) == 10
    assert value(sm, "esxtop_nfs_volume_sample_read_ops_per_second", **ds) == 0.0
    # an NFS volume has the guest latency only: no kernel/driver split is made up for it
    assert not has(sm, "esxtop_nfs_volume_read_driver_latency_seconds_total")
    assert value(sm, "esxtop_source_sample_interval_seconds", source=NFS) == pytest.approx(28 / 9)
    assert value(sm, "esxtop_source_sample_interval_max_seconds", source=NFS) == 4
    assert value(sm, "esxtop_source_first_sample_timestamp_seconds", source=NFS) == 1355257200.0
    # 10 samples over 28 s: shorter than 3 scrape intervals of 15 s
    assert value(sm, "esxtop_source_hygiene_problem", source=NFS, problem="too_few_samples") == 1
    assert not has(sm, "esxtop_source_hygiene_problem", source=NFS, problem="long_delay")


def test_real_vscsistats_histograms_per_vm_disk():
    rc, _, err, sm = convert(VSCSI)
    assert rc == 0, err
    d = {"world_group_id": "2099979", "handle_id": "8194", "disk": "scsi0:0", "vm": ""}
    # IO lengths: 42 of 512 B, ... 608 of 4 KiB (cumulative: 42+1+5+13+608 = 669 at or below 4096)
    assert value(sm, "vscsistats_io_length_bytes_bucket", le="512.0", **d) == 42
    assert value(sm, "vscsistats_io_length_bytes_bucket", le="4096.0", **d) == 669
    assert value(sm, "vscsistats_io_length_bytes_bucket", le="+Inf", **d) == 793
    assert value(sm, "vscsistats_io_length_bytes_count", **d) == 793
    assert value(sm, "vscsistats_io_length_bytes_sum", **d) == 5332 * 793
    assert value(sm, "vscsistats_read_io_length_bytes_count", **d) == 4
    assert value(sm, "vscsistats_write_io_length_bytes_count", **d) == 789
    # latency in seconds: 403 I/Os at or below 100 us, 3 + 1 reads between 30 and 100 ms
    assert value(sm, "vscsistats_latency_seconds_bucket", le="0.0001", **d) == 403
    assert value(sm, "vscsistats_read_latency_seconds_bucket", le="0.03", **d) == 0
    assert value(sm, "vscsistats_read_latency_seconds_bucket", le="0.1", **d) == 4
    # seek distance: 213 commands exactly sequential (distance 1), 137 beyond +500000 LBNs
    le_0 = value(sm, "vscsistats_seek_distance_blocks_bucket", le="0.0", **d)
    le_1 = value(sm, "vscsistats_seek_distance_blocks_bucket", le="1.0", **d)
    assert le_1 - le_0 == 213
    inf = value(sm, "vscsistats_seek_distance_blocks_bucket", le="+Inf", **d)
    assert inf - value(sm, "vscsistats_seek_distance_blocks_bucket", le="500000.0", **d) == 137
    # negative bucket limits: no _sum or _count (OpenMetrics' rule, as prometheus_client applies it)
    assert value(sm, "vscsistats_seek_distance_closest16_blocks_bucket", le="+Inf", **d) == 793
    assert not has(sm, "vscsistats_seek_distance_closest16_blocks_count")
    assert value(sm, "vscsistats_outstanding_ios_bucket", le="1.0", **d) == 551
    assert value(sm, "vscsistats_write_interarrival_seconds_count", **d) == 789


def test_vscsistats_disk_named_by_the_esxtop_group_of_its_world_group_id(tmp_path):
    # built-lab-host.csv's Group Cpu(2099979:app-01): the vscsiStats worldGroupID of the same VM
    rc, _, err, sm = convert(BUILT, VSCSI)
    assert rc == 0, err
    assert value(sm, "vscsistats_io_length_bytes_count", world_group_id="2099979", vm="app-01") == 793
    assert value(sm, "esxtop_vm_info", vm="app-01", gid="2099979") == 1


def test_device_latency_split_guest_is_kernel_plus_driver():
    rc, _, err, sm = convert(BUILT)
    assert rc == 0, err
    dev = {"device": "naa.6000c29a5e3b2f1d0c9b8a7f6e5d4c3b", "host": "esx01.lab.local"}
    # three samples 2 s apart, the first integrated over the second's interval
    cmds = (1200 + 1500 + 6000) * 2
    assert value(sm, "esxtop_device_commands_total", **dev) == cmds
    assert value(sm, "esxtop_device_read_ops_total", **dev) == (800 + 1000 + 4000) * 2
    assert value(sm, "esxtop_device_read_bytes_total", **dev) == (25 + 31.25 + 125) * MIB * 2
    kernel = (1200 * 0.5 + 1500 * 0.25 + 6000 * 12.0) * 2 / 1000
    driver = (1200 * 2.0 + 1500 * 1.0 + 6000 * 3.0) * 2 / 1000
    guest = value(sm, "esxtop_device_guest_latency_seconds_total", **dev)
    assert value(sm, "esxtop_device_kernel_latency_seconds_total", **dev) == pytest.approx(kernel)
    assert value(sm, "esxtop_device_driver_latency_seconds_total", **dev) == pytest.approx(driver)
    assert guest == pytest.approx(kernel + driver)
    # the mean split over the window: 21.8 ms guest, of which 16.8 ms in the kernel (queueing)
    assert guest / cmds * 1000 == pytest.approx(10.905, abs=1e-3)
    assert value(sm, "esxtop_device_write_queue_latency_seconds_total", **dev) == pytest.approx(
        (400 * 0.4 + 500 * 0.0 + 2000 * 15.0) * 2 / 1000
    )
    # the latest sample: the queue full (64 active, 120 queued), KAVG 12 ms above DAVG 3 ms
    assert value(sm, "esxtop_device_sample_kernel_latency_seconds", **dev) == 0.012
    assert value(sm, "esxtop_device_sample_driver_latency_seconds", **dev) == 0.003
    assert value(sm, "esxtop_device_sample_guest_latency_seconds", **dev) == 0.015
    assert value(sm, "esxtop_device_queue_depth", **dev) == 64
    assert value(sm, "esxtop_device_sample_active_commands", **dev) == 64
    assert value(sm, "esxtop_device_sample_queued_commands", **dev) == 120
    # the same split per path and adapter; the adapter has no Device Q Depth of its own
    assert value(sm, "esxtop_path_sample_kernel_latency_seconds", path="vmhba1:C0:T0:L0") == 0.012
    assert value(sm, "esxtop_adapter_commands_total", adapter="vmhba1") == cmds
    # an NFS datastore (a Nutanix container on ESXi): the guest latency
    assert value(sm, "esxtop_nfs_volume_sample_write_guest_latency_seconds", datastore="ctr-poc-01") == 0.0015


def test_virtual_disk_counters_and_vm_cpu_of_the_built_host():
    rc, _, err, sm = convert(BUILT)
    assert rc == 0, err
    d = {"vm": "app-01", "disk": "scsi0:0", "host": "esx01.lab.local"}
    assert value(sm, "esxtop_virtual_disk_read_ops_total", **d) == (200 + 40 + 2000) * 2
    assert value(sm, "esxtop_virtual_disk_write_bytes_total", **d) == (3.25 + 0.75 + 31.25) * MIB * 2
    assert value(sm, "esxtop_virtual_disk_read_latency_seconds_total", **d) == pytest.approx(
        (200 * 0.5 + 40 * 0.4 + 2000 * 8.0) * 2 / 1000
    )
    assert value(sm, "esxtop_virtual_disk_sample_write_latency_seconds", **d) == 0.02
    # a VM name holding a comma and parentheses (not a UUID) is kept whole
    assert value(sm, "esxtop_virtual_disk_read_ops_total", vm="db,01 (test)", disk="scsi1:0") == 300
    # CPU of the VMs' groups (not of system groups): ready 2.5 %, 30 %, 2.5 % of a core
    c = {"vm": "app-01"}
    assert value(sm, "esxtop_vm_cpu_ready_seconds_total", **c) == pytest.approx((0.025 + 0.30 + 0.025) * 2)
    assert value(sm, "esxtop_vm_cpu_sample_ready_ratio", **c) == 0.025
    assert value(sm, "esxtop_vm_cpu_sample_used_ratio", vm="NTNX-BLK1-A-CVM") == 4.2  # the CVM: 4.2 CPUs
    assert not has(sm, "esxtop_vm_cpu_used_seconds_total", vm="system")


def test_header_parsing_and_timestamps():
    col = parse_column("\\\\esx1\\Virtual Disk(a (b):scsi0:1)\\MBytes Read/sec")
    assert col is not None and (col.host, col.obj, col.instance, col.counter) == (
        "esx1",
        "Virtual Disk",
        "a (b):scsi0:1",
        "MBytes Read/sec",
    )
    assert parse_column("\\\\esx1\\Memory\\Kernel MBytes") is not None
    assert parse_column("no backslashes") is None
    name = parse_vdisk_instance("SQL02 (DF09CDF2-1e74-45fb-9ccc-90d1c402fc6b):nvme0:3")
    assert (name.vm, name.disk, name.uuid) == ("SQL02", "nvme0:3", "df09cdf2-1e74-45fb-9ccc-90d1c402fc6b")
    assert parse_timestamp(b"12/11/2012 20:20:13") == 1355257213.0
    assert parse_timestamp(b"12/11/2012 20:20:13.5", bias_minutes=60) == 1355257213.5 + 3600
    for bad in (b"13/11/2012 20:20:13", b"2012-12-11 20:20:13", b""):
        with pytest.raises(InvalidLine):
            parse_timestamp(bad)
    with pytest.raises(InvalidLine):
        parse_header(b'"Time","\\\\h\\Memory\\Kernel MBytes"')
    hm = parse_header(b'"(PDH-CSV 4.0) (Pacific Standard Time)(480)","\\\\h\\Memory\\Kernel MBytes"')
    assert (hm.bias_minutes, hm.columns, hm.selected) == (480, 2, [])


def test_vscsistats_broken_histograms_are_refused():
    text = VSCSI.read_text()
    with pytest.raises(VscsiError, match="no vscsiStats histogram"):
        parse_vscsistats("\n")
    with pytest.raises(VscsiError, match="count says 794"):
        parse_vscsistats(text.replace("count,793", "count,794", 1))
    with pytest.raises(VscsiError, match="not an integer"):
        parse_vscsistats(text.replace("42,512", "x,512", 1))
    hists, skipped = parse_vscsistats(text)
    assert len(hists) == 16 and skipped == []
    assert all(h.count == h.stats["count"] for h in hists)
    assert math.isinf(hists[0].cumulative()[-1][0])


def test_cvm_group_cpu_kept_without_virtual_disks_system_groups_not():
    # on ESXi the CVM's data disks are passed through: its Group Cpu has no Virtual Disk beside it
    groups = ("1:system", "2100010:NTNX-BLK1-A-CVM", "2100011:NTNX-CVM-backup", "2099979:app-01")
    cols = ["(PDH-CSV 4.0) (UTC)(0)", "\\\\h\\Virtual Disk(app-01:scsi0:0)\\Reads/sec"]
    cols += [f"\\\\h\\Group Cpu({g})\\% Used" for g in groups]
    hm = parse_header(",".join(f'"{c}"' for c in cols).encode())
    cpu = {t.key[0]: t.gid for t in hm.targets if t.kind == "cpu"}
    # NTNX-CVM-backup is not the installer's NTNX-<block>-<position>-CVM: a VM without disks, left out
    assert cpu == {"NTNX-BLK1-A-CVM": "2100010", "app-01": "2099979"}
    assert hm.vms == {"app-01": "", "NTNX-BLK1-A-CVM": ""}
