"""Against stock vcsim (v0.46.3), which drops zeros from XML series, returns unaligned
newest-first timestamps and echoes '*' instead of expanding it: the exporter survives and
reports what is there, nothing more."""

from __future__ import annotations

from tests.support import metric_value as value, parse_metrics, promtool_check_metrics

from .conftest import PASSWORD, insecure_config

ENV = {"VC_TEST_PASSWORD": PASSWORD}


def _disks(m):
    return {(dict(k)["vm"], dict(k)["disk"]) for k in m.get("vcenter_virtual_disk_info", {})}


def test_stock_vcsim_csv(stock_vcsim, exporter):
    address, _ = stock_vcsim()
    exp = exporter(insecure_config(), ENV)
    code, text = exp.probe_text(address, timeout=20)
    assert code == 200
    m = parse_metrics(text)
    assert value(m, "vcenter_up") == 1
    disks = _disks(m)
    assert len(disks) == 2  # two VMs in the cluster's pool, one disk each
    target = exp.targets.get(address)
    assert target.star_ok is False, "the echoed '*' was detected and disks were asked for one by one"
    for vm, disk in disks:
        # stock vcsim serves data for read/write rates only; the rest is 0 and kept as 0 in CSV
        assert value(m, "vcenter_virtual_disk_sample_read_bytes_per_second", vm=vm, disk=disk) >= 0
        assert value(m, "vcenter_virtual_disk_sample_write_latency_seconds", vm=vm, disk=disk) == 0
        assert value(m, "vcenter_virtual_disk_samples_total", vm=vm, disk=disk) == 1
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    # a second probe: newest-first, unaligned answers are sorted and only newer samples added
    m2 = exp.probe(address, timeout=20)
    assert value(m2, "vcenter_up") == 1
    for vm, disk in disks:
        before = value(m, "vcenter_virtual_disk_write_bytes_total", vm=vm, disk=disk)
        after = value(m2, "vcenter_virtual_disk_write_bytes_total", vm=vm, disk=disk)
        assert after >= before
        assert value(m2, "vcenter_virtual_disk_sample_timestamp_seconds", vm=vm, disk=disk) >= value(
            m, "vcenter_virtual_disk_sample_timestamp_seconds", vm=vm, disk=disk
        )


def test_stock_vcsim_normal_format_drops_zero_series(stock_vcsim, exporter):
    address, _ = stock_vcsim()
    exp = exporter(insecure_config(perf_format="normal"), ENV)
    m = exp.probe(address, timeout=20)
    assert value(m, "vcenter_up") == 1
    # the all-zero counters come back with no value at all: counted, and not shown as 0
    assert value(m, "vcenter_perf_empty_series") > 0
    assert (
        "vcenter_virtual_disk_sample_write_latency_seconds" not in m
        or not m["vcenter_virtual_disk_sample_write_latency_seconds"]
    )
    for vm, disk in _disks(m):
        # read/write rates carry (noisy, non-zero) data and are reported
        assert value(m, "vcenter_virtual_disk_sample_write_bytes_per_second", vm=vm, disk=disk) > 0
