"""``stargate-exporter capture`` and ``stargate-exporter replay`` (capture.py; issue 26)."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time

from ioparallax.exporters.common.capture import output_problem, read_expected
from ioparallax.exporters.common.logsetup import add_logging_args, setup_logging
from ioparallax.exporters.stargate.address import TargetError, TargetPolicy, parse_target
from ioparallax.exporters.stargate.capture import CaptureError, anonymize, capture, comparable, read, replay, write
from ioparallax.exporters.stargate.collector import Collectors
from ioparallax.exporters.stargate.config import load_config
from ioparallax.exporters.stargate.target import DEFAULT_CONCURRENCY
from ioparallax.yamlconf import ConfigError

log = logging.getLogger("ioparallax.exporters.stargate")

CAPTURE_DESCRIPTION = """\
One probe of a CVM, exactly as the exporter runs it (the same allow-list, body_size_limit,
max_pages_per_probe and deadline; the vdisk detail views its main page links), written to a
.tar.gz with a manifest (exporter version, each page's URL, HTTP status, bytes, seconds and page
build) and the metrics the exporter makes of it. Names, addresses and UUIDs are anonymized by
default (docs/stargate.md, Captures): send the file with your report.
"""

CAPTURE_EPILOG = """\
examples:
  stargate-exporter capture --target 10.0.0.11 -o capture.tar.gz
  stargate-exporter capture --target 10.0.0.11 --config.file stargate.yml --redact acme --redact acme.example.com
  stargate-exporter replay capture.tar.gz        # the metrics, as /probe would answer them
Check what you send: tar -xzf capture.tar.gz && grep -ril <your cluster or company name> .
"""


def capture_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="stargate-exporter capture",
        description=CAPTURE_DESCRIPTION,
        epilog=CAPTURE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--target", required=True, help="the CVM, as in /probe?target= (host[:port] or a URL)")
    ap.add_argument(
        "-o",
        "--output",
        default=None,
        help="the file to write (default: stargate-capture-<UTC time>.tar.gz in the current directory)",
    )
    ap.add_argument("--discover", action="store_true", help="probe every CVM of the target's Cluster State table too")
    ap.add_argument(
        "--no-anonymize",
        dest="anonymize",
        action="store_false",
        help="keep names, addresses and UUIDs as the pages show them (default: replaced, docs/stargate.md)",
    )
    ap.add_argument(
        "--redact",
        action="append",
        default=[],
        metavar="TEXT",
        help="also replace TEXT wherever it appears (a cluster, company or domain name); repeat",
    )
    ap.add_argument(
        "--anonymize-free-text",
        dest="free_text",
        action="store_true",
        help="also replace e-mail addresses, host-name-shaped words, Windows paths and query values "
        "anywhere (off by default: a protocol word can look like a host name; replay --check tells)",
    )
    ap.add_argument(
        "--config.file",
        dest="config",
        default=None,
        help="the exporter's config file: its targets: allow-list, body_size_limit, max_pages_per_probe, "
        "discovery_ports",
    )
    ap.add_argument(
        "--stargate.target",
        dest="targets",
        action="append",
        default=[],
        metavar="PATTERN",
        help="allow-list entries, as for the exporter (also STARGATE_TARGETS). With no allow-list at all, "
        "only --target's host is fetched from",
    )
    ap.add_argument(
        "--stargate.concurrency",
        dest="concurrency",
        type=int,
        default=DEFAULT_CONCURRENCY,
        help="pages requested at once (default: %(default)s, the exporter's)",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="the probe's deadline in seconds (default: %(default)s, the exporter's --probe.default-timeout)",
    )
    add_logging_args(ap)
    args = ap.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        host = parse_target(args.target).origin.host
    except TargetError as exc:
        print(f"error: --target {args.target!r}: {exc}", file=sys.stderr)
        return 2
    if args.concurrency < 1 or not 0 < args.timeout <= 600:
        print("error: --stargate.concurrency must be at least 1 and --timeout 0-600 s", file=sys.stderr)
        return 2
    entries = config.targets + [t for t in re.split(r"[,\s]+", os.environ.get("STARGATE_TARGETS", "")) if t]
    entries += args.targets
    try:
        policy = (
            TargetPolicy(entries, allow_any=config.allow_unlisted)
            if entries or config.allow_unlisted
            else TargetPolicy([host])
        )
    except ValueError as exc:
        print(f"error: allow-list: {exc}", file=sys.stderr)
        return 2
    if not policy.allows(host):
        print(
            f"error: target {args.target} is not on the targets allow-list ({policy.describe()})",
            file=sys.stderr,
        )
        return 2
    output = args.output or time.strftime("stargate-capture-%Y%m%dT%H%M%SZ.tar.gz", time.gmtime())
    if problem := output_problem(output):
        print(f"error: -o {problem}", file=sys.stderr)
        return 2
    cap, result = capture(
        args.target,
        timeout=args.timeout,
        discover=args.discover,
        concurrency=args.concurrency,
        limits=config.limits,
        policy=policy,
        discovery_ports=config.discovery_ports,
    )
    summary = "NOT anonymized (--no-anonymize)"
    if args.anonymize:
        summary = "anonymized: " + anonymize(cap, args.redact, args.free_text).summary() + " replaced"
    _, metrics = replay(cap, limits=config.limits, concurrency=args.concurrency, timeout=max(args.timeout, 30.0))
    try:
        size = write(cap, output, metrics)
    except CaptureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    mains = sum(1 for p in cap.pages if p.kind == "main")
    failed = sum(1 for p in cap.pages if p.body is None)
    print(
        f"wrote {output} ({size / 1e6:.1f} MB): {len(cap.pages)} pages ({mains} main, "
        f"{len(cap.pages) - mains} vdisk detail views, {failed} failed), probe "
        f"{'up' if result.up else 'DOWN: ' + str(cap.manifest.get('error', ''))}, {summary}"
    )
    if result.unknown:
        print(
            f"  the pages hold {len(result.unknown)} fields ioparallax does not read: "
            "this capture is what we need to read them"
        )
    print(f"  check before sending: tar -xzf {output} && grep -ril '<your cluster or company name>' .")
    return 0 if result.up else 1


def replay_main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="stargate-exporter replay",
        description="Print the metrics of one probe answered from a capture (as /probe answers; no vdisk "
        "names from YAML or Prism). With --check, compare them with the capture's own metrics.prom "
        "(or FILE) instead, all but stargate_scrape_duration_seconds.",
    )
    ap.add_argument("capture", help="a .tar.gz written by stargate-exporter capture")
    ap.add_argument("-o", "--output", default="-", help="write the metrics to this file (default: stdout)")
    ap.add_argument(
        "--check",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="exit 1 if the metrics differ from FILE (default: the capture's metrics.prom)",
    )
    ap.add_argument("--no-collector.histograms", dest="histograms", action="store_false")
    ap.add_argument("--no-collector.source-ratios", dest="source_ratios", action="store_false")
    add_logging_args(ap)
    args = ap.parse_args(argv)
    setup_logging(args.log_level, args.log_format)
    if args.output != "-" and (problem := output_problem(args.output)):
        print(f"error: -o {problem}", file=sys.stderr)
        return 2
    try:
        cap = read(args.capture)
    except CaptureError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    _, metrics = replay(cap, Collectors(args.histograms, args.source_ratios))
    if args.check is not None:
        try:
            expected = read_expected(args.check) if args.check else cap.metrics
        except (OSError, UnicodeDecodeError) as exc:
            print(f"error: --check {args.check}: {getattr(exc, 'strerror', None) or exc}", file=sys.stderr)
            return 2
        want, got = comparable(expected), comparable(metrics.decode())
        if want == got:
            print(f"{args.capture}: {len(got)} lines, as expected")
            return 0
        missing = [line for line in want if line not in set(got)]
        extra = [line for line in got if line not in set(want)]
        print(
            f"{args.capture}: the metrics differ: {len(missing)} lines expected and not made, {len(extra)} made and not expected"
        )
        for line in missing[:10]:
            print(f"  - {line}")
        for line in extra[:10]:
            print(f"  + {line}")
        return 1
    if args.output == "-":
        sys.stdout.write(metrics.decode())
        return 0
    try:
        with open(args.output, "wb") as f:
            f.write(metrics)
    except OSError as exc:
        print(f"error: -o {args.output}: cannot write: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0
