"""The PromQL of the committed dashboards, as Grafana would run it: every panel query and every
variable's ``label_values()`` selector, with the dashboard variables substituted.

Used by the demo's status report (how many panel queries return data right now) and by the tests.
Reads the JSON files only, so it needs no Grafana SDK.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ioparallax.paths import DASHBOARDS_DIR

_VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass(frozen=True)
class Expr:
    where: str  # "<file> / <panel title> / <refId>" or "<file> / variable <name>"
    expr: str  # as in the JSON, with variables


def load_dashboards(directory: Path = DASHBOARDS_DIR) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted(directory.glob("*.json"))}


def panels(model: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in model.get("panels", []):
        yield p
        yield from p.get("panels", [])


def label_values_selector(query: str) -> str:
    """The series selector of ``label_values(selector, label)``."""
    m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", query.strip(), re.S)
    if not m:
        raise ValueError(f"not a label_values() query: {query!r}")
    return m.group(1)


def expressions(dashboards: dict[str, dict[str, Any]]) -> list[Expr]:
    out = []
    for fname, model in sorted(dashboards.items()):
        for p in panels(model):
            for t in p.get("targets", []) or []:
                out.append(Expr(f"{fname} / {p.get('title')} / {t.get('refId')}", t["expr"]))
        for v in model.get("templating", {}).get("list", []):
            if v.get("type") == "query":
                out.append(Expr(f"{fname} / variable {v['name']}", label_values_selector(v["query"])))
    return out


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace ``$name`` / ``${name}`` of known dashboard variables; leave others (``$1`` of
    label_replace) alone, as Grafana does."""

    def rep(m: re.Match) -> str:
        name = m.group(1) or m.group(2)
        return values.get(name, m.group(0))

    return _VAR.sub(rep, expr)


def joined_vm_disks(cluster_label: str | None = None) -> str:
    """A VM disk that the guest, the VM and the storage views all know (what the variables default
    to), per cluster: ``cluster_label``, ioparallax/mixin/config.yml's when None, '' for none. (The dashboards'
    variable is named ``$cluster`` whatever the label's name.)"""
    if cluster_label is None:
        from ioparallax.mixin.config import load_config

        cluster_label = load_config().cluster_label
    key = f"{cluster_label}, vm, disk" if cluster_label else "vm, disk"
    return (
        f"group by ({key}) (vm_disk:ioparallax_guest_tool:info) "
        f"and on ({key}) group by ({key}) (vdisk:ioparallax_vdisk:info) "
        f"and on ({key}) group by ({key}) (vm_disk:ioparallax_vm_source:info)"
    )


JOINED_VM_DISKS = joined_vm_disks()  # with ioparallax/mixin/config.yml's cluster_label


#: The application view's series (the density dashboard): empty by design where no application
#: runs, so the coverage leaves its queries out there instead of counting them as missing data.
APPLICATION_SERIES = re.compile(r"\b(vm_app:ioparallax_app_|all_vms:ioparallax_app_|pgbench_)")


def application_view(expr: str) -> bool:
    """Whether a dashboard query reads the application view."""
    return bool(APPLICATION_SERIES.search(expr))


@dataclass
class Coverage:
    """How many of the dashboards' queries return data, for one VM disk; ``left_out``: the
    application view's queries where no application runs (not counted in ``total``)."""

    values: dict[str, str]
    total: int
    empty: list[Expr]
    left_out: int = 0

    @property
    def with_data(self) -> int:
        return self.total - len(self.empty)


def dashboard_coverage(
    query: Any,
    rate_interval: str = "1m",
    interval: str = "5s",
    dashboards: dict[str, dict[str, Any]] | None = None,
    cluster: str | None = None,
    cluster_label: str | None = None,
) -> Coverage | None:
    """Run every panel query and variable of the dashboards through ``query`` (PromQL -> list of
    results, e.g. an instant query against Prometheus) for the first VM disk all three views know
    (of ``cluster`` when given, a value of ``cluster_label``: ioparallax/mixin/config.yml's when None); None
    when there is none yet."""
    if cluster_label is None:
        from ioparallax.mixin.config import load_config

        cluster_label = load_config().cluster_label
    joined = query(joined_vm_disks(cluster_label))
    if cluster is not None:
        joined = [r for r in joined if r["metric"].get(cluster_label) == cluster]
    if not joined:
        return None
    m = sorted((r["metric"] for r in joined), key=lambda m: (m.get(cluster_label, ""), m["vm"], m["disk"]))[0]
    # The $cluster variable's value; "" matches series without the label, as Grafana's All (.*) does.
    value = m.get(cluster_label, "") if cluster_label else ""
    scope = f'{cluster_label}="{value}",' if cluster_label else ""
    vdisks = query(f'vdisk:ioparallax_vdisk:info{{{scope}vm="{m["vm"]}",disk="{m["disk"]}"}}')
    values = {
        "cluster": value,
        "vm": m["vm"],
        "disk": m["disk"],
        "vdisk": vdisks[0]["metric"]["vdisk_id"] if vdisks else "",
        "__rate_interval": rate_interval,
        "__interval": interval,
    }
    every = expressions(dashboards if dashboards is not None else load_dashboards())
    left_out = 0
    if not query(f"vm_app:ioparallax_app_transactions:rate1m{{{scope.rstrip(',')}}}"):
        # no application runs in this cluster: the density dashboard is empty by design
        kept = [e for e in every if not application_view(e.expr)]
        left_out, every = len(every) - len(kept), kept
    empty = [e for e in every if not query(substitute(e.expr, values))]
    return Coverage(values, len(every), empty, left_out)
