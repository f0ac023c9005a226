"""ioparallax-scenario: list, validate and compile the scenarios every simulator reads."""

from __future__ import annotations

import argparse
import json
import sys

from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.version import add_version_arg
from ioparallax.yamlconf import ConfigError

from .checks import LITTLE_TOLERANCE, little_warnings
from .model import list_scenarios, load_scenario
from .trace import compile_scenario


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ioparallax-scenario",
        description="Scenarios are the one ground truth of the simulated cluster: the Stargate pages, "
        "vCenter samples and fio streams are all computed from them. See docs/scenarios.md.",
    )
    add_version_arg(parser)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="list the scenario library")
    p = sub.add_parser(
        "check",
        help="validate scenario files (errors name the file and key) and warn where a "
        "stream's iodepth, IOPS and latency contradict Little's law",
    )
    p.add_argument("scenarios", nargs="+", help="library names or YAML paths")
    p.add_argument(
        "--tolerance",
        type=float,
        default=LITTLE_TOLERANCE,
        help="asked iodepth over ops/s x latency outside [1/x, x] warns (default: %(default)s)",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when there are warnings")
    p = sub.add_parser("identities", help="print the identity map (VM disk <-> vdisk <-> guest device) as JSON")
    p.add_argument("scenario")
    p = sub.add_parser("compile", help="write the per-second trace as JSON (what the Go vCenter simulator reads)")
    p.add_argument("scenario")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    args = parser.parse_args(argv)

    try:
        if args.cmd == "list":
            for name in list_scenarios():
                sc = load_scenario(name)
                print(f"{name:24} {sc.summary}")
        elif args.cmd == "check":
            if args.tolerance < 1:
                parser.error(f"--tolerance must be at least 1, got {args.tolerance:g}")
            warned = False
            for name in args.scenarios:
                sc = load_scenario(name)
                print(f"{sc.source}: OK ({len(sc.vms)} VMs, {len(sc.disks)} disks, period {sc.period_s} s)")
                for line in little_warnings(sc, args.tolerance):
                    warned = True
                    print(f"warning: {sc.source}: {line}", file=sys.stderr)
            if warned and args.strict:
                return 1
        elif args.cmd == "identities":
            print(json.dumps(compile_scenario(load_scenario(args.scenario)).identity_map(), indent=2))
        elif args.cmd == "compile":
            text = compile_scenario(load_scenario(args.scenario)).to_json()
            if args.output == "-":
                sys.stdout.write(text + "\n")
            else:
                with open(args.output, "w", encoding="utf-8") as fh:
                    fh.write(text)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
