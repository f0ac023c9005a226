"""The application view: what each application in each VM completed (docs/pgbench.md), from any
application that follows the contract (``app_transactions_total{app, vm}`` and its companions,
written by node_exporter's textfile collector or pushed) and from pgbench-exporter, read as
``app="pgbench"``. The density dashboard and the report's application scalability read these."""

from __future__ import annotations

from ioparallax.mixin.rules.exprs import Exprs
from ioparallax.mixin.rules.model import Group, Rule


def _either(contract: str, pgbench: str) -> str:
    # One series per (vm, app): the contract's, else pgbench-exporter's as app="pgbench" (`or` keeps
    # a VM that has both once, from the contract).
    return (
        f"sum by (vm, app) (\n  {contract}\n)\nor\n"
        f'label_replace(\n  sum by (vm) (\n    {pgbench}\n  ),\n  "app", "pgbench", "", ""\n)'
    )


def application_rates(x: Exprs) -> Group:
    """Per VM and application: transactions and failures per second, mean latency; over all VMs
    (per cluster): the applications' total, how many VMs run one (the density test's x axis) and
    the per-VM throughput as a share of the first step's (% of linear scaling)."""
    app, pg, w = x.cfg.sel("app"), x.cfg.sel("pgbench"), x.w
    base = x.cfg.windows.density_baseline
    lat = {
        part: _either(
            f"rate(app_transaction_latency_seconds_{part}{app}[{w}])",
            f"rate(pgbench_transaction_latency_seconds_{part}{pg}[{w}])",
        )
        for part in ("sum", "count")
    }
    rules = [
        Rule(
            "Application: transactions per second each application completed in each VM (the contract's "
            "app_transactions_total{app, vm}; pgbench-exporter's successful transactions as app=pgbench).",
            _either(f"rate(app_transactions_total{app}[{w}])", f"rate(pgbench_transactions_total{pg}[{w}])"),
            record=f"vm_app:ioparallax_app_transactions:rate{w}",
        ),
        Rule(
            "Application: failed transactions per second (app_failed_transactions_total; pgbench 15+'s failures).",
            _either(
                f"rate(app_failed_transactions_total{app}[{w}])",
                f"rate(pgbench_failed_transactions_total{pg}[{w}])",
            ),
            record=f"vm_app:ioparallax_app_failed_transactions:rate{w}",
        ),
        Rule(
            "Application: mean transaction latency (latency sum over count, where the application reports them).",
            f"(\n{lat['sum']}\n)\n/\n(\n(\n{lat['count']}\n) > 0\n)",
            record=f"vm_app:ioparallax_app_transaction_latency_seconds:mean{w}",
        ),
        Rule(
            "Application: transactions per second of every application VM together (per cluster).",
            f"sum by () (vm_app:ioparallax_app_transactions:rate{w})",
            record=f"all_vms:ioparallax_app_transactions:rate{w}",
        ),
        Rule(
            "Application: how many VMs complete transactions now (a density test adds them one by one).",
            f"count by () (vm_app:ioparallax_app_transactions:rate{w} > 0)",
            record=f"all_vms:ioparallax_app_active_vms:count{w}",
        ),
        Rule(
            "Application: the throughput of a density test's first step (one application VM), the highest "
            f"over the last {base} (windows.density_baseline): linear scaling's unit.",
            f"max_over_time((\n  all_vms:ioparallax_app_transactions:rate{w}\n  and\n  "
            f"all_vms:ioparallax_app_active_vms:count{w} == 1\n)[{base}:{w}])",
            record=f"all_vms:ioparallax_app_single_vm_transactions:max{base}",
        ),
        Rule(
            "Application: transactions per second per VM now over the first step's: 1 is linear scaling "
            "(each VM added brings a whole VM's throughput), 0.9 is 90 % of linear.",
            f"(\n  all_vms:ioparallax_app_transactions:rate{w}\n  / all_vms:ioparallax_app_active_vms:count{w}\n)\n"
            f"/ all_vms:ioparallax_app_single_vm_transactions:max{base}",
            record=f"all_vms:ioparallax_app_linear_scaling:ratio{w}",
        ),
    ]
    return Group("ioparallax.app", "The application view: transactions per VM and application.", rules)
