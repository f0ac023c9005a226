"""The 2 s VM view on ESXi: esxtop's samples of each VM disk (esxtop-exporter, docs/esxtop.md).

vCenter's 20 s samples average a burst over 20 s; esxtop's (``esxtop -b -d 2``) over 2 s. Where a VM
disk has both, the highest esxtop sample in the window over the highest vCenter sample says how much
the 20 s view flattens the disk's bursts, measured in the VM view itself: the burst rules and
IoparallaxBurstAveragedAway judge it there instead of inferring the bursts from the guest's queue
depth (Little's law, which needs a guest exporter and direct I/O).

The esxtop exporter labels each virtual disk ``vm`` and ``disk`` as the vCenter exporter does, so
the rules join the two on (vm, disk) with no mapping.
"""

from __future__ import annotations

from ioparallax.mixin.rules.exprs import DIRECTIONS, Exprs
from ioparallax.mixin.rules.model import Group, Rule
from ioparallax.mixin.vmview import SAMPLE_SECONDS

# The recording rules the alerts, the dashboards and the report read (``{w}``: the rate window).
SAMPLE_INTERVAL = "vm_disk:ioparallax_esxtop_sample_interval:seconds"
PEAK = "vm_disk:ioparallax_esxtop_sample_bytes:max{w}"
PEAK_RATIO = "vm_disk:ioparallax_esxtop_peak_to_vm_sample_bytes:ratio{w}"


def esxtop_vm_view(x: Exprs) -> Group:
    """Per VM disk with an esxtop capture: its sample period, its highest 2 s sample in the window,
    and that over vCenter's highest 20 s sample."""
    w, es, vc = x.w, x.cfg.sel("esxtop"), x.vc
    vc_period = SAMPLE_SECONDS["vcenter"]

    def peak(source: str, sel: str) -> str:
        return " + ".join(
            f"max_over_time({source}_virtual_disk_sample_{d}_bytes_per_second{sel}[{w}])" for d in DIRECTIONS
        )

    return Group(
        "ioparallax.esxtop",
        "The 2 s VM view on ESXi (esxtop), beside vCenter's 20 s one: how much the 20 s samples flatten a burst.",
        [
            Rule(
                "The esxtop capture's sample period in seconds per VM disk (esxtop's -d as it ran: the mean "
                "time between its samples, esxtop_source_sample_interval_seconds): the window its samples "
                "average a burst over.",
                f"max by (vm, disk) (\n"
                f"  group by (instance, job, source, vm, disk) (esxtop_virtual_disk_samples_total{es})\n"
                f"  * on (instance, job, source) group_left ()\n"
                f"  max by (instance, job, source) (esxtop_source_sample_interval_seconds{es})\n)",
                record=SAMPLE_INTERVAL,
            ),
            Rule(
                f"The highest esxtop sample's bytes per second of the VM disk in the window ({w}), reads plus "
                "writes (each direction's highest): the burst as the 2 s VM view shows it. The job is scraped "
                "as often as esxtop writes, so every sample is seen.",
                f"sum by (vm, disk) (\n  {peak('esxtop', es)}\n)",
                record=PEAK.format(w=w),
            ),
            Rule(
                f"The 2 s VM view's peak over the 20 s one's: the highest esxtop sample over the highest "
                f"{vc_period} s vCenter sample of the VM disk in the window ({w}), bytes. ~1 for steady I/O; a "
                f"1 s burst every {vc_period} s reads ~{vc_period // 2}: vCenter's samples show a "
                f"{vc_period // 2}th of the rate the 2 s samples see. ESXi only (no esxtop on AHV).",
                f"{PEAK.format(w=w)}\n/ on (vm, disk)\n(sum by (vm, disk) (\n  {peak('vcenter', vc)}\n) > 0)",
                record=PEAK_RATIO.format(w=w),
            ),
        ],
    )


def period_template(cluster_label: str) -> str:
    """Alert template text: the esxtop sample period of the alert's VM disk, e.g. ``every 2 s``."""
    matchers = [(cluster_label, f"$labels.{cluster_label}")] if cluster_label else []
    matchers += [("vm", "$labels.vm"), ("disk", "$labels.disk")]
    fmt = ",".join(f"{k}=%q" for k, _ in matchers)
    args = " ".join(v for _, v in matchers)
    return (
        f'{{{{ with printf "{SAMPLE_INTERVAL}{{{fmt}}}" {args} | query }}}}every '
        '{{ . | first | value | printf "%.0f" }} s{{ else }}period unknown{{ end }}'
    )
