"""One ground truth for every simulated view.

A *scenario* (YAML, see ``docs/scenarios.md``) describes a cluster, its VMs, their virtual disks
with their identities in every layer (guest device, vCenter controller address and backing file,
Stargate vdisk id) and, per disk, the I/O *streams* that run on it. :func:`compile_scenario` turns
it into a :class:`Trace`: per disk, per second of a repeating period, how much of each stream was
active. Every simulator (Stargate pages, vCenter 20 s samples, fio status streams) derives its
numbers from the same trace, and the time since the scenario's origin (the Unix epoch unless the
scenario sets ``origin``) modulo the period tells them all which second it is, so they agree
without talking to each other.
"""

from .model import (  # noqa: F401
    Application,
    BlockSizeMix,
    Cluster,
    ClusterCpu,
    Disk,
    DiskspdOptions,
    Host,
    Scenario,
    Stream,
    VdbenchOptions,
    Vm,
    VmCpu,
    list_scenarios,
    load_scenario,
    parse_scenario,
    scenario_path,
    write_with_origin,
)
from .trace import CpuSeries, DiskSecond, Trace, compile_scenario  # noqa: F401
