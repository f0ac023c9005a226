"""What every ioparallax dashboard shares: the variables ($datasource, $cluster, $vm, $disk,
$vdisk), the dashboard frame, and the PromQL built from the mixin config (``Expr``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.models import dashboard as dm

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.panels import DATASOURCE, Q, single
from ioparallax.mixin.vmview import SAMPLE_SECONDS, Source, either

DIRECTIONS = ("read", "write")
RI = "$__rate_interval"
# vCenter's realtime counters advance once per 20 s sample, whatever the scrape interval: rates of
# the vcenter_*_total counters get this as their Min step, so $__rate_interval spans at least four
# samples (Grafana: max($__interval + step, 4 x step)) instead of the datasource's 4 scrapes.
VCENTER_SAMPLE = "20s"
# Prism's stats are 30 s samples: a query that reads Prism's counters gets 30s.
PRISM_SAMPLE = "30s"
# The recorded VM disks of either manager, with their source (vcenter, prism).
VM_SOURCE_INFO = "vm_disk:ioparallax_vm_source:info"
VM_SOURCES = 'vm_source=~"' + "|".join(SAMPLE_SECONDS) + '"'


# -- variables ------------------------------------------------------------------------------


def _variables(cfg: MixinConfig, all_default: bool) -> list[Any]:
    """$datasource, $cluster (with cfg.cluster_label), $vm, $disk, $vdisk. ``all_default``: start
    on All (the overview). Every query but $cluster's gets the cluster matcher in build_dashboards."""
    ds = (
        db.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .current(dm.VariableOption(selected=True, text=cfg.dashboards.datasource, value=cfg.dashboards.datasource))
    )
    out: list[Any] = [ds]
    sg = cfg.selectors.stargate
    if cfg.cluster_label:
        # All by default: a Prometheus with one cluster has no such label, and All (.*) matches
        # series without it.
        out.append(
            db.QueryVariable(CLUSTER_VARIABLE)
            .label("cluster")
            .description(
                f"Cluster ({cfg.cluster_label} label, set by Prometheus): vdisk ids and VM "
                "names are unique only within one. All when Prometheus holds one cluster."
            )
            .datasource(DATASOURCE)
            .query(f"label_values({VM_SOURCE_INFO}{braces(VM_SOURCES)}, {cfg.cluster_label})")
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.NATURAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(dm.VariableOption(selected=True, text=["All"], value=["$__all"]))
        )
    for name, label, query, doc in (
        (
            "vm",
            "VM",
            f"label_values({VM_SOURCE_INFO}{braces(VM_SOURCES)}, vm)",
            "VM name as vCenter (or Prism, on AHV) knows it: the join key of the guest, VM and storage views.",
        ),
        (
            "disk",
            "disk",
            f"label_values({VM_SOURCE_INFO}" + braces(VM_SOURCES, 'vm=~"$vm"') + ", disk)",
            "Virtual disk of the VM (vCenter instance, e.g. scsi0:1; Prism disk address on AHV, e.g. scsi.1).",
        ),
        (
            "vdisk",
            "vdisk",
            "label_values(stargate_vdisk_info" + braces(sg, VMDISK) + ", vdisk_id)",
            "Stargate vdisk id backing the VM disk (stargate_vdisk_info, from the exporter's vdisk mapping).",
        ),
    ):
        v = (
            db.QueryVariable(name)
            .label(label)
            .description(doc)
            .datasource(DATASOURCE)
            .query(query)
            .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(dm.VariableSort.NATURAL_ASC)
            .multi(True)
            .include_all(True)
            .all_value(".*")
        )
        if all_default:
            v.current(dm.VariableOption(selected=True, text=["All"], value=["$__all"]))
        out.append(v)
    return out


def braces(*matchers: str) -> str:
    parts = [m for m in matchers if m]
    return "{" + ",".join(parts) + "}"


VMDISK = 'vm=~"$vm",disk=~"$disk"'
CLUSTER_VARIABLE = "cluster"
VDISK = 'vdisk_id=~"$vdisk"'


def new_dashboard(cfg: MixinConfig, name: str, title: str, description: str, all_default: bool = False) -> db.Dashboard:
    d = cfg.dashboards
    return (
        db.Dashboard(title)
        .uid(f"{d.uid_prefix}-{name}")
        .description(description)
        .tags(list(d.tags))
        .refresh(d.refresh)
        .time(d.time_from, "now")
        .timezone("browser")
        .editable()
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .variables(_variables(cfg, all_default))
        .link(
            db.DashboardLink("ioparallax")
            .type(dm.DashboardLinkType.DASHBOARDS)
            .tags(list(d.tags))
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )


# -- expressions --------------------------------------------------------------------------------


class Expr:
    """PromQL built from the config: selectors from cfg.selectors, rule names with cfg.w."""

    def __init__(self, cfg: MixinConfig):
        self.cfg = cfg
        self.w = cfg.w

    def sel(self, source: str, *extra: str) -> str:
        return self.cfg.sel(source, *extra)

    def rule(self, name: str, *extra: str) -> str:
        """A recording rule of the contract (alerts/ioparallax.rules.yml) on the selected VM disks."""
        return f"{name}{braces(VMDISK, *extra)}"

    def vm_disk(self, layer: str, d: str, quantity: str) -> str:
        agg = {"guest": f"rate{self.w}", "guest_os": f"rate{self.w}", "vm": f"rate{self.w}", "storage": f"avg{self.w}"}[
            layer
        ]
        if quantity == "latency_seconds":
            agg = {
                "guest": f"mean{self.w}",
                "guest_os": f"mean{self.w}",
                "vm": f"mean{self.w}",
                "storage": f"avg{self.w}",
            }[layer]
        return self.rule(f"vm_disk:ioparallax_{layer}_{d}_{quantity}:{agg}")

    def ratio(self, name: str) -> str:
        return self.rule(f"vm_disk:ioparallax_{name}:ratio{self.w}")

    def vdisk_ratio(self, name: str, *extra: str) -> str:
        return f"vdisk:ioparallax_{name}:ratio{braces(VMDISK, *extra)}"

    def vdisk_flag(self, name: str, *extra: str) -> str:
        return f"vdisk:ioparallax_{name}:bool{braces(VMDISK, *extra)}"

    # Storage series of the selected vdisks, with vm and disk from stargate_vdisk_info.
    def storage(self, metric: str, *extra: str) -> str:
        return (
            f"{metric}{self.sel('stargate', VDISK, *extra)}"
            f" * on (vdisk_id) group_left (vm, disk) max by (vdisk_id, vm, disk) "
            f"(stargate_vdisk_info{self.sel('stargate', VDISK, VMDISK)})"
        )

    # The fio jobs on the selected VM disks (recording rule: fio_job_info's raw device -> guest
    # disk serial -> vCenter disk UUID -> vm, disk).
    FIO_JOB_KEY = "instance, job, jobname, jobid, host, source"

    def fio_jobs(self) -> str:
        return f"guest_job:ioparallax_vm_disk:info{braces(VMDISK)}"

    def fio(self, metric: str, *extra: str) -> str:
        return self.fio_join(f"{metric}{self.sel('fio', *extra)}")

    def fio_join(self, expr: str) -> str:
        return f"{expr} * on ({self.FIO_JOB_KEY}) group_left (vm, disk) {self.fio_jobs()}"

    def vm(self, build: Callable[[Source], str], *extra: str) -> str:
        """A VM-view query on the selected VM disks from vCenter's series or Prism's (where Prism has
        every series it names; else vCenter's alone): ioparallax/mixin/vmview.py."""
        return either(self.cfg, build, VMDISK, *extra)

    def vm_sample(self, suffix: str) -> str:
        """The latest sample of ``vcenter_virtual_disk_<suffix>`` or its Prism counterpart."""
        return self.vm(lambda s: s(suffix))

    def vm_source(self) -> str:
        """Each selected VM disk's VM-view source (vm_source label) with its sample period as value."""
        return (
            f"{VM_SOURCE_INFO}{braces(VMDISK)} * on (vm, disk) group_left () "
            f"vm_disk:ioparallax_vm_sample_interval:seconds{braces(VMDISK)}"
        )


def min_step(expr: str) -> str:
    """The Min step of a query that rates the managers' counters: their slowest sample period."""
    return PRISM_SAMPLE if "prism_" in expr else VCENTER_SAMPLE


def vm_source_panel(e: Expr) -> Any:
    """Which manager the VM view of each selected VM disk comes from, and its sample period."""
    periods = ", ".join(f"{src} {n} s" for src, n in SAMPLE_SECONDS.items())
    return single(
        "VM view: source and sample period",
        "Where the VM view of each VM disk comes from (vm_disk:ioparallax_vm_source:info: vcenter on "
        f"ESXi, prism on AHV) and the length of its samples ({periods}): a burst shorter than the "
        "sample is averaged over it.",
        "s",
        [Q(e.vm_source(), "{{vm}} {{disk}}: {{vm_source}}")],
        w=24,
        h=3,
    )
