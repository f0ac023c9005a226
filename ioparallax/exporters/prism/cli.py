"""prism-exporter: Prism's per-virtual-disk VM view (hypervisor_*) and storage view
(controller_*) for Prometheus.

Multi-target like the blackbox exporter: Prometheus scrapes ``/probe?target=<prism>``; the
exporter keeps one session per Prism, reads the whole cluster's virtual disks in one paged v2.0
call, and integrates every 30 s sample exactly once into counters, so that rate() is exact
whatever the scrape interval. See docs/prism.md.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from ioparallax.exporters.common import multitarget
from ioparallax.exporters.common.web.startup import add_web_args
from ioparallax.exporters.prism.address import target_key
from ioparallax.exporters.prism.collector import render_probe
from ioparallax.exporters.prism.config import ExporterConfig, TargetConfig, load_config
from ioparallax.exporters.prism.target import Target

log = logging.getLogger("ioparallax.exporters.prism")

DEFAULT_LISTEN = ":9764"


class Targets(multitarget.TargetPool):
    """The Target objects by normalised key (common.multitarget.TargetPool): each keeps its
    session, counters and sample keeper until it is not probed for ``session_idle_timeout``."""

    names = ExporterConfig.names
    description = (
        "Prism per-virtual-disk statistics: the VM view (hypervisor_*) and the storage view "
        "(controller_*), every 30 s sample integrated into counters, plus identity series for joins."
    )
    example_target = "prism.example.com"

    def target_key(self, name: str) -> str:
        return target_key(name)

    def new_target(self, key: str, cfg: TargetConfig) -> Target:
        extra: dict[str, Any] = {} if self.client_factory is None else {"client_factory": self.client_factory}
        return Target(key, cfg, time_scale=self.config.time_scale, vm_info=self.config.collectors.vm_info, **extra)

    def details(self, snap: Any, extra: Any) -> str:
        return f"requests={snap.requests} disks={len(snap.disks)} new_samples={snap.new_samples}"

    def render(self, name: str, snap: Any, extra: Any, duration: float) -> bytes:
        return render_probe(name, snap, duration, self.config.collectors)


make_app = Targets.make_app


def build_parser() -> argparse.ArgumentParser:
    p = multitarget.exporter_parser(
        ExporterConfig.names, __doc__, multitarget.credentials_epilog(ExporterConfig.names, "PRISM", "JSON answers")
    )
    add_web_args(p, DEFAULT_LISTEN)
    multitarget.add_target_args(
        p,
        ExporterConfig.names,
        "a Prism",
        config_help="YAML file with targets, credentials, TLS",
        idle_help="drop a target (session, counters) not probed for this long",
    )
    for flag, dest, text in (
        ("latest-samples", "latest_samples", "the latest 30 s sample as gauges (6 series per disk)"),
        ("controller", "controller", "the storage-view counters from controller_* (6 series per disk)"),
        ("vm-info", "vm_info", "prism_vm_info (one series per VM) and the VM-list call it needs"),
    ):
        p.add_argument(
            f"--collector.{flag}",
            dest=dest,
            action=argparse.BooleanOptionalAction,
            default=None,
            help=f"{text} (default: on)",
        )
    multitarget.add_probe_args(
        p,
        replay_help="serve probes from a capture (prism-exporter capture) instead of a Prism: only the capture's "
        "target may be probed, and it answers as Prism did when captured",
    )
    return p


PROGRAM = multitarget.Program(
    Targets, build_parser, load_config, DEFAULT_LISTEN, switches=("latest_samples", "controller", "vm_info")
)
main = PROGRAM.main

if __name__ == "__main__":
    sys.exit(main())
