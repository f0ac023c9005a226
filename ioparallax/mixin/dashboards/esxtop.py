"""The ESXi hosts' own view (esxtop-exporter, docs/esxtop.md) on the dashboards: the 2 s VM view
overlaid on the three views, and on the VM view dashboard where each command's latency is spent
(GAVG = KAVG + DAVG per device, GAVG per NFS datastore) and how long the VMs and the CVMs wait for
a CPU (%RDY).

Every panel here is empty where no esxtop capture is scraped (an AHV cluster, an ESXi cluster
without esxtop): the descriptions say so.
"""

from __future__ import annotations

from typing import Any

from ioparallax.mixin.dashboards.base import RI, VMDISK, Expr, braces
from ioparallax.mixin.dashboards.panels import Q, row, ts

# Nutanix names its Controller VMs NTNX-<block serial>-<node>-CVM: the CPU ready panel shows them
# beside the selected VMs (a CVM short of CPU slows every VM's I/O on its host).
CVM_NAME_RE = "NTNX-.*-CVM"
# The three-views overlay: esxtop's latest sample per VM disk, ``{d}`` the direction.
SAMPLE = {
    "ops": "esxtop_virtual_disk_sample_{d}_ops_per_second",
    "bytes": "esxtop_virtual_disk_sample_{d}_bytes_per_second",
    "latency_seconds": "esxtop_virtual_disk_sample_{d}_latency_seconds",
}
SAMPLE_LEGEND = "VM {d}, esxtop 2 s sample"
PEAK_RATIO = "esxtop_peak_to_vm_sample_bytes"  # vm_disk:ioparallax_<this>:ratio<w> (rules/esxtop.py)


def sample_overlay(e: Expr, quantity: str, d: str) -> Q:
    """esxtop's latest sample of the selected VM disks (the 2 s VM view), for the three views."""
    agg = "avg" if quantity == "latency_seconds" else "sum"
    metric = SAMPLE[quantity].format(d=d) + e.sel("esxtop", VMDISK)
    return Q(f"{agg} by (vm, disk) ({metric})", SAMPLE_LEGEND.format(d=d))


def _mean(numerator: str, denominator: str, by: str, sel: str) -> str:
    return f"sum by ({by}) (rate({numerator}{sel}[{RI}]))\n/\n(sum by ({by}) (rate({denominator}{sel}[{RI}])) > 0)"


def host_panels(e: Expr) -> list[Any]:
    """The row of the VM view dashboard: the latency split and CPU ready, from esxtop."""
    es = e.sel("esxtop")
    layers = [
        (
            f"label_replace(\n{_mean(f'esxtop_device_{layer}_latency_seconds_total', 'esxtop_device_commands_total', 'host, device', es)},\n"
            f'"layer", "{name}", "", "")'
        )
        for layer, name in (("guest", "GAVG"), ("kernel", "KAVG"), ("driver", "DAVG"))
    ]
    # An NFS datastore (a Nutanix container) has the guest latency only: esxtop splits no
    # kernel/driver time for NFS. Only the datastores of the selected VM disks (vCenter's
    # virtual disk info names each disk's datastore, as esxtop names the volume).
    datastores = f"group by (datastore) (vcenter_virtual_disk_info{e.sel('vcenter', VMDISK)})"
    nfs = (
        "label_replace(\n"
        + _mean(
            "esxtop_nfs_volume_guest_latency_seconds_total", "esxtop_nfs_volume_commands_total", "host, datastore", es
        )
        + f'\n* on (datastore) group_left () {datastores},\n"layer", "GAVG", "", "")'
    )
    split = "\nor\n".join([*layers, nfs])
    ready_sel = braces(es.strip("{}"), f'vm=~"$vm|{CVM_NAME_RE}"')
    return [
        row("ESXi hosts (esxtop): where the latency is spent, CPU ready"),
        ts(
            "Latency split per device and NFS datastore (GAVG = KAVG + DAVG)",
            "Op-weighted mean latency per command over $__rate_interval, from esxtop's samples integrated "
            "(esxtop-exporter). Per device: GAVG, what the VMs see, is KAVG, the time in the ESXi kernel "
            "(its queue, QAVG, included) plus DAVG, the device and fabric's: a high KAVG is the host "
            "(queue depths, throttling), a high DAVG the storage. Per NFS datastore (a Nutanix container): "
            "GAVG only, esxtop splits no kernel time for NFS; compare it with the storage's (Stargate) "
            "latency on the Three views dashboard: the gap is the host and the network. Only the datastores "
            "of the selected VM disks; every device of the hosts. Empty without an esxtop capture.",
            "s",
            [Q(split, "{{host}} {{device}}{{datastore}} {{layer}}")],
            w=12,
            dashed=[".* GAVG$"],
        ),
        ts(
            "CPU ready: VMs and CVMs (%RDY)",
            "esxtop's % Ready per VM (Group Cpu) as a share of one vCPU, summed over the VM's vCPUs: time "
            "its worlds were ready to run but waited for a physical CPU, averaged over $__rate_interval. "
            "The selected VMs and the Nutanix CVMs (NTNX-...-CVM): a CVM waiting for CPU slows every VM's "
            "I/O on its host. Above ~5 % per vCPU the host's CPUs are oversubscribed. Empty without an "
            "esxtop capture.",
            "percentunit",
            [Q(f"sum by (host, vm) (rate(esxtop_vm_cpu_ready_seconds_total{ready_sel}[{RI}]))", "{{host}} {{vm}}")],
            w=12,
        ),
    ]
