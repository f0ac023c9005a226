"""stargate-exporter: the Nutanix CVMs' Stargate pages (port 2009) as Prometheus metrics."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from exporters.common.config import ConfigError, Section, load_yaml
from exporters.common.logsetup import add_logging_args, setup_logging
from exporters.common.web import BadRequest, ExporterApp, ExporterServer, Probe, parse_listen_address

from .collector import DEFAULT_CONCURRENCY, HttpClient, StargateCollector, probe

log = logging.getLogger("exporters.stargate")

DESCRIPTION = """\
Multi-target like the blackbox exporter: Prometheus scrapes /probe?target=<cvm>[:2009] and the
exporter reads that CVM's main page and every hosted vdisk's detail view (following the page's
links, concurrently over one keep-alive session) while Prometheus waits, within its scrape
timeout. Add &discover=true to probe every CVM listed in the target's Cluster State table and
merge their vdisks by id (a vdisk that moves during the probe is counted once).
"""

EPILOG = """\
examples:
  stargate-exporter --web.listen-address=:9761
  curl 'http://localhost:9761/probe?target=10.0.0.11'               # one CVM (port 2009)
  curl 'http://localhost:9761/probe?target=10.0.0.11&discover=true' # the whole cluster

vdisk mapping file (--config.file), to add vm and disk labels to stargate_vdisk_info:
  vdisks:
    "1000": {vm: oltp-01, disk: "scsi0:1"}

See docs/stargate.md for every metric and its source field.
"""


def load_mapping(path: str | None) -> dict[str, dict[str, str]]:
    if not path:
        return {}
    root = Section(load_yaml(path), path)
    out: dict[str, dict[str, str]] = {}
    vd = root.section("vdisks")
    for vid in list(vd.data):
        entry = vd.section(str(vid))
        if not str(vid).isdigit():
            raise entry.error(None, "vdisk ids are integers")
        out[str(vid)] = {"vm": entry.get("vm", str), "disk": entry.get("disk", str, default="")}
        entry.reject_unknown()
    vd.reject_unknown()
    root.reject_unknown()
    return out


def make_app(concurrency: int, mapping: dict[str, dict[str, str]], default_timeout: float) -> ExporterApp:
    client = HttpClient()

    def handler(p: Probe):
        discover = p.params.get("discover", "false").lower()
        if discover not in ("true", "false", "1", "0"):
            raise BadRequest(f"discover must be true or false, got {discover!r}")
        result = probe(client, p.target, p.deadline, discover=discover in ("true", "1"), concurrency=concurrency)
        return StargateCollector(result, mapping).render()

    return ExporterApp(
        name="stargate-exporter",
        description="Nutanix Stargate (CVM port 2009) per-vdisk statistics: read sources with zero buckets, "
                    "write destinations, categorizer, working sets, latency and size histograms.",
        probe=handler, default_timeout=default_timeout, example_target="127.0.0.1:2009",
        extra_links=[("/probe?target=127.0.0.1:2009&discover=true", "/probe?target=...&discover=true: the whole cluster")],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stargate-exporter", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--web.listen-address", dest="listen", default=":9761",
                        help="address to serve /probe, /metrics and / on (default: %(default)s)")
    parser.add_argument("--config.file", dest="config", default=None,
                        help="YAML file mapping vdisk ids to VM and disk names (optional)")
    parser.add_argument("--stargate.concurrency", dest="concurrency", type=int, default=DEFAULT_CONCURRENCY,
                        help="detail pages fetched at once per probe (default: %(default)s)")
    parser.add_argument("--probe.default-timeout", dest="timeout", type=float, default=10.0,
                        help="seconds a probe may take when Prometheus sends no scrape timeout header (default: %(default)s)")
    add_logging_args(parser)
    args = parser.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        mapping = load_mapping(args.config)
        host, port = parse_listen_address(args.listen)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: --web.listen-address: {exc}", file=sys.stderr)
        return 2
    if args.concurrency < 1:
        print("error: --stargate.concurrency must be at least 1", file=sys.stderr)
        return 2
    server = ExporterServer(make_app(args.concurrency, mapping, args.timeout), host, port)
    log.info("listening on %s:%d", *server.address)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
