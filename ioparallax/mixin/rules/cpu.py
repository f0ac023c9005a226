"""The CVM overhead: the CPU the Nutanix Controller VM takes from its host, from vCenter (ESXi
clusters) or Prism (AHV clusters), whichever the cluster has (joined with ``or`` as the VM view)."""

from __future__ import annotations

from collections.abc import Callable

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.rules.model import Group, Rule

#: vCenter's realtime sample: the CPU counters grow by one 20 s sample at a time.
VCENTER_SAMPLE_SECONDS = 20


def _or(*parts: str) -> str:
    return "(\n  " + "\n  or\n  ".join(p.replace("\n", "\n  ") for p in parts) + "\n)"


def cpu_rules(cfg: MixinConfig) -> Group:
    w, vc, pr = cfg.w, cfg.sel("vcenter"), cfg.sel("prism")
    # vCenter: a counter's rate over the sampled time (its samples x 20 s), exact whatever the
    # window's alignment with the samples (as the VM view's rules); Prism: the 30 s sample gauges.
    vc_cvm_hz = (
        f"sum by (host) (\n  (\n    rate(vcenter_vm_cpu_usage_cycles_total{vc}[{w}])\n"
        f"    / (rate(vcenter_vm_cpu_samples_total{vc}[{w}]) * {VCENTER_SAMPLE_SECONDS} > 0)\n  )\n"
        f"  * on (vm, vm_id) group_left (host) vcenter_vm_cvm_info{vc}\n)"
    )
    pr_cvm_hz = (
        f"sum by (host) (\n  avg_over_time(prism_vm_cpu_usage_ratio{pr}[{w}])\n"
        f"  * on (vm, vm_id) prism_vm_vcpus{pr}\n  * on (vm, vm_id) group_left (host) prism_vm_cvm_info{pr}\n)\n"
        f"* on (host) (sum by (host) (prism_host_cpu_capacity_hertz{pr}) / sum by (host) (prism_host_cpu_cores{pr}))"
    )
    capacity = _or(
        f"sum by (host) (vcenter_host_cpu_capacity_hertz{vc})", f"sum by (host) (prism_host_cpu_capacity_hertz{pr})"
    )
    host_used = _or(
        f"sum by (host) (\n  rate(vcenter_host_cpu_usage_cycles_total{vc}[{w}])\n"
        f"  / (rate(vcenter_host_cpu_samples_total{vc}[{w}]) * {VCENTER_SAMPLE_SECONDS} > 0)\n)",
        f"sum by (host) (avg_over_time(prism_host_cpu_usage_ratio{pr}[{w}]) * prism_host_cpu_capacity_hertz{pr})",
    )
    return Group(
        "ioparallax.cpu",
        "The CVM overhead: the Controller VM's CPU against its host's capacity (vCenter or Prism).",
        [
            Rule(
                "Host: its CPU capacity in Hz (vCenter: summary.hardware.cpuMhz x cores; Prism: cpu_capacity_in_hz).",
                capacity,
                record="host:ioparallax_cpu_capacity:hertz",
            ),
            Rule(
                "Host: the CPU its CVM used, in Hz (vCenter: the CVM's cycles over its sampled seconds; Prism: "
                "its usage share x its vCPUs at the host's core clock).",
                _or(vc_cvm_hz, pr_cvm_hz),
                record=f"host:ioparallax_cvm_cpu_usage:hertz_rate{w}",
            ),
            Rule(
                "Host: the CVM's share of its host's CPU capacity (0-1): the CVM overhead of the node.",
                f"host:ioparallax_cvm_cpu_usage:hertz_rate{w}\n/ on (host)\nhost:ioparallax_cpu_capacity:hertz",
                record=f"host:ioparallax_cvm_cpu_usage:ratio_rate{w}",
            ),
            Rule(
                "Host: the share of its CPU capacity used by everything on it (VMs, CVM, hypervisor).",
                f"{host_used}\n/ on (host)\nhost:ioparallax_cpu_capacity:hertz",
                record=f"host:ioparallax_cpu_usage:ratio_rate{w}",
            ),
            Rule(
                "All hosts (per cluster when the cluster label is set): the CVMs' CPU over the hosts' capacity (0-1).",
                f"sum by () (host:ioparallax_cvm_cpu_usage:hertz_rate{w})\n"
                "/\nsum by () (host:ioparallax_cpu_capacity:hertz)",
                record=f"hosts:ioparallax_cvm_cpu_usage:ratio_rate{w}",
            ),
        ],
    )


def cpu_alerts(cfg: MixinConfig, alert: Callable[..., Rule]) -> Group:
    """The alert on the CVM overhead (``alert``: the alert kit's builder)."""
    t, f, w = cfg.thresholds, cfg.for_, cfg.w
    return Group(
        "ioparallax-cpu-alerts",
        "What the storage controller costs the hosts.",
        [
            alert(
                "IoparallaxCvmCpuHigh",
                "info",
                f.cvm_cpu,
                f"host:ioparallax_cvm_cpu_usage:ratio_rate{w} > {t.cvm_host_cpu_ratio:g}",
                "A CVM takes a large share of its host's CPU.",
                "The CVM on {{ $labels.host }} uses {{ $value | humanizePercentage }} of the host's CPU capacity: "
                "that much less is left for the application VMs, so a density result (VMs per node) carries it. "
                "Read it beside the storage throughput: a CVM busy serving many I/Os is expected, one busy at low "
                "I/O (background work, a small CVM) is a sizing question for the PoC report.",
                "The CVM's share of its host's capacity above the threshold, over the rate window.",
            ),
        ],
    )
