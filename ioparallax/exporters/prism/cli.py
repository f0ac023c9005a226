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
import threading
import time
from collections.abc import Callable
from typing import Any

from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.common.web.app import BadRequest, ExporterApp, Probe
from ioparallax.exporters.common.web.startup import add_web_args, serve, web_settings
from ioparallax.version import add_version_arg
from ioparallax.yamlconf import ConfigError

from .address import target_key
from .collector import render_probe
from .config import ExporterConfig, TargetConfig, load_config
from .target import Target

log = logging.getLogger("ioparallax.exporters.prism")

DEFAULT_LISTEN = ":9764"


class Targets:
    """The Target objects by normalised key, created on first probe and kept (session, counters,
    sample keeper) until the target is not probed for ``session_idle_timeout``."""

    def __init__(self, config: ExporterConfig, client_factory: Callable[..., Any] | None = None):
        self.config = config
        self.client_factory = client_factory  # None: PrismClient (--replay: a capture)
        self._targets: dict[str, Target] = {}
        self._last_probe: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper: threading.Thread | None = None

    def resolve(self, name: str) -> tuple[str, TargetConfig]:
        """(key, settings) of a ?target= value, or BadRequest (HTTP 400) with the reason and a log
        line, before any connection is made."""
        try:
            key = target_key(name)
        except ValueError as exc:
            log.warning("probe refused target=%r reason=%s", name, exc)
            raise BadRequest(f"bad target: {exc}") from None
        cfg = self.config.target(key)
        if cfg is None:
            reason = self.config.refusal(key)
            log.warning("probe refused target=%r reason=%s", name, reason)
            raise BadRequest(f"unknown target {name!r}: {reason}")
        return key, cfg

    def get(self, name: str) -> Target:
        key, cfg = self.resolve(name)
        with self._lock:
            self._last_probe[key] = time.monotonic()
            t = self._targets.get(key)
            if t is None:
                extra: dict[str, Any] = {} if self.client_factory is None else {"client_factory": self.client_factory}
                t = self._targets[key] = Target(
                    key, cfg, time_scale=self.config.time_scale, vm_info=self.config.collectors.vm_info, **extra
                )
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap_loop, name="prism session reaper", daemon=True)
                self._reaper.start()
            return t

    def _reap_loop(self) -> None:
        period = min(30.0, max(0.2, self.config.session_idle_timeout / 4))
        while not self._stop.wait(period):
            self.close_idle()

    def close_idle(self, now: float | None = None) -> list[str]:
        now = time.monotonic() if now is None else now
        idle = self.config.session_idle_timeout
        closing = []
        with self._lock:
            for key, t in list(self._targets.items()):
                if now - self._last_probe.get(key, now) >= idle and not t.busy():
                    closing.append((key, self._targets.pop(key)))
                    self._last_probe.pop(key, None)
        for key, t in closing:
            log.info("dropping target=%s: not probed for %.0fs (session_idle_timeout)", key, idle)
            t.close()
        return [key for key, _ in closing]

    def probe(self, probe: Probe) -> bytes:
        start = time.monotonic()
        target = self.get(probe.target)
        snap = target.probe(probe.remaining())
        duration = time.monotonic() - start
        if snap.up:
            log.debug(
                "probe target=%s up=1 duration=%.3fs requests=%d disks=%d new_samples=%d",
                probe.target,
                duration,
                snap.requests,
                len(snap.disks),
                snap.new_samples,
            )
        else:
            log.warning("probe failed target=%s kind=%s cause=%s", probe.target, snap.kind, snap.cause)
        return render_probe(probe.target, snap, duration, self.config.collectors)

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            targets, self._targets = list(self._targets.values()), {}
        for t in targets:
            t.close()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="prism-exporter",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Credentials: per target in --config.file (password_env names an environment variable), or "
        "PRISM_USERNAME/PRISM_PASSWORD for the targets listed with --prism.target or PRISM_TARGETS. "
        "Credentials are only sent to listed targets: any other ?target= is refused with HTTP 400 "
        "unless --prism.allow-unlisted-targets (or allow_unlisted_targets: true) is given. TLS "
        "certificates are verified unless a target sets tls_verify: false. "
        "Commands: `prism-exporter capture --target PRISM -o capture.tar.gz` (the JSON answers of one probe, "
        "anonymized, to report an answer the exporter misreads), `prism-exporter replay capture.tar.gz` "
        "(its metrics). See docs/prism.md.",
    )
    add_web_args(p, DEFAULT_LISTEN)
    p.add_argument("--config.file", dest="config_file", default=None, help="YAML file with targets, credentials, TLS")
    p.add_argument(
        "--prism.target",
        dest="targets",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a Prism that may be probed (repeatable; also PRISM_TARGETS, comma-separated); it gets the "
        "default credentials (PRISM_USERNAME/PRISM_PASSWORD or the config file's defaults)",
    )
    p.add_argument(
        "--prism.allow-unlisted-targets",
        dest="allow_unlisted",
        action="store_true",
        help="probe any ?target= with the default credentials: anyone who can reach the exporter can "
        "then make it send them to a host of their choice (logged as a warning at start-up)",
    )
    p.add_argument(
        "--prism.session-idle-timeout",
        dest="session_idle_timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="drop a target (session, counters) not probed for this long "
        "(default: session_idle_timeout in the config file, else 600)",
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
    p.add_argument(
        "--probe.default-timeout",
        dest="default_timeout",
        type=float,
        default=10.0,
        help="seconds a probe may take when Prometheus sends no scrape timeout header (default: %(default)s)",
    )
    p.add_argument(
        "--replay",
        metavar="CAPTURE",
        default=None,
        help="serve probes from a capture (prism-exporter capture) instead of a Prism: only the capture's "
        "target may be probed, and it answers as Prism did when captured",
    )
    add_logging_args(p)
    add_version_arg(p)
    return p


def make_app(
    config: ExporterConfig, default_timeout: float = 10.0, client_factory: Callable[..., Any] | None = None
) -> tuple[ExporterApp, Targets]:
    """The routes; ``client_factory``: what reaches a Prism (default: PrismClient; ``--replay``:
    a capture)."""
    targets = Targets(config, client_factory)
    app = ExporterApp(
        name="prism-exporter",
        description="Prism per-virtual-disk statistics: the VM view (hypervisor_*) and the storage view "
        "(controller_*), every 30 s sample integrated into counters, plus identity series for joins.",
        probe=targets.probe,
        default_timeout=default_timeout,
        example_target=next(iter(config.targets), "prism.example.com"),
        config_text=config.describe(),
    )
    return app, targets


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["capture"], ["replay"]):
        from .capture import capture_main, replay_main

        return capture_main(argv[1:]) if argv[0] == "capture" else replay_main(argv[1:])
    args = build_parser().parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    if args.replay:
        from .capture import CaptureError, replay_setup

        try:
            config, factory = replay_setup(args.replay)
        except CaptureError as exc:
            log.error("--replay: %s", exc)
            return 2
        app, targets = make_app(config, args.default_timeout, factory)
        log.info("replaying %s: probe target=%s", args.replay, next(iter(config.targets)))
        try:
            return serve(app, web_settings(args, DEFAULT_LISTEN))
        finally:
            targets.close()
    try:
        config = load_config(
            args.config_file,
            extra_targets=args.targets,
            allow_unlisted=True if args.allow_unlisted else None,
            session_idle_timeout=args.session_idle_timeout,
            latest_samples=args.latest_samples,
            controller=args.controller,
            vm_info=args.vm_info,
        )
    except (ConfigError, ValueError) as exc:
        log.error("configuration error: %s", exc)
        return 2
    if config.allow_unlisted:
        log.warning(
            "unlisted targets are allowed: any ?target= receives the default credentials "
            "(user %s); list the Prism addresses instead (--prism.target or targets: in the config file)",
            config.defaults.username or "(none)",
        )
    for name, t in config.targets.items():
        if t.scheme == "http" and t.password:
            log.warning("target %s uses plain http: its credentials cross the network in clear text", name)
    app, targets = make_app(config, args.default_timeout)
    log.info("%d targets configured", len(config.targets))
    try:
        return serve(app, web_settings(args, DEFAULT_LISTEN))
    finally:
        targets.close()


if __name__ == "__main__":
    sys.exit(main())
