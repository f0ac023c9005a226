"""The density dashboard (ioparallax-density.json): the application view of a database density
test, with the storage view's latency beside it.

Transactions per second per application VM and together, against the number of VMs that run
one (the test adds them one by one), the per-VM throughput as a share of the first step's (1 =
linear scaling), failures and latency per VM, and the storage's latency on the same VMs' disks.
Everything comes from the recorded application view (group ``ioparallax.app``: pgbench-exporter
and any application following the contract of docs/pgbench.md). The CVMs' share of the hosts' CPU
(the platform's cost) comes from the VM view's CPU counters (group ``ioparallax.cpu``).
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.base import DIRECTIONS, Expr, braces, new_dashboard
from ioparallax.mixin.dashboards.panels import Q, row, single, tbl, ts

APP_VM = 'vm=~"$vm"'


def density(cfg: MixinConfig) -> db.Dashboard:
    e = Expr(cfg)
    w = cfg.w
    tx = f"vm_app:ioparallax_app_transactions:rate{w}"
    total = f"all_vms:ioparallax_app_transactions:rate{w}"
    active = f"all_vms:ioparallax_app_active_vms:count{w}"
    per_vm = f"{total}{{}} / {active}{{}}"
    linear = f"all_vms:ioparallax_app_linear_scaling:ratio{w}{{}}"
    d = new_dashboard(
        cfg,
        "density",
        "ioparallax / Density (application view)",
        "A database density test: the application in each VM is the control, the number of VMs the "
        "variable. Transactions per second per VM and together against the VMs that run one, the "
        "per-VM throughput against the first step's (linear scaling: 100 %), failures, latency, and "
        "the storage's latency on the same VMs' disks. From pgbench-exporter and any application "
        "following the contract of docs/pgbench.md (the recorded ioparallax.app series).",
        all_default=True,
    )
    d.with_row(row("Throughput against the number of VMs"))
    d.with_panel(
        single(
            "Application VMs",
            "VMs whose application completes transactions now (all_vms:ioparallax_app_active_vms): the "
            "density test's x axis.",
            "short",
            [Q(f"{active}{{}}", "VMs")],
        )
    )
    d.with_panel(
        single(
            "Transactions per second, all VMs",
            "Every application VM's transactions per second together.",
            "reqps",
            [Q(f"{total}{{}}", "total")],
        )
    )
    d.with_panel(
        single(
            "Per-VM throughput now, % of linear",
            "Transactions per second per VM now, over the first step's (one VM): 100 % is linear scaling, "
            "90 % what the published density study reached at 40 VMs. Empty until a one-VM step is within "
            f"the last {cfg.windows.density_baseline} (windows.density_baseline).",
            "percentunit",
            [Q(linear, "% of linear")],
            limit=0.8,
            above="green",
        )
    )
    d.with_panel(
        single(
            "CVM share of host CPU",
            "The Controller VMs' CPU as a share of all hosts' capacity now (vCenter: cpu.usagemhz against "
            "cpuMhz x cores; Prism: hypervisor_cpu_usage_ppm): the storage controller's cost, about 5 % in "
            "the published density study. Red above thresholds.cvm_host_cpu_ratio "
            f"({cfg.thresholds.cvm_host_cpu_ratio:.0%}); per host on the overview dashboard.",
            "percentunit",
            [Q(f"hosts:ioparallax_cvm_cpu_usage:ratio_rate{w}{{}}", "CVMs, all hosts")],
            limit=cfg.thresholds.cvm_host_cpu_ratio,
        )
    )
    d.with_panel(
        ts(
            "Transactions per second, all VMs and per VM",
            "All applications' transactions per second together, and divided by the VMs that run one: "
            "with linear scaling the total climbs by one VM's worth at each step and the per-VM line stays flat.",
            "reqps",
            [Q(f"{total}{{}}", "all VMs"), Q(per_vm, "per VM")],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Application VMs over time",
            "How many VMs complete transactions: each step of a density test is a plateau.",
            "short",
            [Q(f"{active}{{}}", "VMs")],
            w=8,
        )
    )
    d.with_panel(
        ts(
            "Per-VM throughput, % of linear",
            "Transactions per second per VM over the first step's (one VM): the scaling curve. A fall "
            "at a step is the platform's contention showing (CPU, the CVM, the storage's latency).",
            "percentunit",
            [Q(linear, "% of linear")],
            w=8,
            limit=0.9,
        )
    )
    d.with_row(row("Each application VM"))
    d.with_panel(
        ts(
            "Transactions per second per VM",
            "Each VM's application (vm_app:ioparallax_app_transactions): with linear scaling the early "
            "VMs keep their throughput as the later ones start.",
            "reqps",
            [Q(f"{tx}{braces(APP_VM)}", "{{vm}} {{app}}")],
        )
    )
    d.with_panel(
        ts(
            "Transaction latency per VM",
            "Mean transaction latency of each VM's application (its latency sum over its count; pgbench: "
            "the progress lines' lat, the summary's latency average).",
            "s",
            [Q(f"vm_app:ioparallax_app_transaction_latency_seconds:mean{w}{braces(APP_VM)}", "{{vm}} {{app}}")],
        )
    )
    d.with_panel(
        ts(
            "Failed transactions per second per VM",
            "Failures each application reports (pgbench 15+: serialization and deadlock errors not "
            "retried). Empty when none reports failures (pgbench 14 and older abort instead).",
            "reqps",
            [Q(f"vm_app:ioparallax_app_failed_transactions:rate{w}{braces(APP_VM)}", "{{vm}} {{app}}")],
            no_value="no application reports failures",
        )
    )
    d.with_panel(
        ts(
            "Storage latency on the application VMs' disks",
            "The storage view (Stargate) of the same VMs' disks beside the application's latency: a "
            "database in memory waits on its WAL writes and checkpoints only.",
            "s",
            [
                Q(e.rule(f"vm_disk:ioparallax_storage_{dr}_latency_seconds:avg{w}"), f"{{{{vm}}}} {{{{disk}}}} {dr}")
                for dr in DIRECTIONS
            ],
        )
    )
    d.with_row(row("pgbench runs"))
    d.with_panel(
        tbl(
            "pgbench runs and their hygiene",
            "Each pgbench run the exporters follow (pgbench_run_info: version, transaction type, where the "
            "numbers come from) and the traps found in their summaries (docs/hygiene.md#pgbench: a "
            "database in shared_buffers is what a density test wants, not a storage test).",
            "short",
            [
                f"pgbench_run_info{e.sel('pgbench', APP_VM)}",
                f"pgbench_run_hygiene_problem{e.sel('pgbench', APP_VM)} == 1",
            ],
            hide=("Time", "__name__", "Value #A", "Value #B", "job"),
        )
    )
    return d
