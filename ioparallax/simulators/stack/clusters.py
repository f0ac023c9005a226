"""The simulated clusters of a stack: ``--scenario`` values as clusters, each a :class:`ClusterPart`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ioparallax.simulators.scenario import Trace

CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def cluster_specs(values: list[str]) -> list[tuple[str, str | None]]:
    """``--scenario`` values as (scenario, cluster name or None): each value one or several
    comma-separated scenarios, each a library name or YAML file, optionally ``@<cluster name>``."""
    out: list[tuple[str, str | None]] = []
    for value in values:
        for spec in value.split(","):
            spec = spec.strip()
            if not spec:
                continue
            scenario, at, cluster = spec.partition("@")
            if at and not CLUSTER_NAME.fullmatch(cluster):
                raise ValueError(
                    f"--scenario {spec!r}: the cluster name after @ must be letters, digits, "
                    f"'.', '_' or '-', got {cluster!r}"
                )
            out.append((scenario, cluster if at else None))
    if not out:
        raise ValueError("--scenario: no scenario given")
    return out


@dataclass
class ClusterPart:
    """One simulated cluster of a stack: a scenario's simulators (the CVMs' Stargate pages, vCenter,
    the guests) and the exporters reading them. Its targets carry ``cluster_label=cluster`` (target
    labels in the scrape config); a stack of one cluster given without a name leaves them unlabelled."""

    scenario: str  # library name or YAML file
    cluster: str | None  # the cluster label's value; None: the stack's only cluster, unlabelled
    workdir: Path  # its generated configs, trace, guest files
    trace: Trace
    exporters: list[str] = field(default_factory=list)  # host:port of its Stargate and vCenter/Prism exporters

    @property
    def ahv(self) -> bool:
        """An AHV cluster: its VM view comes from Prism, not vCenter."""
        return self.trace.scenario.cluster.ahv

    @property
    def manager(self) -> str:
        """What the VM view comes from, as the demo's summary names it."""
        return "Prism" if self.ahv else "vCenter"

    def proc(self, name: str) -> str:
        """A process name unique in the stack (its log file, PID file and URL key)."""
        return name if self.cluster is None else f"{self.cluster}.{name}"

    def labels(self, cluster_label: str, **more: str) -> dict[str, str]:
        """The target labels of this cluster's targets, with ``more``."""
        return ({cluster_label: self.cluster} if self.cluster is not None else {}) | more
