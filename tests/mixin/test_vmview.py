"""The VM view from either manager (ioparallax/mixin/vmview.py): which Prism series stand for which
vCenter ones, and the `or` of the two that every VM-view rule and panel is built from."""

from __future__ import annotations

import pytest

from ioparallax.mixin.config import load_config
from ioparallax.mixin.vmview import Missing, either, has, metric, vcenter_only


def test_prism_counterparts_follow_the_exporter_contract():
    assert metric("prism", "read_ops_total") == "prism_virtual_disk_read_ops_total"
    # Prism's latency sample is in microseconds: the counterpart of vCenter's precise one
    assert metric("prism", "sample_write_latency_precise_seconds") == "prism_virtual_disk_sample_write_latency_seconds"
    for vcenter_only_suffix in ("read_outstanding_seconds_total", "sample_read_io_size_bytes", "seeks_total"):
        assert not has("prism", vcenter_only_suffix)
        with pytest.raises(Missing):
            metric("prism", vcenter_only_suffix)
    assert has("vcenter", "seeks_total")


def test_either_ors_both_sources_with_their_selectors_or_keeps_vcenter_alone():
    cfg = load_config()
    both = either(cfg, lambda s: f"sum by (vm, disk) (rate({s('read_ops_total')}[1m]))")
    assert 'rate(vcenter_virtual_disk_read_ops_total{job="vcenter"}[1m])' in both
    assert 'rate(prism_virtual_disk_read_ops_total{job="prism"}[1m])' in both
    assert "\n  or\n" in both
    alone = either(cfg, lambda s: s("sample_seeks"), 'vm=~"$vm"')
    assert alone == 'vcenter_virtual_disk_sample_seeks{job="vcenter",vm=~"$vm"}'
    assert vcenter_only(alone) and not vcenter_only(both)
    # esxtop's 2 s view and its rules are the ESXi hosts' own: empty on AHV too
    assert vcenter_only('sum by (vm, disk) (esxtop_virtual_disk_sample_read_ops_per_second{job="esxtop"})')
    assert vcenter_only('vm_disk:ioparallax_esxtop_peak_to_vm_sample_bytes:ratio1m{vm=~"$vm"}')
    assert not vcenter_only('vm_disk:ioparallax_vm_read_ops:rate1m{vm=~"$vm"}')
