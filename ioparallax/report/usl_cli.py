"""``ioparallax-report usl``: fit the Universal Scalability Law to points from a CSV file.

For ad-hoc use: X-Ray results, a spreadsheet, another tool's ramp. The report's scalability
section makes the same fit from Prometheus (ioparallax.report.scaling).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ioparallax.report import usl

EPILOG = """\
The CSV has two columns, concurrency and throughput, one point per line (a header line is optional;
with a header, columns named 'concurrency' and 'throughput' are used wherever they are, otherwise
the first two). Comma, semicolon or tab separated; blank lines and lines starting with # are skipped.
Several points at the same concurrency are fine (repeated runs). Example:

  concurrency,throughput
  1,4980
  2,9410
  4,16800
  6,21200
  8,23100

Concurrency is what was added step by step: VMs, fio jobs, or outstanding I/Os. Throughput is the
mean of each step's plateau (IO/s or bytes/s), measured after the step settled (see docs/usl.md).

The fit: X(N) = gamma N / (1 + sigma (N - 1) + kappa N (N - 1)), all three fitted by bounded least
squares (sigma in [0, 1], kappa >= 0), as R's usl package does; --gamma-fixed takes gamma from the
smallest step instead. Printed: the coefficients with confidence intervals, R squared, the peak
N* = sqrt((1 - sigma) / kappa) and X(N*), the Amdahl asymptote gamma / sigma, the share of linear
scaling at the largest N, and one sentence for the PoC report.

exit status: 0 fitted; 1 the points allow no fit (fewer than 4 levels, a flat or falling ramp: the
reason is printed); 2 bad command line or CSV (the file and line are named).
"""


class CsvError(ValueError):
    """A CSV that cannot be read: the message names the file and the line."""


@dataclass
class Points:
    concurrency: list[float]
    throughput: list[float]


#: A number as a spreadsheet or tool writes it: ASCII digits, a decimal point, an exponent.
#: float() also takes "1_0" (10) and digits of other scripts ("１", "٣"), which no CSV means.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)

#: Largest CSV read (bytes) and longest cell kept: a ramp is a few dozen short lines.
MAX_CSV_BYTES = 16 * 1024 * 1024
MAX_CELL_CHARS = 4096


def _number(text: str) -> float | None:
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return None
    return float(text)


def _cell(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:37]}..."


def read_points(text: str, name: str) -> Points:
    """Parse the CSV text; ``name`` is the file's name for error messages."""
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")), None)
    if first is None:
        raise CsvError(f"{name}: no points (the file is empty)")
    delimiter = max(",;\t", key=first.count) if any(d in first for d in ",;\t") else ","
    col_n, col_x = 0, 1
    points = Points([], [])
    header_seen = False
    rows = csv.reader(io.StringIO(text), delimiter=delimiter)
    lineno = 0
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as exc:  # e.g. a cell above csv's field limit
            raise CsvError(f"{name}:{rows.line_num}: cannot be read as CSV ({exc})") from None
        lineno = rows.line_num
        if any(len(c) > MAX_CELL_CHARS for c in row):
            raise CsvError(f"{name}:{lineno}: a cell longer than {MAX_CELL_CHARS} characters")
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in row]
        if not header_seen and not points.concurrency and _number(cells[0]) is None:
            header_seen = True
            names = [c.lower() for c in cells]
            if "concurrency" in names and "throughput" in names:
                col_n, col_x = names.index("concurrency"), names.index("throughput")
            elif len(cells) < 2:
                raise CsvError(
                    f"{name}:{lineno}: header {_cell(repr(row))} has {len(cells)} column, expected concurrency and throughput"
                )
            continue
        if len(cells) <= max(col_n, col_x):
            raise CsvError(
                f"{name}:{lineno}: expected {max(col_n, col_x) + 1} columns (concurrency, "
                f"throughput), got {len(cells)}: {_cell(repr(delimiter.join(row)))}"
            )
        n, x = _number(cells[col_n]), _number(cells[col_x])
        for label, value, cell, limit in (
            ("concurrency", n, cells[col_n], usl.N_MAX),
            ("throughput", x, cells[col_x], usl.X_MAX),
        ):
            if value is None or not math.isfinite(value):
                raise CsvError(f"{name}:{lineno}: {label} {_cell(cell)!r} is not a number")
            if value > limit:
                raise CsvError(f"{name}:{lineno}: {label} {_cell(cell)} is above {limit:.0e}, beyond any measurement")
        assert n is not None and x is not None
        if n <= 0:
            raise CsvError(f"{name}:{lineno}: concurrency must be > 0, got {_cell(cells[col_n])}")
        if x < 0:
            raise CsvError(f"{name}:{lineno}: throughput must be >= 0, got {_cell(cells[col_x])}")
        points.concurrency.append(n)
        points.throughput.append(x)
    if not points.concurrency:
        raise CsvError(f"{name}: no points (only a header, blank lines or comments)")
    return points


def _g(v: float | None) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    return f"{v:.4g}" if abs(v) < 1e5 else f"{v:,.0f}"


def format_fit(r: usl.UslFit, source: str, unit: str = "", what: str = "") -> str:
    """The fit as the CLI prints it."""
    u = f" {unit}" if unit else ""
    out = []
    if not r.ok:
        out.append(f"USL fit of {r.n.size} points from {source}: no fit.")
        out.append(r.statement)
        return "\n".join(out) + "\n"
    how = "gamma from the smallest step" if r.gamma_fixed else "gamma fitted"
    out.append(
        f"USL fit of {r.n.size} points from {source} ({how}; {r.level:.0%} intervals, "
        f"Student's t on {r.df} degrees of freedom)"
    )
    labels = {"sigma": "sigma (contention)", "kappa": "kappa (coherency)", "gamma": "gamma (X at N=1)"}
    for c in r.coefficients():
        ci = f"[{_g(c.low)}, {_g(c.high)}]" if c.low is not None else "(no interval)"
        extra = "  at its bound" if c.at_bound else ""
        if c.name == "gamma" and r.gamma_fixed:
            ci, extra = "(fixed)", ""
        out.append(f"  {labels[c.name]:<20} {_g(c.value):<12} {ci}{extra}")
    out.append(f"  {'R squared':<20} {r.r_squared:.4f}" if r.r_squared is not None else f"  {'R squared':<20} -")
    if r.peak_n is not None:
        out.append(f"  {'peak':<20} N* = {_g(r.peak_n)}, X(N*) = {_g(r.peak_x)}{u}")
    else:
        out.append(f"  {'peak':<20} none (kappa is 0: no retrograde term)")
    if r.amdahl_x is not None:
        out.append(f"  {'Amdahl asymptote':<20} {_g(r.amdahl_x)}{u} (gamma / sigma)")
    else:
        out.append(f"  {'Amdahl asymptote':<20} none (sigma is 0)")
    assert r.linear_share is not None
    out.append(
        f"  {'percent linear':<20} {100 * r.linear_share:.1f} % at N = {_g(r.n_max)}{' ' + what if what else ''}"
    )
    out.append("")
    out.append(r.statement)
    for note in r.notes:
        out.append(f"note: {note}")
    return "\n".join(out) + "\n"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ioparallax-report usl",
        description="Fit Gunther's Universal Scalability Law to (concurrency, throughput) points and print "
        "contention, coherency, the peak and the Amdahl asymptote.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--csv", required=True, metavar="FILE", help="the points ('-' reads standard input)")
    p.add_argument("--level", type=float, default=0.95, help="confidence level of the intervals (default 0.95)")
    p.add_argument(
        "--gamma-fixed",
        action="store_true",
        help="take gamma from the smallest step (X / N there) instead of fitting it",
    )
    p.add_argument("--unit", default="", help="throughput unit for the sentence, e.g. IO/s")
    p.add_argument("--what", default="", help="what concurrency counts, plural, e.g. VMs")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not 0 < args.level < 1:
        print(f"ioparallax-report usl: --level must be between 0 and 1, got {args.level}", file=sys.stderr)
        return 2
    try:
        if args.csv == "-":
            data, name = sys.stdin.buffer.read(MAX_CSV_BYTES + 1), "<stdin>"
        else:
            name = args.csv
            with Path(args.csv).open("rb") as fh:
                data = fh.read(MAX_CSV_BYTES + 1)
        if len(data) > MAX_CSV_BYTES:
            raise CsvError(f"{name}: larger than {MAX_CSV_BYTES // 2**20} MiB: not a table of points")
        text = data.decode("utf-8-sig")
        points = read_points(text, name)
    except OSError as e:
        print(f"ioparallax-report usl: {args.csv}: cannot read ({e.strerror or e})", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print(f"ioparallax-report usl: {args.csv}: not a text (UTF-8) file", file=sys.stderr)
        return 2
    except CsvError as e:
        print(f"ioparallax-report usl: {e}", file=sys.stderr)
        return 2
    r = usl.fit(
        points.concurrency,
        points.throughput,
        level=args.level,
        gamma_fixed=args.gamma_fixed,
        unit=args.unit,
        what=args.what,
    )
    sys.stdout.write(format_fit(r, name, unit=args.unit, what=args.what))
    return 0 if r.ok else 1


if __name__ == "__main__":
    sys.exit(main())
