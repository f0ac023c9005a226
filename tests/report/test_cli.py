"""ioparallax-report's command line: times, --compare, --help, bad input named."""

from __future__ import annotations

import subprocess

import pytest

from ioparallax.report.cli import _join_negative_times, main, parse_compare, parse_time
from tests.support import free_port, venv_tool

NOW = 1_800_000_000.0


def test_times():
    assert parse_time("now", NOW) == NOW
    assert parse_time("-30m", NOW) == NOW - 1800
    assert parse_time("-1h30m", NOW) == NOW - 5400
    assert parse_time("1700000000", NOW) == 1_700_000_000
    assert parse_time("2026-11-23T10:00:00Z", NOW) == 1_795_428_000
    with pytest.raises(ValueError, match="expected now, -30m"):
        parse_time("yesterday", NOW)


def test_negative_times_are_not_options():
    assert _join_negative_times(["--start", "-30m", "--end", "now"]) == ["--start=-30m", "--end", "now"]


def test_compare_forms():
    url = "http://a:9090"
    assert parse_compare("B=http://b:9090", url, 1, 2, NOW) == ("B", "http://b:9090", 1, 2, None)
    assert parse_compare("before=-2h..-1h", url, 1, 2, NOW) == ("before", url, NOW - 7200, NOW - 3600, None)
    assert parse_compare("B=http://b:9090@-2h..now", url, 1, 2, NOW) == ("B", "http://b:9090", NOW - 7200, NOW, None)
    with pytest.raises(ValueError, match="--compare: expected LABEL=URL"):
        parse_compare("http://b:9090", url, 1, 2, NOW)
    with pytest.raises(ValueError, match="expected a range START..END"):
        parse_compare("B=-2h", url, 1, 2, NOW)


def test_compare_matcher_form_is_other_series_of_the_same_prometheus():
    url = "http://a:9090"
    # two clusters in one Prometheus (docs/compare.md): same URL and range, B's own matchers
    assert parse_compare('AHV={cluster="ahv"}', url, 1, 2, NOW) == ("AHV", url, 1, 2, 'cluster="ahv"')
    assert parse_compare('AHV={cluster="ahv", vm=~"oltp.*"}@-2h..-1h', url, 1, 2, NOW) == (
        "AHV",
        url,
        NOW - 7200,
        NOW - 3600,
        'cluster="ahv", vm=~"oltp.*"',
    )
    with pytest.raises(ValueError, match="expected label matchers"):
        parse_compare("AHV={cluster=ahv}", url, 1, 2, NOW)
    with pytest.raises(ValueError, match="expected {matchers} or {matchers}@START..END"):
        parse_compare('AHV={cluster="ahv"}-2h', url, 1, 2, NOW)


def test_compare_pairs_needs_compare(tmp_path, capsys):
    pairs = tmp_path / "pairs.yml"
    pairs.write_text('"oltp-01 scsi0:1": "oltp-01 scsi.1"\n')
    out = tmp_path / "r.html"
    code = main(["--prometheus", "http://127.0.0.1:9", "--compare-pairs", str(pairs), "-o", str(out)])
    assert code == 2 and "--compare-pairs needs --compare" in capsys.readouterr().err


def test_help_explains(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for text in ("--prometheus", "--compare", "--match", "verdict", "--pdf", "Chromium"):
        assert text in out


def test_bad_range_is_named(capsys, tmp_path):
    assert (
        main(["--prometheus", "http://127.0.0.1:9", "--start", "-1m", "--end", "-2m", "-o", str(tmp_path / "r.html")])
        == 2
    )
    assert "--end (-2m) must be after --start (-1m)" in capsys.readouterr().err
    assert main(["--prometheus", "http://127.0.0.1:9", "--compare", "nope", "-o", str(tmp_path / "r.html")]) == 2


def test_unreachable_prometheus_is_a_clear_error(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [venv_tool("ioparallax-report"), "--prometheus", url, "-o", str(tmp_path / "r.html")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert f"{url}/api/v1/query: cannot connect (connection refused)" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "r.html").exists()
