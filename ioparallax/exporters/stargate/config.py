"""stargate-exporter's configuration (``--config.file``): which CVMs may be probed, the limits of
a probe, the parse workers, the families switched on, and the vdisk mapping (by hand, and Prism's:
:mod:`ioparallax.exporters.stargate.prism`). Errors name the file and the key."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ioparallax.exporters.stargate.address import TargetPolicy
from ioparallax.exporters.stargate.client import DEFAULT_BODY_SIZE_LIMIT, DEFAULT_MAX_PAGES, Limits
from ioparallax.exporters.stargate.prism import PrismConfig, prism_config
from ioparallax.units import parse_bytes
from ioparallax.yamlconf import Section, load_yaml


@dataclass
class StargateConfig:
    vdisks: dict[str, dict[str, str]]
    prism: PrismConfig | None
    targets: list[str] = field(default_factory=list)  # allow-list: host patterns, IPs, CIDRs
    allow_unlisted: bool = False
    limits: Limits = Limits()
    discovery_ports: tuple[int, ...] = ()
    parse_workers: int | str | None = None  # None: the command line's (default: auto, parsepool.default_workers)
    histograms: bool = True
    source_ratios: bool = True

    def policy(self) -> TargetPolicy:
        return TargetPolicy(self.targets, allow_any=self.allow_unlisted)


def env_targets() -> list[str]:
    """The allow-list entries of ``STARGATE_TARGETS`` (comma- or space-separated)."""
    return [t for t in re.split(r"[,\s]+", os.environ.get("STARGATE_TARGETS", "")) if t]


def _target_entries(sec: Section) -> list[str]:
    raw = sec.get("targets", list, default=[])
    for i, entry in enumerate(raw):
        if not isinstance(entry, str):
            raise sec.error(f"targets[{i}]", f"expected a host pattern, IP address or CIDR, got {entry!r}")
        try:
            TargetPolicy([entry])
        except ValueError as exc:
            raise sec.error(f"targets[{i}]", str(exc)) from None
    return list(raw)


def _positive_int(name: str, maximum: int):
    def check(value) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= maximum:
            raise ValueError(f"expected an integer from 1 to {maximum}, got {value!r}")
        return value

    return check


#: More parse workers than this is a typo (each is a process of ~55 MB RSS).
MAX_PARSE_WORKERS = 64


def parse_workers_value(value) -> int | str:
    """``parse_workers``: ``auto`` (the default: parsepool.default_workers) or a count 0-64."""
    if value == "auto":
        return "auto"
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_PARSE_WORKERS:
        raise ValueError(f"expected auto or an integer from 0 to {MAX_PARSE_WORKERS}, got {value!r}")
    return value


def _count(name: str, maximum: int):
    def check(value) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
            raise ValueError(f"expected an integer from 0 to {maximum}, got {value!r}")
        return value

    return check


def load_config(path: str | None) -> StargateConfig:
    """--config.file: ``targets`` and ``allow_unlisted_targets`` (which CVMs may be probed),
    ``body_size_limit``, ``max_pages_per_probe`` and ``discovery_ports`` (limits of a probe),
    ``parse_workers`` (processes parsing pages), ``histograms`` and ``source_ratios`` (families),
    ``vdisks`` (hand mapping) and ``prism`` (API mapping); all optional."""
    if not path:
        return StargateConfig({}, None)
    root = Section(load_yaml(path), path)
    targets = _target_entries(root)
    allow_unlisted = root.get("allow_unlisted_targets", bool, default=False)
    limit = root.get("body_size_limit", parse_bytes, default=DEFAULT_BODY_SIZE_LIMIT)
    if limit < 1024:
        raise root.error("body_size_limit", f"at least 1KiB, got {limit} bytes")
    max_pages = root.get(
        "max_pages_per_probe", _positive_int("max_pages_per_probe", 1_000_000), default=DEFAULT_MAX_PAGES
    )
    ports = root.get("discovery_ports", list, default=[])
    for i, port in enumerate(ports):
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise root.error(f"discovery_ports[{i}]", f"expected a port 1-65535, got {port!r}")
    parse_workers = root.get("parse_workers", parse_workers_value, default=None)
    histograms = root.get("histograms", bool, default=True)
    source_ratios = root.get("source_ratios", bool, default=True)
    out: dict[str, dict[str, str]] = {}
    vd = root.section("vdisks")
    for vid in list(vd.data):
        entry = vd.section(str(vid))
        if not str(vid).isdigit():
            raise entry.error(None, "vdisk ids are integers")
        out[str(vid)] = {
            "vm": entry.get("vm", str),
            "disk": entry.get("disk", str, default=""),
            "disk_uuid": entry.get("disk_uuid", str, default="").lower(),
        }
        entry.reject_unknown()
    vd.reject_unknown()
    prism = prism_config(root.section("prism"))
    root.reject_unknown()
    return StargateConfig(
        out,
        prism,
        targets,
        allow_unlisted,
        Limits(limit, max_pages),
        tuple(ports),
        parse_workers,
        histograms,
        source_ratios,
    )
