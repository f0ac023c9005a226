"""`ioparallax-report usl --csv`: the printed fit, the CSV forms it accepts and its errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ioparallax.report import usl_cli

# specsdm91 of R's usl package (data/specsdm91.rda): the fit is checked in test_usl.py.
SPECSDM91 = "1,64.9\n18,995.9\n36,1652.4\n72,1853.2\n108,1828.9\n144,1775.0\n216,1702.2\n"


def run(tmp_path: Path, text: str, *extra: str, capsys) -> tuple[int, str, str]:
    f = tmp_path / "points.csv"
    f.write_text(text)
    rc = usl_cli.main(["--csv", str(f), *extra])
    out, err = capsys.readouterr()
    return rc, out, err


def test_prints_coefficients_intervals_peak_asymptote_and_sentence(tmp_path, capsys):
    rc, out, err = run(
        tmp_path, "concurrency,throughput\n" + SPECSDM91, "--unit", "scripts/h", "--what", "users", capsys=capsys
    )
    assert rc == 0 and err == ""
    assert "USL fit of 7 points from" in out and "Student's t on 4 degrees of freedom" in out
    assert "sigma (contention)   0.02773      [0.002402, 0.05305]" in out
    assert "kappa (coherency)    0.0001044    [4.918e-05, 0.0001595]" in out
    assert "R squared            0.9896" in out
    assert "N* = 96.52, X(N*) = 1884 scripts/h" in out
    assert "Amdahl asymptote     3246 scripts/h (gamma / sigma)" in out
    assert "percent linear       8.5 % at N = 216 users" in out
    assert "it peaked at about 1,880 scripts/h near 96.5 users" in out


@pytest.mark.parametrize(
    "text",
    [
        SPECSDM91,  # no header
        "# from the book\nload;users;throughput\n".replace("load;users;", "load;") + SPECSDM91.replace(",", ";"),
        "throughput\tconcurrency\n" + "".join(f"{x}\t{n}\n" for n, x in (ln.split(",") for ln in SPECSDM91.split())),
        "\ufeffconcurrency,throughput\r\n" + SPECSDM91.replace("\n", "\r\n") + "\n\n",
    ],
)
def test_accepts_header_or_none_any_separator_and_column_order(tmp_path, capsys, text):
    rc, out, _ = run(tmp_path, text, capsys=capsys)
    assert rc == 0
    assert "N* = 96.52" in out


@pytest.mark.parametrize(
    "text, message",
    [
        ("1,10\n2,19\nthree,27\n", "points.csv:3: concurrency 'three' is not a number"),
        ("concurrency,throughput\n1,10\n2\n", "points.csv:3: expected 2 columns (concurrency, throughput), got 1"),
        ("1,10\n0,19\n", "points.csv:2: concurrency must be > 0, got 0"),
        ("1,10\n2,-19\n", "points.csv:2: throughput must be >= 0, got -19"),
        ("1,10\n2,nan\n", "points.csv:2: throughput 'nan' is not a number"),
        ("concurrency,throughput\n", "points.csv: no points (only a header, blank lines or comments)"),
        ("", "points.csv: no points (the file is empty)"),
    ],
)
def test_bad_csv_names_file_and_line_and_exits_2(tmp_path, capsys, text, message):
    rc, out, err = run(tmp_path, text, capsys=capsys)
    assert rc == 2 and out == ""
    assert message in err


def test_unreadable_file_exits_2(tmp_path, capsys):
    rc = usl_cli.main(["--csv", str(tmp_path / "missing.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and "missing.csv: cannot read (No such file or directory)" in err


def test_degenerate_ramp_prints_why_and_exits_1(tmp_path, capsys):
    rc, out, _ = run(tmp_path, "1,100\n2,190\n3,260\n", "--what", "VMs", capsys=capsys)
    assert rc == 1
    assert "no fit." in out and "3 concurrency levels measured, at least 4 are needed" in out


def test_console_script_dispatches_usl_and_explains_itself(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text(SPECSDM91)
    exe = Path(sys.executable).with_name("ioparallax-report")
    done = subprocess.run([str(exe), "usl", "--csv", str(f)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "N* = 96.52" in done.stdout
    helped = subprocess.run([str(exe), "usl", "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0
    assert "Universal Scalability Law" in helped.stdout and "exit status" in helped.stdout


def test_gamma_fixed_is_said_and_not_given_an_interval(tmp_path, capsys):
    rc, out, _ = run(tmp_path, SPECSDM91, "--gamma-fixed", capsys=capsys)
    assert rc == 0
    assert "gamma from the smallest step" in out
    assert "gamma (X at N=1)     64.9         (fixed)" in out


# ---- issue 25: hostile points


@pytest.mark.parametrize(
    "text, message",
    [
        ("1,100\n2,190\n4,350\n1e300,400\n", ":4: concurrency 1e300 is above 1e+09, beyond any measurement"),
        ("1,1e300\n2,1.9e300\n4,3.5e300\n8,4e300\n", ":1: throughput 1e300 is above 1e+18"),
        ("1,100\n2,190\n4,350\n1_0,400\n", ":4: concurrency '1_0' is not a number"),  # float() says 10
        ("1,100\n2,190\n4,350\n\uff18,400\n", ":4: concurrency '\uff18' is not a number"),  # full-width 8
        ("1,100\n2,190\n4,350\n8,\u0664\u0660\u0660\n", ":4: throughput '\u0664\u0660\u0660' is not a number"),
        ("1,100\n2,190\n4,350\n8," + "9" * 10_000 + "\n", ":4: a cell longer than 4096 characters"),
        ("1,100\n2,190\n" + "4," + "9" * 10_000_000 + "\n", ":3: cannot be read as CSV (field larger than field limit"),
        ('1,100\n2,190\n4,350\n8,400,"' + "x" * 200_000 + "\n", ":4: cannot be read as CSV"),
    ],
    ids=["n_1e300", "x_1e300", "underscore", "fullwidth", "arabic_indic", "long_cell", "10MB_field", "open_quote"],
)
def test_hostile_points_are_one_line_and_exit_2(tmp_path, capsys, text, message):
    rc, out, err = run(tmp_path, text, capsys=capsys)
    assert rc == 2, (out, err)
    assert message in err and "Traceback" not in err, err
    assert len(err) < 400 and len(err.strip().splitlines()) == 1


def test_a_csv_above_16_mib_is_refused_unread(tmp_path, capsys):
    rc, _, err = run(tmp_path, "1,1\n" * (5 * 2**20), capsys=capsys)
    assert rc == 2 and "larger than 16 MiB" in err, err


@pytest.mark.parametrize(
    "n, x",
    [
        ([1, 2, 4, 1e9], [1, 2, 3, 4]),
        ([5e8, 6e8, 7e8, 1e9], [1e17, 2e17, 3e17, 1e18]),
        ([1e-300, 2, 4, 8], [1, 2, 3, 4]),
        ([1, 2, 4, 8], [1e-300, 2e-300, 3e-300, 4e-300]),
        ([1, 1 + 1e-15, 1 + 2e-15, 1 + 3e-15], [1, 2, 3, 4]),
        ([1, 2, 4, 1e300], [1, 2, 3, 4]),  # the library's callers (the report) get a reason, not a traceback
    ],
)
def test_extreme_points_fit_or_say_why_without_warnings(n, x, recwarn):
    from ioparallax.report import usl

    r = usl.fit(n, x)
    assert r.ok or r.statement.startswith("No scalability fit: ")
    usl_cli.format_fit(r, "points")
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
