"""ioparallax-guest-simulator: per VM of a scenario, the fio status stream and disk facts a real
guest would show, for ``fio-exporter serve`` to read unchanged."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time

from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.simulators.clitools import write_json
from ioparallax.simulators.scenario import compile_scenario, load_scenario
from ioparallax.version import add_version_arg
from ioparallax.yamlconf import ConfigError

from .writer import GuestWriter


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="ioparallax-guest-simulator",
        description="Write, for each VM of a scenario, the fio --output-format=json+ --status-interval=1 "
        "stream a fio in that VM would write (one record a second, computed from the scenario's "
        "trace at the wall-clock time since its origin modulo its period), the VM's sysfs disk facts and its "
        "/proc/diskstats (block-layer requests, split at max_sectors_kb); for each Windows VM, "
        "windows_exporter's disk and host name metrics as a textfile; for the VMs whose load generator "
        "is vdbench, one multi-host vdbench output directory (DIR/vdbench/<scenario>); for the VMs whose scenario "
        "has an application (pgbench), pgbench's console output, one run per period "
        "(DIR/<vm>/pgbench/pgbench-<vm>.out, for pgbench-exporter). "
        "See docs/scenarios.md.",
        epilog="Layout: DIR/<vm>/fio-status.json, DIR/<vm>/sys and DIR/<vm>/proc/diskstats (for fio-exporter serve "
        "--fio.watch DIR/<vm>/fio-status.json --fio.host <vm> --collector.sysfs DIR/<vm>/sys, and "
        "prometheus-node-exporter --path.procfs DIR/<vm>/proc --path.sysfs DIR/<vm>/sys "
        "--path.udev.data DIR/<vm>/udev); Windows VMs: DIR/<vm>/windows/windows_exporter.prom (for "
        "prometheus-node-exporter --collector.disable-defaults --collector.textfile "
        "--collector.textfile.directory DIR/<vm>/windows).",
    )
    p.add_argument("scenario", help="scenario name from the library or a YAML path")
    p.add_argument("--dir", required=True, help="output directory")
    p.add_argument("--vm", action="append", default=[], help="only these VMs (repeatable; default: all)")
    p.add_argument("--once", action="store_true", help="write one record per VM and exit")
    p.add_argument(
        "--manifest",
        metavar="PATH",
        help="also write {vm: {os, load_generator, stream, sysfs, procfs, udev, windows, vdbench, pgbench}} as JSON to this "
        "file once the trees exist (each VM has the keys of its guest OS and load generator)",
    )
    add_logging_args(p)
    add_version_arg(p)
    args = p.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        trace = compile_scenario(load_scenario(args.scenario))
        writer = GuestWriter(trace, args.dir, vms=args.vm or None)
    except (ConfigError, ValueError) as exc:
        print(f"ioparallax-guest-simulator: {exc}", file=sys.stderr)
        return 2
    paths = writer.setup()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    first = int(time.time())
    writer.write(first)
    if args.manifest:
        write_json(args.manifest, paths, indent=2)
    for vm, where in paths.items():
        files = " ".join(f"{k}={v}" for k, v in where.items() if k not in ("os", "load_generator"))
        print(f"{vm} {where['os']} {where['load_generator']} {files}", flush=True)
    if args.once:
        return 0
    try:
        writer.run(stop, after=first)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
