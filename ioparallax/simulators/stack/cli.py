"""``ioparallax-demo``: start the demo stack, print where to look, stop it on Ctrl-C."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

import requests

from ioparallax.paths import workspace
from ioparallax.simulators.scenario import load_scenario
from ioparallax.simulators.stack.clusters import cluster_specs
from ioparallax.simulators.stack.core import Stack
from ioparallax.simulators.stack.quick_alerts import write_quick_alert_rules
from ioparallax.simulators.stack.report import alert_line


def main(argv: list[str] | None = None) -> int:
    from ioparallax.simulators.scenario import list_scenarios
    from ioparallax.version import add_version_arg
    from ioparallax.yamlconf import ConfigError

    parser = argparse.ArgumentParser(
        prog="ioparallax-demo",
        description="Start a simulated cluster and the real monitoring stack on 127.0.0.1, print where to look, "
        "and stop everything on Ctrl-C. Several scenarios run as several clusters in one Prometheus "
        "(docs/compare.md).",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        metavar="SCENARIO[@CLUSTER][,...]",
        help="scenario name or YAML file (default zero-heavy; library: "
        f"{', '.join(list_scenarios())}). Repeated or comma-separated: one simulated cluster "
        "per scenario (its own CVMs, vCenter and guests) in one Prometheus, every target "
        "labelled cluster=<the scenario's name>, or the name after @ "
        "(zero-heavy@poc-a,zero-heavy@poc-b runs one scenario twice; clean-oltp@esxi,clean-oltp-ahv@ahv "
        "runs one workload on ESXi and AHV: an AHV scenario's VM view comes from Prism)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        default=workspace() / ".run" / "demo",
        help="state, generated configs and logs (default: %(default)s)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=0,
        help="stop this many seconds after the status report instead of waiting for Ctrl-C (0: wait)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=70,
        help="seconds to let Prometheus scrape and evaluate before the status report: the rules' "
        "1m windows fill in about a minute (default %(default)s)",
    )
    parser.add_argument(
        "--long-term",
        action="store_true",
        help="also start VictoriaMetrics (Debian's victoria-metrics, single node, its data in the "
        "workdir) and make it Prometheus' remote_write target for the raw and recorded series; "
        "its query URL is printed with the report",
    )
    parser.add_argument(
        "--quick-alerts",
        action="store_true",
        help="load the rules with `for` at 15s (burst: 1m, views-disagree: 2m) instead of the shipped "
        "minutes, so a demo shows its alerts firing within a minute or two",
    )
    parser.add_argument(
        "--from-start",
        action="store_true",
        help="start each scenario's period with the demo (scaling-ramp begins at one VM) instead of "
        "where the wall clock puts it "
        "(period second = Unix time mod period)",
    )
    add_version_arg(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    scenarios = args.scenario or ["zero-heavy"]
    try:
        for scenario, _ in cluster_specs(scenarios):
            load_scenario(scenario)
    except (ValueError, ConfigError) as exc:
        parser.error(str(exc))

    rules_dir = None
    if args.quick_alerts:
        rules_dir = write_quick_alert_rules(args.workdir / "rules")
    stack = Stack(
        scenarios=scenarios,
        workdir=args.workdir,
        rules_dir=rules_dir,
        long_term=args.long_term,
        from_start=args.from_start,
    )
    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        print(
            f">> starting the demo stack (scenario {','.join(scenarios)}); logs in {args.workdir / 'logs'}", flush=True
        )
        stack.start()
        stack.wait_scraped(timeout=60)
        time.sleep(args.settle)
        print(stack.report(), flush=True)
        print("\nPress Ctrl-C to stop everything." if not args.duration else "", flush=True)
        deadline = time.monotonic() + args.duration if args.duration else None
        label = stack.resolved_cluster_label()
        seen = {alert_line(a, label) for a in stack.alerts() if a["state"] == "firing"}
        next_poll = time.monotonic() + 5
        while deadline is None or time.monotonic() < deadline:
            for proc in stack.procs:
                if not proc.alive():
                    print(f"!! {proc.name} exited with code {proc.popen.returncode}:\n{proc.tail()}", flush=True)
                    return 1
            if time.monotonic() >= next_poll:
                next_poll = time.monotonic() + 5
                try:
                    now = {alert_line(a, label) for a in stack.alerts() if a["state"] == "firing"}
                except requests.RequestException:
                    now = seen
                for line in sorted(now - seen):
                    print(f">> firing: {line.strip()}", flush=True)
                for line in sorted(seen - now):
                    print(f">> resolved: {line.strip()}", flush=True)
                seen = now
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    except (RuntimeError, TimeoutError, ValueError) as exc:
        print(f"!! {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        print(">> stopping", flush=True)
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
