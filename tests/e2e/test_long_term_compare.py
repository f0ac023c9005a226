"""The comparison rules of test_e2e_long_term.py, without a stack: what passes and what fails."""

from __future__ import annotations

import pytest

from ioparallax.simulators.stack import Stack
from tests.e2e.test_e2e_long_term import EXACT, differences, report_lines, seconds, tolerance

STACK = Stack(scrape_interval="2s", vcenter_scrape_interval="5s", fio_scrape_interval="1s")
K = (("__name__", "x"), ("vm", "a"))


def test_stored_values_are_compared_exactly():
    assert tolerance('vm_disk:ioparallax_vm_read_bytes:rate1m{vm="a"}', STACK) == EXACT
    assert differences({K: 1.0}, {K: 1.0}, EXACT) == []
    assert differences({K: 1.0}, {K: 1.0 + 1e-6}, EXACT)


def test_rate_tolerance_is_two_scrape_intervals_over_the_window():
    assert tolerance("rate(fio_read_ios_total[1m])", STACK) == pytest.approx(2 / 60)
    assert tolerance(
        "rate(vcenter_virtual_disk_read_ops_total[1m]) / rate(stargate_x_total[2m])", STACK
    ) == pytest.approx(10 / 60)
    assert tolerance("max_over_time(rate(fio_write_bytes_total[4s])[2m:2s])", STACK) == pytest.approx(0.5)
    assert tolerance("rate(node_disk_reads_completed_total[2m])", STACK) == pytest.approx(4 / 120)
    assert seconds("1m30s") == 90


def test_data_in_one_store_only_fails():
    assert differences({K: 1.0}, {}, EXACT) == [f"only in Prometheus: {dict(K)} = 1.0"]
    assert differences({}, {K: 1.0}, EXACT) == [f"only in VictoriaMetrics: {dict(K)} = 1.0"]
    other = (("__name__", "x"), ("vm", "b"))
    assert len(differences({K: 1.0}, {other: 1.0}, 0.5)) == 2
    assert differences({K: 100.0}, {K: 103.0}, 2 / 60) == []
    assert differences({K: 100.0}, {K: 104.0}, 2 / 60)


def test_report_text_blanks_only_the_source():
    html = (
        "<p>http://p:9090 &middot; generated 2026-11-23 10:49 UTC.</p><svg>1 2 3</svg>"
        "<td>70 Prometheus queries made this report</td><td>zero share 0.36</td>"
    )
    assert report_lines(html, "http://p:9090") == [
        "[source] &middot; generated [time].",
        "[n] Prometheus queries made this report",
        "zero share 0.36",
    ]
