"""stargate-exporter: the Nutanix CVMs' Stargate pages (port 2009) as Prometheus metrics.

On ``common.multitarget`` like the other network exporters (flags, landing page, ``/metrics`` and
``/probe``, web config, logging, the ``capture``/``replay`` commands); what is Stargate's own sits
behind its hooks: the allow-list of patterns (no credentials are sent), ``&discover=true``, the
parse workers and the vdisk names from YAML and Prism (:class:`Settings`, built by
:meth:`StargateProgram.configure`)."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ioparallax.exporters.common.memory import tune_malloc
from ioparallax.exporters.common.multitarget import (
    Program,
    TargetPool,
    add_probe_args,
    add_target_args,
    exporter_parser,
)
from ioparallax.exporters.common.targets import Names
from ioparallax.exporters.common.web.app import BadRequest, ExporterApp, Probe
from ioparallax.exporters.common.web.startup import add_web_args
from ioparallax.exporters.stargate.address import TargetError, TargetPolicy, parse_target
from ioparallax.exporters.stargate.client import HttpClient, Limits, PageClient
from ioparallax.exporters.stargate.collector import Collectors, StargateCollector
from ioparallax.exporters.stargate.config import MAX_PARSE_WORKERS, StargateConfig, env_targets, load_config
from ioparallax.exporters.stargate.parsepool import AUTO, ParsePool, auto_workers, default_workers
from ioparallax.exporters.stargate.prism import VDiskNames
from ioparallax.exporters.stargate.target import DEFAULT_CONCURRENCY, DETAIL_READS, probe

log = logging.getLogger("ioparallax.exporters.stargate")

DEFAULT_LISTEN = ":9761"

DESCRIPTION = """\
Multi-target like the blackbox exporter: Prometheus scrapes /probe?target=<cvm>[:2009] and the
exporter reads that CVM's main page and every hosted vdisk's detail view (following the page's
links, concurrently over one keep-alive session) while Prometheus waits, within its scrape
timeout. Add &discover=true to probe every CVM listed in the target's Cluster State table and
merge their vdisks by id (a vdisk that moves during the probe is counted once).
"""

EPILOG = """\
commands (each with its own --help):
  stargate-exporter capture --target 10.0.0.11 -o capture.tar.gz   # one probe's pages, anonymized, to send us
  stargate-exporter replay capture.tar.gz                           # the metrics of a capture
  stargate-exporter --replay capture.tar.gz                         # serve /probe from a capture

examples:
  stargate-exporter --web.listen-address=:9761        # the default: every interface
  stargate-exporter --web.listen-address=127.0.0.1:9761 --web.config.file=web.yml  # local, TLS + basic auth
  curl 'http://localhost:9761/probe?target=10.0.0.11'               # one CVM (port 2009)
  curl 'http://localhost:9761/probe?target=10.0.0.11&discover=true' # the whole cluster

which CVMs may be probed, and limits (--config.file; see "Security" in docs/stargate.md):
  targets: [10.0.0.0/24, "cvm-*.example.com"]   # allow-list; or --stargate.target / STARGATE_TARGETS
  allow_unlisted_targets: false     # default: a target not listed is refused with HTTP 400
  body_size_limit: 2MiB             # per page, default 2MiB (a 1,000-vdisk main page is ~430 kB)
  max_pages_per_probe: 5000         # main pages + detail views of one probe (default 5000)
  discovery_ports: []               # discover=true follows Cluster State links on 2009 and the
                                    # target's own port, and on these
  histograms: true                  # --[no-]collector.histograms: the four gauge histograms (40 of ~98
                                    # series per vdisk)
  source_ratios: true               # --[no-]collector.source-ratios: Percent per read source / write
                                    # destination (the bytes/s series stay)
  parse_workers: 0                  # processes parsing pages for all probes (default 0: in each
                                    # probe's thread; auto: while probes run at once), see
                                    # --stargate.parse-workers

vdisk mapping (--config.file), vm and disk labels of stargate_vdisk_info: from Prism's v2
virtual_disks API (matched by vdisk UUID, cached for refresh_interval), and/or listed by hand;
a hand-listed vdisk wins over Prism. A Prism failure is logged with its cause and never fails a
probe (the last good mapping stays; stargate_prism_up shows it).
  prism:
    url: https://10.0.0.10:9440     # Prism Element: the cluster VIP or any CVM (port 9440)
    username_env: PRISM_USERNAME    # or username: monitoring
    password_env: PRISM_PASSWORD    # the password comes from this environment variable
    insecure_skip_verify: false     # default; true opts out explicitly (alias: tls_verify: false);
                                    # or ca_file: /path/ca.pem
    timeout: 5s                     # default 5s
    refresh_interval: 5m            # default 5m (after a failure: retried after 1m)
  vdisks:                           # by hand (disk_uuid optional)
    "1000": {vm: oltp-01, disk: "scsi0:1", disk_uuid: 6000c29e-9d1f-45d1-87a1-83c0ac74806f}
Prism's disk is its disk_address (scsi.1); disk_uuid (its device_uuid) joins to vCenter's disk_uuid.

See docs/stargate.md for every metric and its source field.
"""


@dataclass
class Settings:
    """What every probe of this exporter uses, from the flags and ``--config.file`` (or a
    capture): which targets may be probed, how pages are fetched and parsed, the vdisk names,
    the families switched on."""

    policy: TargetPolicy = field(default_factory=TargetPolicy.loopback)
    names: VDiskNames = field(default_factory=lambda: VDiskNames({}))
    concurrency: int = DEFAULT_CONCURRENCY
    limits: Limits = Limits()
    discovery_ports: tuple[int, ...] = ()
    parse_pool: ParsePool | None = None
    collectors: Collectors = Collectors()
    client: PageClient = field(default_factory=HttpClient)  # --replay: a capture's ReplayClient
    config: StargateConfig | None = None  # the config file's, for the start-up log lines
    parse_workers: int | str = 0  # as asked (auto or a count), for the start-up log lines


class Targets(TargetPool):
    """The probes of this exporter (common.multitarget.TargetPool): a Stargate probe keeps no
    state between probes (no session, no counters: the pages hold Stargate's own rates), so a
    ``?target=`` is checked against the allow-list and probed, and nothing is kept."""

    names = Names("CVMs", "STARGATE", "stargate")
    description = (
        "Nutanix Stargate (CVM port 2009) per-vdisk statistics: read sources with zero buckets, "
        "write destinations, categorizer, working sets, latency and size histograms."
    )
    example_target = "127.0.0.1:2009"

    def __init__(self, config: Settings, client_factory: Callable[..., Any] | None = None):
        super().__init__(config, client_factory)
        self.settings = config

    def app(self, default_timeout: float = 10.0) -> ExporterApp:
        return ExporterApp(
            name="stargate-exporter",
            description=self.description,
            probe=self.probe,
            default_timeout=default_timeout,
            collectors=[DETAIL_READS],
            example_target=self.example_target,
            extra_links=[
                ("/probe?target=127.0.0.1:2009&discover=true", "/probe?target=...&discover=true: the whole cluster")
            ],
        )

    def probe(self, p: Probe) -> bytes:
        s = self.settings
        discover = p.params.get("discover", "false").lower()
        if discover not in ("true", "false", "1", "0"):
            raise BadRequest(f"discover must be true or false, got {discover[:40]!r}")
        try:
            host = parse_target(p.target).origin.host
        except TargetError:
            host = None  # malformed: probe() answers stargate_up 0 and logs why
        if host is not None and not s.policy.allows(host):
            log.warning(
                "stargate target %s refused: host %s is not on the targets allow-list (%s)",
                p.target,
                host,
                s.policy.describe(),
            )
            raise BadRequest(
                f"target {p.target} is not on the exporter's targets allow-list "
                "(config targets:, --stargate.target, or --stargate.allow-unlisted-targets)"
            )
        # A stale Prism mapping is refreshed alongside the probe; the probe waits for it only
        # until its own deadline, then uses the mapping it has (the refresh finishes later).
        refresh = s.names.start_refresh_if_stale()
        result = probe(
            s.client,
            p.target,
            p.deadline,
            discover=discover in ("true", "1"),
            concurrency=s.concurrency,
            limits=s.limits,
            policy=s.policy,
            discovery_ports=s.discovery_ports,
            parse_pool=s.parse_pool,
        )
        if refresh is not None:
            refresh.join(max(0.0, p.deadline - time.monotonic()))
        return StargateCollector(result, s.names, s.collectors).render(p.deadline)

    def close(self) -> None:
        super().close()
        if self.settings.parse_pool is not None:
            self.settings.parse_pool.close()


def make_app(
    concurrency: int,
    names: VDiskNames | dict[str, dict[str, str]],
    default_timeout: float,
    policy: TargetPolicy | None = None,
    limits: Limits = Limits(),
    discovery_ports: tuple[int, ...] = (),
    parse_pool: ParsePool | None = None,
    collectors: Collectors = Collectors(),
    client: PageClient | None = None,
) -> ExporterApp:
    """The exporter's routes. ``policy``: which targets may be probed (default: loopback only;
    the command line builds it from ``targets:`` and the flags). ``parse_pool``: worker
    processes parsing the pages of every probe (None: parsed in the probe's thread).
    ``collectors``: the families switched on. ``client``: what fetches the pages (default: HTTP;
    ``--replay``: a capture)."""
    settings = Settings(
        policy=policy if policy is not None else TargetPolicy.loopback(),
        names=names if isinstance(names, VDiskNames) else VDiskNames(names),
        concurrency=concurrency,
        limits=limits,
        discovery_ports=discovery_ports,
        parse_pool=parse_pool,
        collectors=collectors,
        client=client if client is not None else HttpClient(),
    )
    return Targets(settings).app(default_timeout)


def _workers_arg(text: str) -> int | str:
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected auto or a count, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = exporter_parser(Targets.names, DESCRIPTION, EPILOG)
    add_web_args(parser, DEFAULT_LISTEN)
    add_target_args(
        parser,
        Targets.names,
        "a CVM",
        config_help="YAML file: the CVMs that may be probed (targets:) and the probe's limits "
        "(body_size_limit:, max_pages_per_probe:); vdisk -> VM and disk names, by hand "
        "(vdisks:) and/or from Prism's v2 API (prism:); see below (optional)",
        idle_help=None,  # no sessions: a probe keeps nothing
        target_help="allow probing CVMs whose host matches PATTERN: a host name pattern (cvm-*.example.com), "
        "an IP address or a CIDR (10.0.0.0/24); repeat, or list them in STARGATE_TARGETS "
        "(comma-separated) or the config file's targets:. Unlisted targets are refused (HTTP 400)",
        allow_help="probe any target (the exporter then fetches from any host:port it is asked to; "
        "only on a trusted network)",
        metavar="PATTERN",
    )
    parser.add_argument(
        "--stargate.concurrency",
        dest="concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="pages requested at once per probe, each on its own keep-alive connection (default: %(default)s)",
    )
    parser.add_argument(
        "--stargate.parse-workers",
        dest="parse_workers",
        type=_workers_arg,
        default=None,
        metavar="auto|N",
        help="processes parsing the pages of all probes: auto starts one per core beyond the first "
        "(none on 1 core) the first time two probes run at once, and a probe hands its pages to "
        "them only while another probe runs too; N hands every page to N workers; 0 parses in "
        "each probe's thread (docs/stargate.md, Cluster scale; "
        "default: parse_workers: in --config.file, else %d)" % default_workers(),
    )
    c = parser.add_argument_group("collectors (series per vdisk: docs/stargate.md, Series budget)")
    c.add_argument(
        "--collector.histograms",
        dest="histograms",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the four gauge histograms (read/write latency, read/write size): 40 series per vdisk; "
        "off empties the storage latency rules and the vdisk dashboard's histogram panels "
        "(default: on, or histograms: in --config.file)",
    )
    c.add_argument(
        "--collector.source-ratios",
        dest="source_ratios",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Percent of each read source and write destination as _ratio series "
        "(the bytes/s series stay; the mixin uses only those) "
        "(default: on, or source_ratios: in --config.file)",
    )
    add_probe_args(
        parser,
        replay_help="serve probes from a capture (stargate-exporter capture) instead of the network: "
        "/probe?target=<the capture's target> answers as that CVM did; only its hosts are allowed",
    )
    return parser


@dataclass(frozen=True)
class StargateProgram(Program):
    """``main()`` of common.multitarget with Stargate's start-up: the allow-list of patterns from
    the config file, the flags and ``STARGATE_TARGETS``; the parse workers; Prism's names."""

    def configure(self, args: argparse.Namespace, replayed: Any = None) -> Settings:
        """The settings of the flags and ``--config.file``; with ``replayed`` (a capture), its
        hosts are the allow-list and its pages answer. ConfigError or ValueError: a mistake."""
        config = load_config(args.config_file)
        if args.concurrency < 1:
            raise ValueError("--stargate.concurrency must be at least 1")
        workers = (
            args.parse_workers
            if args.parse_workers is not None
            else config.parse_workers
            if config.parse_workers is not None
            else default_workers()
        )
        adaptive = workers == AUTO
        count = auto_workers() if adaptive else int(workers)
        if not 0 <= count <= MAX_PARSE_WORKERS:
            raise ValueError(f"--stargate.parse-workers must be auto or 0 to {MAX_PARSE_WORKERS}, got {workers}")
        if replayed is not None:
            from ioparallax.exporters.stargate.capture import ReplayClient

            config.targets, config.allow_unlisted = replayed.policy().entries, False
            config.discovery_ports = replayed.ports()
        try:
            extra = [] if replayed is not None else env_targets() + args.targets
            policy = TargetPolicy(config.targets + extra, allow_any=config.allow_unlisted or bool(args.allow_unlisted))
        except ValueError as exc:
            raise ValueError(f"--stargate.target / STARGATE_TARGETS: {exc}") from None
        collectors = Collectors(
            histograms=config.histograms if args.histograms is None else args.histograms,
            source_ratios=config.source_ratios if args.source_ratios is None else args.source_ratios,
        )
        tune_malloc()  # before the pool and the web front start their threads
        parse_pool = None
        if count:
            parse_pool = ParsePool(count, adaptive=True) if adaptive else ParsePool(count)
            if not adaptive:
                parse_pool.warm_up()
        return Settings(
            policy=policy,
            names=VDiskNames(config.vdisks, config.prism),
            concurrency=args.concurrency,
            limits=config.limits,
            discovery_ports=config.discovery_ports,
            parse_pool=parse_pool,
            collectors=collectors,
            client=ReplayClient(replayed) if replayed is not None else HttpClient(),
            config=config,
            parse_workers=workers,
        )

    def replay_config(self, args: argparse.Namespace) -> tuple[Settings, None]:
        from ioparallax.exporters.stargate.capture import read

        replayed = read(args.replay)
        log.info(
            "replaying %s (%d pages captured %s by %s %s): probe target=%s",
            args.replay,
            len(replayed.pages),
            replayed.manifest.get("created", "?"),
            replayed.manifest.get("exporter", "?"),
            replayed.manifest.get("version", "?"),
            replayed.target,
        )
        return self.configure(args, replayed), None

    def warn(self, config: Settings) -> None:
        """Nothing here: no credentials go to a target, and the allow-list (a replay's too) is
        logged by :meth:`started`."""

    def started(self, config: Settings, args: argparse.Namespace) -> None:
        policy = config.policy
        if policy.allow_any:
            log.warning("unlisted targets allowed: this exporter fetches pages from any host:port named in ?target=")
        elif not policy.entries:
            log.warning(
                "no targets allowed: every probe is refused; list the CVMs with targets: in --config.file, "
                "--stargate.target or STARGATE_TARGETS"
            )
        else:
            log.info("targets allowed: %s", policy.describe())
        prism = config.config.prism if config.config is not None else None
        if prism:
            plain = prism.url.startswith("http://")
            log.info(
                "vdisk names from Prism %s (%s, %s, refreshed every %.0f s) and %d hand-mapped vdisks",
                prism.endpoint,
                "with credentials" if prism.username else "without credentials",
                "plain HTTP, no TLS"
                if plain
                else "TLS NOT verified (insecure_skip_verify: true)"
                if prism.insecure_skip_verify
                else f"TLS verified against {prism.ca_file}"
                if prism.ca_file
                else "TLS verified",
                prism.refresh_interval,
                len(config.config.vdisks) if config.config is not None else 0,
            )
            if plain and prism.username:
                log.warning("prism.url is plain http://: the credentials cross the network unencrypted")
        off = [
            name
            for name, on in (
                ("histograms", config.collectors.histograms),
                ("source-ratios", config.collectors.source_ratios),
            )
            if not on
        ]
        if off:
            log.info("collectors switched off: %s", ", ".join(off))
        pool = config.parse_pool
        if pool is not None and config.parse_workers == AUTO:
            log.info(
                "parse_workers auto: %d worker processes, started when two probes first run at once; "
                "pages parsed in each probe's thread while it runs alone",
                pool.workers,
            )
        elif pool is not None:
            log.info("pages parsed by %d worker processes", pool.workers)
        else:
            log.info("pages parsed in each probe's thread (parse_workers %s)", config.parse_workers)


PROGRAM = StargateProgram(Targets, build_parser, load_config, DEFAULT_LISTEN)
main = PROGRAM.main


if __name__ == "__main__":
    sys.exit(main())
