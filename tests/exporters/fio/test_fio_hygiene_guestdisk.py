"""Hygiene findings from real fio job options, and guest disk facts from sysfs (fixture tree and
real loop devices with a partition starting at 1536 bytes)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ioparallax.exporters.fio.guestdisk import GuestDiskCollector, read_disks
from ioparallax.exporters.fio.hygiene import HygieneConfig, find_problems, fio_seconds, fio_size
from ioparallax.exporters.fio.reader import read_text
from ioparallax.simulators.guest.sysfs import write_attribute
from tests.exporters.fio.conftest import run_fio
from tests.support import exposition_of, promtool_check_metrics, require_tool

TRAPS = """\
[global]
directory={dir}
size=1m
ioengine=psync
runtime=1
time_based
rw=write
bs=4k
[clean]
direct=1
buffer_compress_percentage=50
buffer_pattern=0xdeadbeef
refill_buffers=1
[zeros]
direct=1
zero_buffers=1
[compressible]
direct=1
buffer_compress_percentage=40
[buffered]
[unbuffered]
buffered=0
[notime]
direct=1
gtod_reduce=1
"""


@pytest.fixture(scope="module")
def trap_jobs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hygiene")
    (d / "traps.fio").write_text(TRAPS.format(dir=d))
    out = d / "traps.json"
    run_fio(["traps.fio", "--output-format=json", f"--output={out}"], d)
    [rec] = read_text(out.read_text()).records
    return {j.name: j for j in rec.jobs}


def test_each_trap_found_in_real_fio_options(trap_jobs):
    lenient = HygieneConfig(scrape_interval_s=0.1)  # runtime=1 s is >= 3 scrapes of 0.1 s
    found = {name: find_problems(job, lenient) for name, job in trap_jobs.items()}
    assert found == {
        "clean": [],
        "zeros": ["zero_buffers"],
        "compressible": ["compressible_without_pattern", "compressible_without_refill"],
        "buffered": ["buffered_io"],
        "unbuffered": [],
        "notime": ["gtod_reduce"],
    }


def test_working_set_and_runtime_checks(trap_jobs):
    job = trap_jobs["clean"]
    assert find_problems(job, HygieneConfig(cache_size_bytes=1 << 20, scrape_interval_s=0.1)) == []
    assert find_problems(job, HygieneConfig(cache_size_bytes=20 << 30, scrape_interval_s=0.1)) == [
        "working_set_below_cache"
    ]
    assert find_problems(job, HygieneConfig(scrape_interval_s=15)) == ["short_runtime"]
    # without a runtime option, a finished job is judged by how long it actually ran
    job.options.pop("runtime")
    assert find_problems(job, HygieneConfig(scrape_interval_s=15)) == []
    assert find_problems(job, HygieneConfig(scrape_interval_s=15), finished=True) == ["short_runtime"]


def test_fio_value_syntax():
    assert fio_size("4k") == 4096 and fio_size("64m") == 64 << 20 and fio_size("1GiB") == 1 << 30
    assert fio_size("512") == 512 and fio_size("50%") is None and fio_size(None) is None
    assert fio_seconds("30") == 30 and fio_seconds("2m") == 120 and fio_seconds("500ms") == 0.5
    assert fio_seconds("soon") is None


# ---------------------------------------------------------------------------------------------
# guest disk facts


def make_sysfs(root: Path) -> Path:
    """A sysfs tree as a VMware guest shows it: a pvscsi disk whose serial (VPD page 0x80) is the
    virtual disk's UUID, a misaligned partition at 1536 bytes and an aligned one at 1 MiB; a
    virtio disk with a serial file; an unbound loop device (size 0) and a ram disk to leave out."""
    sda = root / "block" / "sda"
    write_attribute(sda / "size", "41943040")
    for f, v in (("logical_block_size", "512"), ("physical_block_size", "512"), ("max_sectors_kb", "512")):
        write_attribute(sda / "queue" / f, v)
    serial = b"6000c29a1b2c3d4e5f60718293a4b5c6"
    write_attribute(sda / "device" / "vpd_pg80", bytes([0, 0x80, 0, len(serial)]) + serial)
    write_attribute(sda / "device" / "wwid", "naa.6000c29a1b2c3d4e5f60718293a4b5c6")
    write_attribute(sda / "device" / "model", "Virtual disk    ")
    write_attribute(sda / "device" / "vendor", "VMware  ")
    for name, num, start, size in (("sda1", 1, 3, 2048), ("sda2", 2, 2048, 409600)):
        write_attribute(sda / name / "partition", str(num))
        write_attribute(sda / name / "start", str(start))
        write_attribute(sda / name / "size", str(size))
    vdb = root / "block" / "vdb"
    write_attribute(vdb / "size", "2097152")
    write_attribute(vdb / "serial", "PoC-data-1")
    for f, v in (("logical_block_size", "4096"), ("physical_block_size", "4096"), ("max_sectors_kb", "1280")):
        write_attribute(vdb / "queue" / f, v)
    write_attribute(root / "block" / "loop3" / "size", "0")
    write_attribute(root / "block" / "ram0" / "size", "8192")
    return root


def test_guest_disk_facts_from_a_fixture_tree(tmp_path):
    root = make_sysfs(tmp_path / "sys")
    disks = {d.name: d for d in read_disks(str(root))}
    assert set(disks) == {"sda", "vdb"}
    sda = disks["sda"]
    assert sda.serial == "6000c29a1b2c3d4e5f60718293a4b5c6" and sda.wwid.startswith("naa.6000c29")
    assert (sda.model, sda.vendor) == ("Virtual disk", "VMware")
    assert sda.max_request_bytes == 512 * 1024 and sda.size_bytes == 41943040 * 512
    parts = {p.name: p for p in sda.partitions}
    assert parts["sda1"].start_bytes == 1536 and not parts["sda1"].aligned
    assert parts["sda2"].start_bytes == 1 << 20 and parts["sda2"].aligned
    assert disks["vdb"].serial == "PoC-data-1" and disks["vdb"].logical_block_size == 4096
    text = exposition_of(GuestDiskCollector(str(root)))
    assert promtool_check_metrics(text).returncode == 0
    assert 'fio_guest_partition_aligned{disk="sda",partition="sda1"} 0.0' in text
    assert 'fio_guest_partition_start_bytes{disk="sda",partition="sda1"} 1536.0' in text
    assert 'fio_guest_disk_max_request_bytes{disk="vdb"} 1.31072e+06' in text
    assert "fio_guest_sysfs_up 1.0" in text
    # The VMware serial joins vcenter_virtual_disk_info{disk_uuid}; a serial that is no UUID gives "".
    assert 'fio_guest_disk_info{disk="sda",disk_uuid="6000c29a-1b2c-3d4e-5f60-718293a4b5c6",' in text
    assert 'fio_guest_disk_info{disk="vdb",disk_uuid="",' in text


def test_unreadable_sysfs_gives_up_0(tmp_path, caplog):
    text = exposition_of(GuestDiskCollector(str(tmp_path / "nosys")))
    assert "fio_guest_sysfs_up 0.0" in text and "fio_guest_disk_info" not in text
    assert "nosys/block" in caplog.text


def _loop_devices_usable() -> str | None:
    if os.geteuid() != 0:
        return "needs root to attach loop devices"
    for tool in ("losetup", "sfdisk", "partx"):
        require_tool(tool)  # the Makefile installs them (fdisk, util-linux): missing is a failure
    if not os.path.exists("/dev/loop-control"):
        return "no /dev/loop-control in this container"
    return None


@pytest.fixture
def misaligned_loop(tmp_path):
    """A loop device whose partition table puts partition 1 at sector 3 = 1536 bytes."""
    reason = _loop_devices_usable()
    if reason:
        pytest.skip(f"loop devices not available: {reason}")
    img = tmp_path / "disk.img"
    with open(img, "wb") as fh:
        fh.truncate(8 << 20)
    subprocess.run(
        ["sfdisk", "--no-reread", "-q", str(img)],
        input=b"start=3, size=8000, type=83\n",
        check=True,
        capture_output=True,
        timeout=30,
    )
    att = subprocess.run(["losetup", "-f", "--show", "-P", str(img)], capture_output=True, timeout=30)
    if att.returncode != 0:
        pytest.skip(f"loop devices not available: losetup: {att.stderr.decode().strip()}")
    dev = att.stdout.decode().strip()
    try:
        name = os.path.basename(dev)
        part = Path("/sys/block") / name / f"{name}p1"
        if not part.exists():  # losetup -P does not always scan in a container; partx does
            subprocess.run(["partx", "-a", dev], capture_output=True, timeout=30)
        if not part.exists():
            pytest.skip(f"loop devices not available: no partition appeared under /sys/block/{name}")
        yield name
    finally:
        subprocess.run(["losetup", "-d", dev], capture_output=True, timeout=30)


def test_misaligned_partition_on_a_real_loop_device(misaligned_loop):
    disks = {d.name: d for d in read_disks("/sys")}
    disk = disks[misaligned_loop]
    assert disk.size_bytes == 8 << 20
    [part] = disk.partitions
    assert part.name == f"{misaligned_loop}p1" and part.number == 1
    assert part.start_bytes == 1536 and not part.aligned
    assert part.size_bytes == 8000 * 512
    assert disk.logical_block_size == 512 and disk.max_request_bytes and disk.max_request_bytes > 0
