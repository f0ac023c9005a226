"""The storage view of a cluster: one simulated Stargate per CVM and the Stargate exporter."""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

import yaml

from ioparallax.simulators.stack.clusters import ClusterPart
from ioparallax.simulators.stack.launch import Launcher, start_announcing, start_exporter
from ioparallax.simulators.stack.scrape import probe_scrape

log = logging.getLogger("ioparallax.demo")


def start_stargate(stack: Launcher, part: ClusterPart) -> list[dict[str, Any]]:
    """One simulated Stargate per CVM, and the Stargate exporter probing each CVM (one per
    cluster: its vdisk mapping is the cluster's, vdisk ids being unique only within one)."""
    urls_file = part.workdir / "stargate-urls.json"
    argv = ["stargate-simulator", "--host", "127.0.0.1", "--urls-file", urls_file]
    cvms: dict[str, str] = start_announcing(stack, part, "stargate-simulator", argv, urls_file)
    for name, url in cvms.items():
        stack.urls[part.proc(f"stargate {name}")] = url
    if importlib.util.find_spec("ioparallax.exporters.stargate.cli") is None:
        log.warning("the Stargate exporter is not built yet: the simulated CVMs' pages are served, not scraped")
        return []
    # The vdisk -> VM disk mapping a PoC keeps in a YAML file (or reads from Prism): here it is
    # the scenario's identity map, so stargate_vdisk_info joins to the VM and guest views.
    mapping = {
        "vdisks": {str(row["vdisk_id"]): {"vm": row["vm"], "disk": row["unit"]} for row in part.trace.identity_map()},
        # The allow-list: the exporter refuses (HTTP 400) any CVM not listed here.
        "targets": ["127.0.0.1"],
    }
    mapping_path = part.workdir / "stargate-vdisks.yml"
    mapping_path.write_text(yaml.safe_dump(mapping, sort_keys=False))
    exp = start_exporter(stack, part, "stargate-exporter", [f"--config.file={mapping_path}"])
    part.exporters.append(exp.url.split("://", 1)[1])
    # One probe per CVM, as in production (deploy/prometheus/prometheus.yml).
    targets = [u.split("://", 1)[1] for u in cvms.values()]
    return [probe_scrape("stargate", exp.url, targets, labels=part.labels(stack.resolved_cluster_label()))]
