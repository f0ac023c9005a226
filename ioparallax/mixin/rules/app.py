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
    """Per VM and application: transactions and failures per second, mean latency; per cluster:
    the applications' total and how many VMs run one (the density test's x axis)."""
    app, pg, w = x.cfg.sel("app"), x.cfg.sel("pgbench"), x.w
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
            "Application: transactions per second of every application of the cluster together.",
            f"sum by () (vm_app:ioparallax_app_transactions:rate{w})",
            record=f"cluster:ioparallax_app_transactions:rate{w}",
        ),
        Rule(
            "Application: how many VMs complete transactions now (a density test adds them one by one).",
            f"count by () (vm_app:ioparallax_app_transactions:rate{w} > 0)",
            record=f"cluster:ioparallax_app_active_vms:count{w}",
        ),
    ]
    return Group("ioparallax.app", "The application view: transactions per VM and application.", rules)
