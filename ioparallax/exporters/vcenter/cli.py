"""vcenter-exporter: vCenter's per-virtual-disk performance counters for Prometheus.

Multi-target like the blackbox exporter: Prometheus scrapes ``/probe?target=<vcenter>``; the
exporter keeps one session per vCenter, caches the inventory, fetches every 20 s sample since
the last one it saw and integrates them into counters, so no sample is lost whatever the
scrape interval.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ioparallax.exporters.common import multitarget
from ioparallax.exporters.common.web.startup import add_web_args
from ioparallax.exporters.vcenter.address import target_key
from ioparallax.exporters.vcenter.collector import render_probe
from ioparallax.exporters.vcenter.config import ExporterConfig, TargetConfig, load_config
from ioparallax.exporters.vcenter.target import Target

log = logging.getLogger("ioparallax.exporters.vcenter")

DEFAULT_LISTEN = ":9762"


class Targets(multitarget.TargetPool):
    """The Target objects by normalised key (common.multitarget.TargetPool): each keeps its
    sessions, caches and counters until it is not probed for ``session_idle_timeout``: then its
    session is logged out and its state dropped, so abandoned targets hold no vCenter session."""

    names = ExporterConfig.names
    description = (
        "vCenter per-virtual-disk performance counters (every 20 s sample integrated into "
        "counters, plus the latest sample as vCenter shows it) and VM/disk inventory for joins."
    )
    example_target = "vcenter.example.com"
    drop_message = "closing the session of target=%s: not probed for %.0fs (session_idle_timeout)"

    def target_key(self, name: str) -> str:
        return target_key(name)

    def new_target(self, key: str, cfg: TargetConfig) -> Target:
        return Target(key, cfg) if self.client_factory is None else Target(key, cfg, self.client_factory)

    def probe_target(self, target: Target, timeout: float) -> tuple[Any, bool]:
        return target.probe(timeout)  # (the snapshot, shared: answered by another probe's read)

    def details(self, snap: Any, shared: bool) -> str:
        return f"queries={snap.queries} new_samples={snap.new_samples} shared={shared}"

    def render(self, name: str, snap: Any, shared: bool, duration: float) -> bytes:
        return render_probe(name, snap, duration, shared, self.config.latest_samples)


make_app = Targets.make_app


def build_parser() -> argparse.ArgumentParser:
    p = multitarget.exporter_parser(
        ExporterConfig.names, __doc__, multitarget.credentials_epilog(ExporterConfig.names, "VC", "SOAP answers")
    )
    add_web_args(p, DEFAULT_LISTEN)
    multitarget.add_target_args(
        p,
        ExporterConfig.names,
        "a vCenter",
        config_help="YAML file with targets, credentials, TLS and refresh settings (optional)",
        idle_help="log out of a target not probed for this long",
    )
    p.add_argument(
        "--collector.latest-samples",
        dest="latest_samples",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="expose the latest 20 s sample as gauges (vcenter_virtual_disk_sample_*: "
        "15 series per VM disk that repeat what the counters integrate; the "
        "vCenter-sample lines of the dashboards need them); "
        "--no-collector.latest-samples saves them (default: latest_samples in "
        "the config file, else on)",
    )
    multitarget.add_probe_args(
        p,
        replay_help="serve probes from a capture (vcenter-exporter capture) instead of a vCenter: only the "
        "capture's target may be probed, and it answers as the vCenter did when captured",
    )
    return p


PROGRAM = multitarget.Program(Targets, build_parser, load_config, DEFAULT_LISTEN, replay_switches=("latest_samples",))
main = PROGRAM.main

if __name__ == "__main__":
    sys.exit(main())
