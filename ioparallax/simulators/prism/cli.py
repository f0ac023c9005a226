"""prism-simulator: serve a simulated Prism (v2.0 REST and v4 VMM stats) computed from a scenario."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from ioparallax.exporters.common.logsetup import setup_logging
from ioparallax.exporters.common.web.server import parse_listen_address
from ioparallax.simulators import clitools
from ioparallax.simulators.faultserver import FAULT_MODES

from .model import DEFAULT_PUBLISH_DELAY
from .server import PrismSimulator

EPILOG = """\
On start one line is printed on stdout (the demo stack reads it):
  prism https://127.0.0.1:40123
Paths: /PrismGateway/services/rest/v2.0/virtual_disks/ (?page=&count=),
/PrismGateway/services/rest/v2.0/vms/?include_vm_disk_config=true,
/api/vmm/v4.x/ahv/stats/vms/{vmExtId}/disks/{extId}?$startTime=&$endTime=&$samplingInterval=30&$statType=AVG
Runtime controls (never authenticated, never faulted):
  curl -X POST 'URL/-/sim/fault?mode=slow&delay=3[&only=v2|v4|vms|virtual_disks][&duration=10]'
  curl -X POST 'URL/-/sim/clear'
  curl -X POST 'URL/-/sim/vm?name=oltp-01&action=power_off|power_on|delete'
  curl -X POST 'URL/-/sim/restart'        (forget sessions, as a Prism restart does)
  curl 'URL/-/sim/state'
Fault modes: %s. See docs/prism.md.
""" % ", ".join(FAULT_MODES)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = clitools.simulator_parser(
        "prism-simulator",
        "Simulated Nutanix Prism: per virtual disk, the VM view (hypervisor_*) and the "
        "storage view (controller_*) of a scenario as Prism's 30 s samples.",
        EPILOG,
        "clean-oltp",
    )
    p.add_argument(
        "--listen",
        default="127.0.0.1:0",
        metavar="HOST:PORT",
        help="address to serve on (default %(default)s: a free port on loopback)",
    )
    p.add_argument("--username", default="admin", help="basic auth user (default %(default)s)")
    p.add_argument(
        "--password-env",
        metavar="VAR",
        default=None,
        help="environment variable holding the password; without it no authentication is asked",
    )
    p.add_argument("--tls-cert", metavar="FILE", help="certificate (PEM) to serve HTTPS, as Prism on 9440 does")
    p.add_argument("--tls-key", metavar="FILE", help="private key (PEM) of --tls-cert")
    p.add_argument(
        "--publish-delay",
        type=float,
        default=DEFAULT_PUBLISH_DELAY,
        metavar="SECONDS",
        help="a 30 s sample is served this long after its end (default %(default)s)",
    )
    p.add_argument("--synthetic-vdisks", type=int, metavar="N", help="serve N generated disks (benchmarks)")
    clitools.add_clock_args(p, "answers")
    p.add_argument("--url-file", metavar="PATH", help='also write {"prism": url} as JSON to this file')
    args = clitools.parse_simulator_args(p, argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if not args.publish_delay >= 0 or args.publish_delay >= 30:
        p.error("--publish-delay: expected 0 <= seconds < 30")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    log = logging.getLogger("prism_simulator")
    auth = None
    if args.password_env:
        if args.password_env not in os.environ:
            print(f"prism-simulator: error: --password-env: {args.password_env} is not set", file=sys.stderr)
            return 2
        auth = (args.username, os.environ[args.password_env])

    def make() -> PrismSimulator:
        host, port = parse_listen_address(args.listen)
        return PrismSimulator(
            args.scenario,
            host=host or "127.0.0.1",
            port=port,
            clock=clitools.clock_of(args),
            auth=auth,
            tls=(args.tls_cert, args.tls_key) if args.tls_cert else None,
            vdisk_count=args.synthetic_vdisks,
            publish_delay=args.publish_delay,
        )

    sim = clitools.start_simulator("prism-simulator", make)
    if sim is None:
        return 2
    print(f"prism {sim.url}", flush=True)
    if args.url_file:
        clitools.write_json(args.url_file, {"prism": sim.url})
    log.info(
        "scenario=%s vms=%d virtual_disks=%d auth=%s tls=%s",
        sim.scenario.name,
        len(sim.model.vm_uuids),
        len(sim.trace.disks),
        "basic" if auth else "none",
        "on" if args.tls_cert else "off",
    )
    return clitools.serve_until_signal(sim.stop)


if __name__ == "__main__":
    sys.exit(main())
