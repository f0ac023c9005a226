"""The DiskSPD reader on DiskSPD's own output (its unit test's expected document) and on runs laid
out as DiskSPD 2.2 writes them: totals, profile, latency, -D buckets, encodings, versions."""

from __future__ import annotations

import codecs
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ioparallax.exporters.diskspd.document import write_document
from ioparallax.exporters.diskspd.parse import (
    DiskspdError,
    Forbidden,
    InvalidValue,
    NotDiskspd,
    TooLarge,
    Truncated,
    parse_bytes,
    targets_of,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
UNITTEST = FIXTURES / "diskspd-2.2-xmlresultparser-unittest.xml"
OLTP = FIXTURES / "vm-oltp-sh-z10m-utf16.xml"
SEED = FIXTURES / "vm-seed-default-pattern.xml"
TWO = FIXTURES / "vm-two-targets-same-disk.xml"


def test_diskspd_own_unit_test_document_parses_to_its_totals():
    r = parse_bytes(UNITTEST.read_bytes())
    assert (r.computer_name, r.version, r.version_date, r.run_time) == ("", "2.2.0", "2024/6/3", None)
    (prof,) = r.profiles
    assert (prof.duration_s, prof.warmup_s, prof.cooldown_s, prof.io_bucket_duration_ms) == (10, 5, 0, 1000)
    assert prof.calculate_iops_stddev and not prof.measure_latency
    (t,) = prof.targets
    assert (t.path, t.block_size, t.request_count, t.write_ratio, t.threads_per_file) == (
        "testfile1.dat",
        65536,
        2,
        0,
        1,
    )
    assert t.disable_os_cache and t.write_through and t.write_pattern == "sequential"
    assert (t.stride_size, t.random_alignment, t.access) == (65536, None, "sequential")
    assert (t.throughput, t.throughput_unit) == (1000, "IOPS")
    (span,) = r.spans
    assert (span.test_time_s, span.thread_count, span.proc_count) == (120.0, 1, 3)
    assert span.cpu is not None and (span.cpu.usage_percent, span.cpu.idle_percent) == (18.33, 81.67)
    assert len(span.iops.buckets) == 10 and span.iops.buckets[-1].sample_ms == 10000
    (tr,) = targets_of(prof, span)
    assert (tr.read_count, tr.read_bytes, tr.write_count, tr.write_bytes, tr.file_size) == (
        6,
        4194304,
        10,
        2097152,
        10485760,
    )
    assert tr.iops.read_stddev == 0.0 and tr.iops.write_stddev is None and tr.iops.total_stddev == 0.0


def test_utf16_with_bom_run_totals_latency_and_buckets():
    data = OLTP.read_bytes()
    assert data.startswith(codecs.BOM_UTF16_LE)
    r = parse_bytes(data)
    assert r.encoding == "utf-16-le" and r.computer_name == "SQLVM01"
    assert r.run_time == 1795165200.0  # 2026/11/20 09:00:00 UTC
    (prof,), (span,) = r.profiles, r.spans
    (t,) = prof.targets
    assert (t.write_pattern, t.random_data_size, t.random_alignment, t.access) == ("random", 10485760, 8192, "random")
    assert not t.os_cache
    (tr,) = targets_of(prof, span)
    assert tr.threads == 4
    assert tr.read_count == sum(th.read_count for th in span.threads)
    # each thread's count is its -D buckets' IOPS x 5 s, to the rounding of DiskSPD's %.0f IOPS
    # (at most 0.5 IOPS x 5 s per bucket)
    per_thread = [sum(b.read * 5 for b in th.iops.buckets) for th in span.threads]
    assert abs(tr.read_count - sum(per_thread)) <= 0.5 * 5 * 12 * 4
    assert tr.read_bytes == tr.read_count * 8192
    assert tr.latency.read_avg_ms == pytest.approx(0.92) and tr.latency.write_avg_ms == pytest.approx(1.85)
    assert len(tr.iops.buckets) == 12  # 60 s / 5 s, threads merged interval by interval
    assert sum(b.read for b in tr.iops.buckets) * 5 == pytest.approx(sum(per_thread))
    ps = {p.percentile: p for p in span.latency_percentiles}
    assert len(ps) == 108 and ps[0.0].read_ms < ps[50.0].read_ms < ps[99.9].read_ms < ps[100.0].read_ms


def test_two_targets_with_the_same_path_are_told_apart_by_thread_position():
    r = parse_bytes(TWO.read_bytes())
    (prof,), (span,) = r.profiles, r.spans
    data, log = targets_of(prof, span)
    assert (data.index, data.path, data.threads, data.profile.block_size) == (0, "#1", 4, 8192)
    assert (log.index, log.path, log.threads, log.profile.block_size) == (1, "#1", 1, 32768)
    assert log.read_count == 0 and log.write_bytes == log.write_count * 32768
    assert data.write_bytes == data.write_count * 8192


def test_pooled_latency_of_threads_is_weighted_by_their_counts():
    r = parse_bytes(SEED.read_bytes())
    span = r.spans[0]
    a, b = span.threads
    # thread a: 100 reads all at 1 ms; thread b: 300 reads all at 3 ms -> the union: mean 2.5 ms,
    # standard deviation sqrt((100 x 1 + 300 x 9) / 400 - 2.5^2) = sqrt(0.75)
    a = replace(a, read_count=100, latency=replace(a.latency, read_avg_ms=1.0, read_stdev_ms=0.0))
    b = replace(b, read_count=300, latency=replace(b.latency, read_avg_ms=3.0, read_stdev_ms=0.0))
    (tr,) = targets_of(r.profiles[0], replace(span, threads=(a, b)))
    assert tr.read_count == 400
    assert tr.latency.read_avg_ms == pytest.approx(2.5)
    assert tr.latency.read_stdev_ms == pytest.approx(0.75**0.5)


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: t.encode("utf-8"),
        lambda t: codecs.BOM_UTF8 + t.encode("utf-8"),
        lambda t: codecs.BOM_UTF16_LE + t.encode("utf-16-le"),
        lambda t: codecs.BOM_UTF16_BE + t.encode("utf-16-be"),
        lambda t: t.encode("utf-16-le"),  # no BOM
        lambda t: t.encode("cp1252"),  # cmd.exe's > on a western Windows: the ANSI code page
    ],
    ids=["utf8", "utf8-bom", "utf16le-bom", "utf16be-bom", "utf16le-no-bom", "cp1252"],
)
def test_every_encoding_gives_the_same_result(encode):
    text = SEED.read_text().replace("WINVM-07", "Müller-PC")
    r = parse_bytes(encode(text))
    assert r.computer_name == "Müller-PC"
    assert r.spans == parse_bytes(SEED.read_bytes()).spans


def test_xml_declaration_and_warning_lines_before_results_are_skipped():
    text = 'WARNING: Could not set privileges for setting valid file size\r\n<?xml version="1.0"?>\n' + SEED.read_text()
    r = parse_bytes(text.encode())
    assert r.leading_text_bytes > 0 and r.computer_name == "WINVM-07"


def test_old_disableallcache_is_unbuffered():
    text = UNITTEST.read_text().replace(
        "<DisableOSCache>true</DisableOSCache>\n            <WriteThrough>true</WriteThrough>",
        "<DisableAllCache>true</DisableAllCache>\n            <DisableOSCache>false</DisableOSCache>",
    )
    (t,) = parse_bytes(text.encode()).profiles[0].targets
    assert not t.os_cache and t.write_through


def test_interrupted_time_span_has_an_error_and_no_numbers():
    text = (
        UNITTEST.read_text().split("  <TimeSpan>\n    <TestTimeSeconds>")[0]
        + "  <TimeSpan>\n    <Error>The test was interrupted before the measurements began. No results are displayed.</Error>\n  </TimeSpan>\n</Results>"
    )
    (span,) = parse_bytes(text.encode()).spans
    assert span.error.startswith("The test was interrupted") and span.threads == ()


def test_round_trip_through_the_writer():
    for f in (UNITTEST, OLTP, SEED, TWO):
        r = parse_bytes(f.read_bytes())
        again = parse_bytes(write_document(r).encode())
        assert (again.profiles, again.spans, again.computer_name) == (r.profiles, r.spans, r.computer_name)


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda t: t[: len(t) // 2], Truncated, "ends before </Results>"),
        (lambda t: t[:6], Truncated, "opening <Results>"),
        (lambda t: "", Truncated, "empty"),
        (lambda t: "Command Line: diskspd.exe -b8K\n\nInput parameters:\n", NotDiskspd, "-Rxml"),
        (lambda t: "<Other><System/></Other>", NotDiskspd, "no <Results>"),
        (lambda t: "<Results><Foo/></Results>", NotDiskspd, "without <System>"),
        (lambda t: t.replace("<ReadCount>", "<ReadCount>-", 1), InvalidValue, "ReadCount = '-"),
        (lambda t: t.replace("<ReadBytes>", "<ReadBytes>9" + "9" * 30, 1), InvalidValue, "beyond 2^64"),
        (lambda t: t.replace("<TestTimeSeconds>120.00", "<TestTimeSeconds>nan", 1), InvalidValue, "not a finite"),
        (lambda t: t.replace("<WriteRatio>0", "<WriteRatio>150", 1), InvalidValue, "percentage above 100"),
        (lambda t: t.replace("</Results>", "</Results><Results/>"), DiskspdError, "not well-formed"),
        (
            lambda t: (
                '<!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>'
                + t.replace("testfile1.dat", "&b;")
            ),
            Forbidden,
            "DOCTYPE",
        ),
        (
            lambda t: '<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>' + t.replace("testfile1.dat", "&x;"),
            Forbidden,
            "DOCTYPE",
        ),
    ],
    ids=[
        "cut-half",
        "cut-in-root-tag",
        "empty",
        "text-output",
        "other-root",
        "no-system-no-profile",
        "negative",
        "beyond-2-64",
        "nan",
        "write-ratio-150",
        "trailing-garbage",
        "entity-bomb",
        "external-entity",
    ],
)
def test_hostile_documents_raise_a_clear_error(make, error, words):
    with pytest.raises(error) as exc:
        parse_bytes(make(UNITTEST.read_text()).encode())
    assert words in str(exc.value)


def test_too_large_is_refused_before_decoding():
    with pytest.raises(TooLarge, match="above the bound of 1024"):
        parse_bytes(UNITTEST.read_bytes(), max_bytes=1024)


def test_lxml_depth_limit_stands_without_a_doctype():
    deep = "<Results><System/>" + "<a>" * 300_000 + "</a>" * 300_000 + "</Results>"
    with pytest.raises(DiskspdError):
        parse_bytes(deep.encode())


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_give_a_result_or_a_diskspd_error(data):
    try:
        parse_bytes(b"<Results><System><ComputerName>" + data + b"</ComputerName></System><Profile/></Results>")
    except DiskspdError:
        pass
