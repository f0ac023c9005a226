"""ioparallax-report: the PoC report (verdicts and figures of the three views) as one HTML file.

``ioparallax-report usl ...`` is the ad-hoc Universal Scalability Law fit (ioparallax.report.usl_cli).
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from ioparallax.pipes import quiet_on_closed_stdout
from ioparallax.report import usl_cli
from ioparallax.report.chromium import print_pdf
from ioparallax.report.pairing import split_matchers
from ioparallax.report.promapi import PromError, parse_seconds
from ioparallax.report.ramps import parse_steps
from ioparallax.units import parse_bytes
from ioparallax.version import add_version_arg

log = logging.getLogger("ioparallax.report")

EPILOG = """\
times: 'now', a duration before now ('-30m', '-2h'), unix seconds, or ISO 8601 ('2026-11-23T10:00:00Z').

--compare LABEL=WHAT puts a second data set on the same figures (dashed) with a table of deltas:
  B=http://prom-b:9090              the same range on another Prometheus (platform A vs B)
  B=-2h..-1h30m                     another range on the same Prometheus (before vs after a fix)
  B=http://prom-b:9090@-2h..-1h     both
  AHV='{cluster="ahv"}'             other series of the same Prometheus and range: B's matchers
                                    replace --match's on the labels they name (two clusters in one
                                    Prometheus: --match '{cluster="esxi"}' --compare 'AHV={cluster="ahv"}')
  AHV='{cluster="ahv"}@-2h..-1h'    and another range
B's VM disks pair with A's by VM name and disk address (vCenter's scsi0:1 is Prism's scsi.1), or as
--compare-pairs FILE says (YAML: "<A vm> <A disk>": "<B vm> <B disk>"); docs/compare.md.

The report reads the recording rules of alerts/ioparallax.rules.yml (load them into the Prometheus
you query) and the thresholds of ioparallax/mixin/config.yml (--config). It never sends anything but queries.
The HTML needs no network when opened: figures are inline SVG, data are embedded as CSV links.
--pdf prints the HTML with headless Chromium (Debian package chromium), a page per VM disk.

examples:
  ioparallax-report --prometheus http://127.0.0.1:9090 --start -30m -o report.html
  ioparallax-report --prometheus http://127.0.0.1:9090 --start -1h --match 'vm=~"oltp.*"' \\
      --compare B=-3h..-2h -o report.html --pdf report.pdf
  ioparallax-report --prometheus http://127.0.0.1:9090 --start -30m --match '{cluster="esxi"}' \\
      --compare 'AHV={cluster="ahv"}' -o esxi-vs-ahv.html
  ioparallax-report usl --csv points.csv
"""


def parse_time(text: str, now: float) -> float:
    text = text.strip()
    if text == "now":
        return now
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", text):
        return float(text)
    if text.startswith("-"):
        return now - parse_seconds(text[1:])
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"expected now, -30m, unix seconds or ISO 8601, got {text!r}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


class Compare(NamedTuple):
    """The other side of a comparison: its label, Prometheus, range and, for the matcher form, its
    own label matchers (None: the report's --match)."""

    label: str
    url: str
    start: float
    end: float
    match: str | None = None


def parse_compare(text: str, prometheus: str, start: float, end: float, now: float) -> Compare:
    """``LABEL=URL``, ``LABEL=START..END``, ``LABEL=URL@START..END``, ``LABEL={matchers}`` or
    ``LABEL={matchers}@START..END`` -> :class:`Compare`."""
    label, sep, what = text.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z0-9_ .-]{1,20}", label) or not what:
        raise ValueError(
            f"--compare: expected LABEL=URL, LABEL=START..END, LABEL=URL@START..END or LABEL={{matchers}}, got {text!r}"
        )
    url, rng, match = prometheus, "", None
    if what.startswith("{"):
        close = what.rfind("}")
        if close < 0:
            raise ValueError(f"--compare {label}: expected {{label matchers}}, got {what!r}")
        match, rest = what[: close + 1], what[close + 1 :]
        split_matchers(match)  # ValueError: not matchers
        if rest and not rest.startswith("@"):
            raise ValueError(f"--compare {label}: expected {{matchers}} or {{matchers}}@START..END, got {what!r}")
        rng = rest[1:]
        match = match.strip()[1:-1].strip()
    elif what.startswith(("http://", "https://")):
        url, _, rng = what.partition("@")
    else:
        rng = what
    if rng:
        a, sep, b = rng.partition("..")
        if not sep:
            raise ValueError(f"--compare {label}: expected a range START..END, got {rng!r}")
        start, end = parse_time(a, now), parse_time(b, now)
    return Compare(label, url, start, end, match)


def _join_negative_times(argv: list[str]) -> list[str]:
    """``--start -30m`` as ``--start=-30m``: argparse would take ``-30m`` for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--start", "--end") and i + 1 < len(argv) and argv[i + 1].startswith("-"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ioparallax-report",
        description="Write the PoC report: a verdict per VM disk and per trap (views agree, zero reads, "
        "zero writes, cache fit, bursts averaged away, misalignment, benchmark hygiene), a page "
        "per VM disk with the guest, VM and storage views overlaid, the alerts that fired, and an "
        "appendix with every query and the data as CSV. One self-contained HTML file.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--prometheus", required=True, metavar="URL", help="Prometheus-compatible query API, e.g. http://127.0.0.1:9090"
    )
    p.add_argument("--start", default="-30m", help="start of the range (default -30m)")
    p.add_argument("--end", default="now", help="end of the range (default now)")
    p.add_argument(
        "--match",
        default="",
        metavar="'{label=\"value\",...}'",
        help="label matchers added to every query, e.g. '{vm=~\"oltp.*\"}' or, on a long-term "
        "store, '{cluster=\"poc-a\"}' (recording rules keep vm, disk and vdisk_id)",
    )
    p.add_argument(
        "--compare",
        metavar="LABEL=URL|RANGE|{MATCHERS}",
        help="a second Prometheus, range or set of series (label matchers), overlaid",
    )
    p.add_argument(
        "--compare-pairs",
        type=Path,
        metavar="FILE",
        help='YAML mapping "<A vm> <A disk>": "<B vm> <B disk>" for VM disks named differently on the two '
        "sides (default: same VM name and disk address)",
    )
    p.add_argument("-o", "--output", required=True, type=Path, help="the HTML file to write")
    p.add_argument("--pdf", type=Path, help="also print the report to this PDF (headless Chromium)")
    p.add_argument("--config", type=Path, help="mixin config (default: the shipped ioparallax/mixin/config.yml)")
    p.add_argument("--step", help="seconds between points (default: max(scrape interval, range / 600))")
    p.add_argument("--title", default="Storage PoC report", help="the report's title")
    p.add_argument(
        "--steps",
        metavar="OFFSET[=N],...",
        help="the scalability ramp's step boundaries, offsets from --start (e.g. 0,3m,6m,9m, or "
        "0=1,3m=2,6m=4 with each step's concurrency) instead of finding them (docs/usl.md)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds per Prometheus request, the whole exchange from connecting to the last byte (default 30)",
    )
    p.add_argument(
        "--max-answer-size",
        default="64MiB",
        metavar="SIZE",
        help="largest Prometheus answer read (e.g. 64MiB, 1GiB): a larger one fails its query with a "
        "clear error instead of filling memory; raise it for very long ranges over many VM disks (default 64MiB)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log every query")
    add_version_arg(p)
    return p


@quiet_on_closed_stdout
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["usl"]:
        return usl_cli.main(argv[1:])
    args = build_parser().parse_args(_join_negative_times(argv))
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    # Here, once the arguments are read: matplotlib and the report's modules take a second to
    # import, which --help, a bad argument and `usl` need not wait for.
    from ioparallax.report.report import ReportError, make_report

    now = time.time()
    try:
        start, end = parse_time(args.start, now), parse_time(args.end, now)
        if end <= start:
            raise ValueError(f"--end ({args.end}) must be after --start ({args.start})")
        step = (
            parse_seconds(args.step)
            if args.step and not args.step.replace(".", "").isdigit()
            else (float(args.step) if args.step else None)
        )
        match = args.match.strip()
        if match.startswith("{") and match.endswith("}"):
            match = match[1:-1].strip()
        if not (math.isfinite(args.timeout) and args.timeout > 0):
            raise ValueError(f"--timeout: expected seconds above 0, got {args.timeout:g}")
        try:
            max_answer = parse_bytes(args.max_answer_size)
        except ValueError as e:
            raise ValueError(f"--max-answer-size: {e}") from None
        if max_answer < 1024:
            raise ValueError(f"--max-answer-size: expected at least 1KiB, got {args.max_answer_size}")
        compare = parse_compare(args.compare, args.prometheus, start, end, now) if args.compare else None
        if args.compare_pairs and not compare:
            raise ValueError("--compare-pairs needs --compare")
        steps = parse_steps(args.steps) if args.steps else None
    except ValueError as e:
        print(f"ioparallax-report: {e}", file=sys.stderr)
        return 2
    try:
        result = make_report(
            prometheus=args.prometheus,
            start=start,
            end=end,
            step=step,
            match=match,
            config_path=args.config,
            compare=compare,
            compare_pairs=args.compare_pairs,
            title=args.title,
            timeout=args.timeout,
            steps=steps,
            max_answer_bytes=max_answer,
        )
    except (PromError, ReportError) as e:
        print(f"ioparallax-report: {e}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    result.write(args.output)
    print(
        f"wrote {args.output} ({result.size / 1e6:.1f} MB, {result.disks} VM disks, "
        f"{result.queries} Prometheus queries in {result.seconds:.1f} s)"
    )
    for view, why in result.missing_views.items():
        print(f"  view missing: {view}: {why}")
    if args.pdf:
        try:
            print_pdf(args.output, args.pdf)
        except RuntimeError as e:
            print(f"ioparallax-report: {e}", file=sys.stderr)
            return 1
        print(f"wrote {args.pdf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
