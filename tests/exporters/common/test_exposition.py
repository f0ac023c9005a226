"""The shared text-format writer (ioparallax.exporters.common.exposition): escaping, values, the layout of
gauge, counter and gauge-histogram families against prometheus_client's generate_latest, and
promtool on a sample exposition."""

from __future__ import annotations

import math
import re
from bisect import bisect_left

import pytest
from hypothesis import given, settings, strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeHistogramMetricFamily, GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from ioparallax.exporters.common.exposition import (
    Exposition,
    Family,
    GaugeHistogram,
    escape_help,
    escape_label_value,
    format_value,
    header,
    label_block,
)
from ioparallax.exporters.fio.histogram import LATENCY_EDGES_SECONDS
from ioparallax.exporters.stargate.parse import LATENCY_BOUNDS, SIZE_BOUNDS
from tests.support import promtool_check_metrics


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _generate_latest(*families) -> str:
    class Fixed:
        def collect(self):
            return families

    registry = CollectorRegistry()
    registry.register(Fixed())
    return generate_latest(registry).decode()


# -- escaping -----------------------------------------------------------------------------------


def test_label_values_escape_backslash_quote_and_newline():
    assert escape_label_value('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
    assert escape_label_value("[ctr01] vm/vm_1.vmdk") == "[ctr01] vm/vm_1.vmdk"
    assert escape_label_value("\\n") == "\\\\n", "a backslash before n is not a newline"
    assert escape_label_value(42) == "42", "a YAML name may be a number"
    assert label_block(("vm", "disk"), ('x"y', "scsi0:1")) == 'vm="x\\"y",disk="scsi0:1"'
    assert label_block((), ()) == ""


def test_help_escapes_backslash_and_newline_but_not_quotes():
    assert escape_help('a\\b\nc "quoted"') == 'a\\\\b\\nc "quoted"'
    assert header("t_bytes_total", "counter", 'line one\nC:\\ "two"') == (
        '# HELP t_bytes_total line one\\nC:\\\\ "two"\n# TYPE t_bytes_total counter\n'
    )


@settings(max_examples=300, deadline=None)
@given(value=st.text(), help_text=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1))
def test_any_label_value_and_help_text_parse_back_unchanged(value, help_text):
    help_text = "h " + help_text.strip() if help_text.strip() else "h"  # the parser strips HELP's edges
    out = Exposition()
    out.family("t_info", "gauge", help_text, [(label_block(("name",), (value,)), 1)])
    fam = _families(out.text())["t_info"]
    assert fam.documentation == help_text
    assert [s.labels for s in fam.samples] == [{"name": value}]


# -- values -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, text",
    [
        (0, "0"),
        (1, "1"),
        (20971520, "20971520"),
        (20971520.0, "20971520.0"),
        (1.0, "1.0"),
        (0.08, "0.08"),
        (1e-06, "1e-06"),
        (1.8e18, "1.8e+18"),
        (float(2**53 + 2), "9007199254740994.0"),
        (0.1 + 0.2, "0.30000000000000004"),
        (-2.5, "-2.5"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
        (float("inf"), "+Inf"),
        (float("-inf"), "-Inf"),
        (True, "1.0"),
    ],
)
def test_values_are_written_exactly(value, text):
    assert format_value(value) == text
    if not math.isnan(value):
        assert float(text.replace("Inf", "inf")) == value


@settings(max_examples=500)
@given(st.floats() | st.integers(min_value=-(2**53), max_value=2**53))
def test_any_value_parses_back_to_the_same_float(value):
    out = Exposition()
    out.family("t_value", "gauge", "v", [("", value)])
    parsed = _families(out.text())["t_value"].samples[0].value
    assert (math.isnan(parsed) and math.isnan(value)) or parsed == float(value)


# -- layout, against generate_latest ------------------------------------------------------------


def test_gauges_and_counters_are_written_as_generate_latest_writes_them():
    # Where the two agree: float values below 1e6 (generate_latest switches to exponents there)
    # and label names in alphabetical order (generate_latest sorts them; we keep the caller's).
    awkward = 'vm "a" \\ b\nc'
    g = GaugeMetricFamily("t_latency_seconds", 'Latency with "quotes", C:\\path and\na newline.', labels=["disk", "vm"])
    g.add_metric(["scsi0:1", awkward], 0.0005)
    g.add_metric(["scsi0:2", "plain"], float("nan"))
    g.add_metric(["scsi0:3", "plain"], float("inf"))
    c = CounterMetricFamily("t_read_bytes", "Bytes read.", labels=["disk", "vm"])
    c.add_metric(["scsi0:1", awkward], 123456.0)
    up = GaugeMetricFamily("t_up", "1 if up.", value=1.0)
    empty = GaugeMetricFamily("t_error_info", "Absent when up.", labels=["cause"])
    theirs = _generate_latest(g, c, up, empty)

    rows = [
        label_block(("disk", "vm"), ("scsi0:1", awkward)),
        label_block(("disk", "vm"), ("scsi0:2", "plain")),
        label_block(("disk", "vm"), ("scsi0:3", "plain")),
    ]
    out = Exposition()
    out.family(
        "t_latency_seconds",
        "gauge",
        'Latency with "quotes", C:\\path and\na newline.',
        [(rows[0], 0.0005), (rows[1], float("nan")), (rows[2], float("inf"))],
    )
    out.family("t_read_bytes_total", "counter", "Bytes read.", [(rows[0], 123456.0)])
    up_family = Family("t_up", "gauge", "1 if up.")
    up_family.add("", 1.0)
    out.add(up_family)
    out.family("t_error_info", "gauge", "Absent when up.")
    assert out.text() == theirs
    assert out.render() == theirs.encode()
    assert out.text() == theirs, "render() keeps the text"


def test_where_values_are_written_differently_from_generate_latest_they_parse_the_same():
    g = GaugeMetricFamily("t_bytes", "b", labels=["k"])
    ours = Exposition()
    rows = []
    for i, value in enumerate((20971520.0, 1048576.0, 1, 7)):  # exponents; ints
        g.add_metric([str(i)], value)
        rows.append((f'k="{i}"', value))
    ours.family("t_bytes", "gauge", "b", rows)
    theirs = _generate_latest(g)
    assert ours.text() != theirs
    assert 't_bytes{k="0"} 2.097152e+07' in theirs and 't_bytes{k="0"} 20971520.0' in ours.text()
    assert 't_bytes{k="2"} 1.0' in theirs and 't_bytes{k="2"} 1\n' in ours.text()
    parsed = [[(s.labels, s.value) for s in _families(t)["t_bytes"].samples] for t in (ours.text(), theirs)]
    assert parsed[0] == parsed[1]


def test_gauge_histograms_are_written_as_generate_latest_writes_them():
    bounds = (0.001, 0.002, 0.005, float("inf"))
    h = GaugeHistogramMetricFamily("t_read_latency_seconds", "Recent window\nof \\ reads.", labels=["disk"])
    h.add_metric(["scsi0:1"], [("0.001", 3.0), ("0.002", 5.0), ("0.005", 5.0), ("+Inf", 6.0)], 0.0125)
    h.add_metric(['a"b'], [("0.001", 0.0), ("0.002", 0.0), ("0.005", 0.0), ("+Inf", 0.0)], 0.0)
    theirs = _generate_latest(h)

    ours = GaugeHistogram("t_read_latency_seconds", "Recent window\nof \\ reads.")
    ours.add('disk="scsi0:1"', bounds, [3.0, 2.0, 0.0, 1.0], 0.0125)  # per bucket, not cumulative
    ours.add(label_block(("disk",), ('a"b',)), list(bounds), [0.0] * 4, 0.0)
    assert ours.text() == theirs
    assert "# TYPE t_read_latency_seconds histogram\n" in theirs
    assert "# TYPE t_read_latency_seconds_gcount gauge\n" in theirs


def test_gauge_histogram_bounds_are_exact_and_an_empty_label_block_writes_only_le():
    mib = 1024 * 1024
    hist = GaugeHistogram("t_size_bytes", "Sizes.")
    hist.add("", (4096, mib, float("inf")), [1.0, 2.0, 0.5], 9000.0)
    hist.add("", (1, 2), [1.0, 1.0], 3.0)  # other bounds in the same family: written from their own list
    assert hist.buckets.lines == [
        't_size_bytes_bucket{le="4096.0"} 1.0\n',
        't_size_bytes_bucket{le="1.048576e+06"} 3.0\n',  # as client_python and client_golang write it
        't_size_bytes_bucket{le="+Inf"} 3.5\n',
        't_size_bytes_bucket{le="1.0"} 1.0\n',
        't_size_bytes_bucket{le="2.0"} 2.0\n',
    ]
    assert hist.gcount.lines == ["t_size_bytes_gcount 3.5\n", "t_size_bytes_gcount 2.0\n"]
    assert hist.gsum.lines == ["t_size_bytes_gsum 9000.0\n", "t_size_bytes_gsum 3.0\n"]


def _client_python_bucket_lines(name: str, bounds: tuple[float, ...], observations: list[float]) -> list[str]:
    """The ``_bucket`` lines prometheus_client itself writes for a Histogram with these finite bounds,
    ``le`` formatted by the library (not by the caller, as with GaugeHistogramMetricFamily). The
    label is ``disk``: generate_latest sorts label names, we keep the caller's order then ``le``."""
    registry = CollectorRegistry()
    hist = Histogram(name, "h", ["disk"], buckets=bounds, registry=registry)
    child = hist.labels("scsi0:1")
    for value in observations:
        child.observe(value)
    return [
        line + "\n" for line in generate_latest(registry).decode().splitlines() if line.startswith(f"{name}_bucket")
    ]


def _ours(name: str, bounds: tuple[float, ...], observations: list[float]) -> list[str]:
    edges = list(bounds) + [math.inf]
    counts = [0.0] * len(edges)
    for value in observations:
        counts[bisect_left(edges, value)] += 1.0  # le is inclusive: a value on a bound counts there
    hist = GaugeHistogram(name, "h")
    hist.add('disk="scsi0:1"', edges, counts, sum(observations))
    return hist.buckets.lines


@pytest.mark.parametrize(
    "name, bounds",
    [
        ("stargate_vdisk_read_size_bytes", SIZE_BOUNDS[:-1]),
        ("stargate_vdisk_read_latency_seconds", LATENCY_BOUNDS[:-1]),
        ("t_seconds", LATENCY_EDGES_SECONDS),
        ("t_bytes", (1e6, 1048576.0, 20971520.0, 1.5e9, 1e16, 1e22)),
    ],
)
def test_bucket_lines_are_what_prometheus_client_writes_for_the_same_buckets(name, bounds):
    observations = [b for b in bounds for _ in range(2)] + [bounds[-1] * 2]  # on every bound, one above
    theirs = _client_python_bucket_lines(name, bounds, observations)
    assert _ours(name, bounds, observations) == theirs
    if name == "stargate_vdisk_read_size_bytes":
        assert f'{name}_bucket{{disk="scsi0:1",le="1.048576e+06"}} 14.0\n' in theirs


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.floats(min_value=1e-12, max_value=1e300, allow_nan=False, allow_infinity=False),
        min_size=1,
        max_size=6,
        unique=True,
    )
)
def test_any_bucket_bound_is_written_as_prometheus_client_writes_it(bounds):
    bounds = tuple(sorted(bounds))
    observations = list(bounds)
    assert _ours("t_x", bounds, observations) == _client_python_bucket_lines("t_x", bounds, observations)


# -- promtool -----------------------------------------------------------------------------------


def test_sample_exposition_passes_promtool_and_parses_back():
    awkward = 'vm "quoted" \\ back\nslash'
    out = Exposition()
    out.family("t_up", "gauge", "help with \\ and\nnewline", [("", 1)])
    out.family("t_empty_info", "gauge", "no samples, HELP and TYPE still written")
    out.family(
        "t_bytes_total",
        "counter",
        "bytes",
        [
            (label_block(("vm", "disk"), (awkward, "scsi0:1")), 10 * 400 * 2**20),
            (label_block(("vm", "disk"), ("plain", "nvme0:0")), 0.1 + 0.2),
        ],
    )
    out.family(
        "t_ratio",
        "gauge",
        "special values",
        [('k="nan"', float("nan")), ('k="inf"', float("inf")), ('k="-inf"', float("-inf")), ('k="big"', 1.8e18)],
    )
    hist = GaugeHistogram("t_latency_seconds", "recent window")
    hist.add(label_block(("vm",), (awkward,)), (0.001, 0.01, float("inf")), [1.0, 0.0, 2.0], 0.5)
    out.add(hist)
    out.append_text("# HELP t_kept kept from an earlier probe\n# TYPE t_kept gauge\nt_kept 2.0\n")
    text = out.render().decode()
    assert text.count("# TYPE") == 8
    result = promtool_check_metrics(text)
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    fams = _families(text)
    assert fams["t_up"].documentation == "help with \\ and\nnewline"
    assert {s.labels["vm"]: s.value for s in fams["t_bytes"].samples} == {awkward: 4194304000, "plain": 0.1 + 0.2}
    buckets = [(s.labels["le"], s.value) for s in fams["t_latency_seconds"].samples]
    assert buckets == [("0.001", 1.0), ("0.01", 1.0), ("+Inf", 3.0)]
    assert [s.labels for s in fams["t_latency_seconds"].samples] == [{"vm": awkward, "le": le} for le, _ in buckets]
    assert fams["t_kept"].samples[0].value == 2.0


def test_a_lone_surrogate_in_a_label_value_is_escaped_not_a_failed_probe():
    """A VM or vdisk name from a source's JSON may hold a lone surrogate (a \\udcff escape): UTF-8
    cannot encode it, and the probe's answer failed with a 500 (issue 25). It is written \\xff
    (a byte os.fsdecode could not decode) or \\ud800 (any other), the rest unchanged."""
    from ioparallax.exporters.common.exposition import Exposition, printable

    assert printable("plain") == "plain" and printable("été") == "été"
    assert printable("a\udcffb\ud800") == "a\\xffb\\ud800"
    exp = Exposition()
    exp.family("src_vm_info", "gauge", "VMs.", [(label_block(["vm"], ["db\udcff\ud800"]), 1)])
    body = exp.render().decode("utf-8")
    assert 'src_vm_info{vm="db\\\\xff\\\\ud800"} 1' in body
    assert promtool_check_metrics(body).returncode == 0


def test_write_families_writes_what_exposition_writes():
    from ioparallax.exporters.common.exposition import Exposition, Family, GaugeHistogram, write_families

    def families():
        up = Family("x_up", "gauge", "Up.")
        up.add("", 1.0)
        yield up
        h = GaugeHistogram("x_latency_seconds", "Latency\nwindow.")
        h.add('vdisk_id="1"', (0.001, float("inf")), (3.0, 1.0), 0.004)
        yield h
        yield Family("x_empty", "gauge", "No samples.")

    out = Exposition()
    out.add(*families())
    assert write_families(families()) == out.render()
    assert write_families(iter(())) == b""


def test_label_values_are_cut_at_the_shared_limit_and_counted():
    """Every exporter's label values (the probe writer's label_block and escape_label_value, the
    watch exporters' MetricFamilies) are cut at 1,024 characters: the start, '...' and a hash of
    the whole, so two long names sharing their start stay two series; each cut counted."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import GaugeMetricFamily

    from ioparallax.exporters.common import labels
    from ioparallax.exporters.common.exposition import escape_label_value, label_block
    from ioparallax.exporters.common.families import MetricFamilies

    a, b = "vm-" + "a" * 5000 + "1", "vm-" + "a" * 5000 + "2"
    before = labels.truncated()
    ca, cb = escape_label_value(a), escape_label_value(b)
    assert len(ca) == len(cb) == labels.MAX_LABEL_VALUE_CHARS and ca != cb
    assert ca.startswith("vm-aaa") and re.fullmatch(r"vm-a{1008}\.\.\.[0-9a-f]{10}", ca)
    assert label_block(("vm", "disk"), (a, "scsi0:1")) == f'vm="{ca}",disk="scsi0:1"'
    exact = "x" * labels.MAX_LABEL_VALUE_CHARS
    assert escape_label_value(exact) == exact  # at the limit: whole, not counted
    fams = MetricFamilies()
    fams.gauge("fio_job_info", "x", ["job"], [b], 1)
    [fam] = list(fams)
    assert fam.samples[0].labels["job"] == cb
    assert labels.truncated() - before == 4
    registry = CollectorRegistry()
    registry.register(labels.TruncationCollector("fio-exporter"))
    text = generate_latest(registry).decode()
    assert f"fio_exporter_label_values_truncated_total {float(labels.truncated())}" in text
    assert isinstance(fam, GaugeMetricFamily)
