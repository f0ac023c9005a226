"""stargate-simulator: serve the Stargate port-2009 pages of every CVM of a scenario."""

from __future__ import annotations

import argparse
import logging
import sys

from ioparallax.exporters.common.logsetup import setup_logging
from ioparallax.simulators import clitools
from ioparallax.simulators.faultserver import FAULT_MODES

from .server import StargateCluster

EPILOG = """\
Each CVM of the scenario gets its own HTTP server (default 127.0.0.1, free ports) showing only
the vdisks it hosts at the current period second. On start one line per CVM is printed:
  cvm-1 http://127.0.0.1:40123
Faults at runtime (any CVM's server controls every CVM; /-/sim/ is never faulted):
  curl -X POST 'http://127.0.0.1:40123/-/sim/fault?cvm=cvm-2&mode=slow&delay=3'
  curl -X POST 'http://127.0.0.1:40123/-/sim/fault?cvm=cvm-2&mode=truncated&only=detail'
  curl -X POST 'http://127.0.0.1:40123/-/sim/fault?cvm=cvm-2&mode=refused&duration=10'
  curl -X POST 'http://127.0.0.1:40123/-/sim/clear'            (all CVMs; or ?cvm=cvm-2)
  curl 'http://127.0.0.1:40123/-/sim/state'
Modes: %s. See docs/stargate-simulator.md.
""" % ", ".join(FAULT_MODES)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = clitools.simulator_parser(
        "stargate-simulator",
        "Simulated Nutanix Stargate diagnostic pages (port 2009: /, /vdisk_stats, "
        "/h/vars, Prism v2 virtual_disks) computed from a scenario.",
        EPILOG,
        "clean-oltp, zero-heavy",
    )
    p.add_argument("--host", default="127.0.0.1", help="address every CVM server binds (default %(default)s)")
    p.add_argument(
        "--port",
        dest="ports",
        action="append",
        default=[],
        metavar="[CVM=]PORT",
        help="port of a CVM: repeat, in CVM order, or as cvm-2=9002 (default: free ports)",
    )
    p.add_argument(
        "--synthetic-vdisks",
        type=int,
        metavar="N",
        help="serve N generated vdisks, all hosted by the first CVM (benchmarks)",
    )
    p.add_argument(
        "--synthetic-cvms",
        type=int,
        metavar="M",
        help="with --synthetic-vdisks: M generated CVMs (cvm-1 ..), the vdisks dealt "
        "round-robin over them (cluster-scale benchmarks)",
    )
    clitools.add_clock_args(p, "pages")
    p.add_argument(
        "--history-start",
        type=float,
        metavar="EPOCH",
        help="when the simulated Stargates started (default: now, or --freeze-at); "
        "the 1 hr working set reads 0 until an hour later",
    )
    p.add_argument("--urls-file", metavar="PATH", help="also write {cvm: url} as JSON to this file")
    args = clitools.parse_simulator_args(p, argv)
    if args.synthetic_cvms is not None and args.synthetic_vdisks is None:
        p.error("--synthetic-cvms needs --synthetic-vdisks")
    return args


def _ports(values: list[str]) -> list[int] | dict[str, int] | None:
    if not values:
        return None
    if all("=" in v for v in values):
        return {k: int(port) for k, _, port in (v.partition("=") for v in values)}
    if any("=" in v for v in values):
        raise ValueError("--port: use either all positional PORTs or all CVM=PORT")
    return [int(v) for v in values]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    log = logging.getLogger("stargate_simulator")
    sim = clitools.start_simulator(
        "stargate-simulator",
        lambda: StargateCluster(
            args.scenario,
            host=args.host,
            ports=_ports(args.ports),
            clock=clitools.clock_of(args),
            vdisk_count=args.synthetic_vdisks,
            history_start=args.history_start,
            cvm_count=args.synthetic_cvms,
        ),
    )
    if sim is None:
        return 2
    for name, url in sim.urls.items():
        print(f"{name} {url}", flush=True)
    if args.urls_file:
        clitools.write_json(args.urls_file, sim.urls, indent=1)
    log.info(
        "scenario=%s page_build=%d cvms=%d vdisks=%d", sim.scenario.name, sim.build, len(sim.cvms), len(sim.trace.disks)
    )
    return clitools.serve_until_signal(sim.stop)


if __name__ == "__main__":
    sys.exit(main())
