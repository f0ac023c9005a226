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
import threading
import time

from exporters.common.config import ConfigError
from exporters.common.logsetup import add_logging_args, setup_logging
from exporters.common.web import BadRequest, ExporterApp, ExporterServer, Probe, parse_listen_address

from .client import split_target
from .collector import render_probe
from .config import ExporterConfig, load_config
from .target import Target

log = logging.getLogger("vcenter_exporter")

DEFAULT_LISTEN = ":9762"


class Targets:
    """The Target objects, created on first probe and kept (sessions, caches, counters)."""

    def __init__(self, config: ExporterConfig):
        self.config = config
        self._targets: dict[str, Target] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Target:
        with self._lock:
            t = self._targets.get(name)
            if t is None:
                cfg = self.config.target(name)
                if cfg is None:
                    raise BadRequest(f"unknown target {name!r}: not listed in {self.config.path} "
                                     "and allow_unlisted_targets is false")
                try:
                    split_target(name)
                except ValueError as exc:
                    raise BadRequest(str(exc)) from None
                t = self._targets[name] = Target(name, cfg)
            return t

    def probe(self, probe: Probe) -> bytes:
        start = time.monotonic()
        target = self.get(probe.target)
        snap, shared = target.probe(probe.remaining())
        duration = time.monotonic() - start
        if snap.up:
            log.debug("probe target=%s up=1 duration=%.3fs queries=%d new_samples=%d shared=%s",
                      probe.target, duration, snap.queries, snap.new_samples, shared)
        else:
            log.warning("probe failed target=%s kind=%s cause=%s", probe.target, snap.kind, snap.cause)
        return render_probe(probe.target, snap, duration, shared)

    def close(self) -> None:
        with self._lock:
            for t in self._targets.values():
                t.close()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vcenter-exporter",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Credentials: per target in --config.file (password_env names an environment variable), or "
               "VCENTER_USERNAME/VCENTER_PASSWORD for every target. TLS certificates are verified unless a "
               "target sets insecure_skip_verify. See docs/vcenter.md.")
    p.add_argument("--web.listen-address", dest="listen", default=DEFAULT_LISTEN,
                   help="address to listen on for /probe, /metrics and / (default: %(default)s)")
    p.add_argument("--config.file", dest="config_file", default=None,
                   help="YAML file with targets, credentials, TLS and refresh settings (optional)")
    p.add_argument("--probe.default-timeout", dest="default_timeout", type=float, default=10.0,
                   help="seconds a probe may take when Prometheus sends no scrape timeout header "
                        "(default: %(default)s)")
    add_logging_args(p)
    return p


def make_app(config: ExporterConfig, default_timeout: float = 10.0) -> tuple[ExporterApp, Targets]:
    targets = Targets(config)
    app = ExporterApp(
        name="vcenter-exporter",
        description="vCenter per-virtual-disk performance counters (every 20 s sample integrated into "
                    "counters, plus the latest sample as vCenter shows it) and VM/disk inventory for joins.",
        probe=targets.probe,
        default_timeout=default_timeout,
        example_target="vcenter.example.com",
        config_text=config.describe(),
    )
    return app, targets


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        config = load_config(args.config_file)
        host, port = parse_listen_address(args.listen)
    except (ConfigError, ValueError) as exc:
        log.error("configuration error: %s", exc)
        return 2
    app, targets = make_app(config, args.default_timeout)
    try:
        server = ExporterServer(app, host, port)
    except OSError as exc:
        log.error("cannot listen on %s: %s", args.listen, exc)
        return 1
    log.info("listening on %s (%d targets configured)", server.url, len(config.targets))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        targets.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
