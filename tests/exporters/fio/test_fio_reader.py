"""The reader against real fio 3.33 output of every form, plus injected and garbled text."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ioparallax.exporters.fio.parse import ALL_CLIENTS, NotFioDocument, parse_document
from ioparallax.exporters.fio.reader import DocumentStream, read_text
from tests.exporters.fio.conftest import decode_all


def test_jsonplus_result_jobs_by_position_with_merged_options(jsonplus_result):
    text = jsonplus_result.read_text()
    raw = json.loads(text)
    result = read_text(text)
    assert result.counts.non_json_lines == 0 and result.counts.corrupt_documents == 0
    [rec] = result.records
    assert rec.version == raw["fio version"]
    assert rec.timestamp == raw["timestamp_ms"] / 1000
    # numjobs=2 without group_reporting: the name repeats; the position tells the jobs apart
    assert [(j.jobid, j.name) for j in rec.jobs] == [(0, "rr"), (1, "rr"), (2, "sw")]
    for job, rj in zip(rec.jobs, raw["jobs"]):
        # global options are not repeated in the job by fio: merged here, the job's own win
        assert job.options == {**raw["global options"], **rj["job options"]}
        assert job.options["direct"] == "1" and job.options["ioengine"] == "libaio"
        for d in ("read", "write", "trim"):
            s, r = job.directions[d], rj[d]
            assert (s.total_ios, s.io_bytes, s.iops, s.bw_bytes) == (
                r["total_ios"],
                r["io_bytes"],
                r["iops"],
                r["bw_bytes"],
            )
        assert job.job_runtime_ms == rj["job_runtime"]
        assert job.usr_cpu == rj["usr_cpu"] and job.sys_cpu == rj["sys_cpu"]
        assert job.iodepth_level == {k: float(v) for k, v in rj["iodepth_level"].items()}
    read = rec.jobs[0].directions["read"]
    rr = raw["jobs"][0]["read"]["clat_ns"]
    assert read.clat is not None and read.clat.count == rr["N"] > 0
    assert read.clat.bins == rr["bins"] and sum(read.clat.bins.values()) == rr["N"]
    assert dict(read.clat.percentiles)[0.99] == rr["percentile"]["99.000000"]
    # the write-only job timed no reads: its read latency is absent, not zero
    assert rec.jobs[2].directions["read"].clat is None
    assert rec.jobs[2].directions["write"].clat.count == raw["jobs"][2]["write"]["clat_ns"]["N"]


def test_plain_json_has_no_bins(plain_json_result):
    [rec] = read_text(plain_json_result.read_text()).records
    clat = rec.jobs[0].directions["write"].clat
    assert clat is not None and clat.bins is None and clat.percentiles
    assert rec.global_options == {}  # command-line-only job: no global options block
    assert rec.jobs[0].options["rw"] == "randwrite"


def test_status_stream_records_are_cumulative(status_stream):
    text = status_stream.read_text()
    expected = decode_all(text)
    result = read_text(text)
    assert len(result.records) == len(expected) >= 3
    ios = [r.jobs[0].directions["read"].total_ios for r in result.records]
    assert ios == [d["jobs"][0]["read"]["total_ios"] for d in expected]
    assert ios == sorted(ios) and ios[0] < ios[-1]
    runtimes = [r.jobs[0].job_runtime_ms for r in result.records]
    assert runtimes == sorted(runtimes)
    # bins are cumulative too. fio reads a running job's bins and N at slightly different
    # moments, so in interim records they may differ by the few I/Os completed in between; in the
    # last record (the job has stopped) they are equal.
    for r in result.records:
        clat = r.jobs[0].directions["read"].clat
        assert abs(sum(clat.bins.values()) - clat.count) <= max(3, clat.count // 1000)
    last = result.records[-1].jobs[0].directions["read"].clat
    assert sum(last.bins.values()) == last.count
    # eta is INT_MAX in early records: unknown, not a number of seconds
    assert expected[0]["jobs"][0]["eta"] == 2147483647
    assert result.records[0].jobs[0].eta_s is None
    assert result.records[-1].jobs[0].eta_s == 0


def test_unified_rw_reporting_and_gtod_reduce(unified_gtod_result):
    raw = json.loads(unified_gtod_result.read_text())
    [rec] = read_text(unified_gtod_result.read_text()).records
    job = rec.jobs[0]
    assert set(job.directions) == {"mixed"}
    mixed = job.directions["mixed"]
    assert mixed.total_ios == raw["jobs"][0]["mixed"]["total_ios"] > 0
    # gtod_reduce: fio reports N=0 and zeros; the reader says "absent"
    assert raw["jobs"][0]["mixed"]["clat_ns"]["N"] == 0
    assert mixed.clat is None and mixed.lat is None and mixed.slat is None


def test_note_line_on_stdout_is_skipped_and_counted(stdout_with_note):
    text = stdout_with_note.read_text()
    result = read_text(text)
    assert result.counts.non_json_lines == 1
    assert len(result.records) == 1 and result.records[0].jobs[0].name == "n"


def test_client_server_final_result(client_results):
    text = client_results["final"].read_text()
    raw = json.loads(text[text.index("{") :])
    [rec] = read_text(text).records
    assert rec.client_mode and rec.timestamp == raw["timestamp"]  # no timestamp_ms in client mode
    entries = [e for e in raw["client_stats"] if e["jobname"] != ALL_CLIENTS]
    assert [(j.jobid, j.name, j.host) for j in rec.jobs] == [
        (0, "cr", client_results["host"]),
        (1, "cr", client_results["host"]),
    ]
    for job, e in zip(rec.jobs, entries):
        assert job.directions["read"].total_ios == e["read"]["total_ios"]
        assert job.options["ioengine"] == "psync" and job.options["numjobs"] == "2"
    [agg] = rec.client_aggregates
    assert agg.name == ALL_CLIENTS and agg.options == {}
    assert rec.interim_snapshots == 0


def test_client_status_interval_keeps_the_last_snapshot(client_results):
    text = client_results["interim"].read_text()
    raw = json.loads(text[text.index("{") :])
    [rec] = read_text(text).records
    entries = [e for e in raw["client_stats"] if e["jobname"] != ALL_CLIENTS]
    assert len(entries) > 2, "fio appended no interim snapshots"
    assert len(rec.jobs) == 2 and rec.interim_snapshots == len(entries) // 2 - 1
    assert [j.directions["read"].total_ios for j in rec.jobs] == [e["read"]["total_ios"] for e in entries[-2:]]
    # The last snapshot is the final one: its runtime is the whole 3 s run (fio overshoots by a few
    # ms on a loaded machine), and it is the largest of all snapshots.
    assert [j.job_runtime_ms for j in rec.jobs] == [e["job_runtime"] for e in entries[-2:]]
    assert all(3000 <= j.job_runtime_ms < 3500 for j in rec.jobs)
    for pos, job in enumerate(rec.jobs):
        assert job.job_runtime_ms == max(e["job_runtime"] for e in entries[pos::2])


def _inject(text: str, lines: dict[int, str]) -> str:
    out = text.split("\n")
    for at in sorted(lines, reverse=True):
        out.insert(at, lines[at])
    return "\n".join(out)


def test_stream_with_injected_error_lines(status_stream):
    text = status_stream.read_text()
    expected = decode_all(text)
    n = text.count("\n")
    garbled = _inject(
        text,
        {
            0: "note: both iodepth >= 1 and synchronous I/O engine are selected",
            7: "fio: io_u error on file /dev/sdb: Input/output error: read offset=4096, buflen=4096",
            n // 2: "fio: pid=1234, err=5/file:io_u.c:1845, func=io_u error, error=Input/output error",
            n - 3: "note: inside the last document",
        },
    )
    result = read_text(garbled)
    assert result.counts.non_json_lines == 4
    assert result.counts.corrupt_documents == 0
    assert [r.jobs[0].directions["read"].total_ios for r in result.records] == [
        d["jobs"][0]["read"]["total_ios"] for d in expected
    ]


def test_cut_off_document_followed_by_a_new_run(status_stream):
    """fio killed mid-record, then a new run appends to the same file: the cut-off record is
    dropped and counted, every complete record survives."""
    text = status_stream.read_text()
    docs = decode_all(text)
    first_end = text.index("\n}\n") + 3
    cut = text[: first_end + (len(text) - first_end) // 3]  # a record cut off
    complete = cut.count("\n}\n")
    assert complete >= 1 and not cut.endswith("\n}\n")
    combined = cut + "\n" + text
    result = read_text(combined)
    assert result.counts.corrupt_documents == 1
    assert len(result.records) == complete + len(docs)
    ios = [r.jobs[0].directions["read"].total_ios for r in result.records]
    assert ios[complete:] == [d["jobs"][0]["read"]["total_ios"] for d in docs]


def test_incremental_feed_in_any_chunking_gives_the_same_records(status_stream):
    text = status_stream.read_text()
    whole = [r.jobs[0].directions["read"].total_ios for r in read_text(text).records]
    for size in (1, 7, 4096):
        stream = DocumentStream()
        docs = []
        for i in range(0, len(text), size):
            docs.extend(stream.feed(text[i : i + size]))
        docs.extend(stream.finish())
        assert [d["jobs"][0]["read"]["total_ios"] for d in docs] == whole
        assert stream.counts.non_json_lines == 0


def test_incomplete_document_waits_for_the_rest(status_stream):
    text = status_stream.read_text()
    end = text.index("\n}\n") + 3
    stream = DocumentStream()
    assert stream.feed(text[: end - 10]) == []
    assert stream.pending == end - 10
    assert len(stream.feed(text[end - 10 : end])) == 1
    assert stream.pending == 0


def test_not_fio_json_is_counted_not_fatal():
    with pytest.raises(NotFioDocument):
        parse_document({"hello": 1})
    result = read_text('{"hello": 1}\n[1, 2]\n')  # fio documents are objects: a list is a line
    assert result.records == [] and result.counts.not_fio_documents == 1
    assert result.counts.non_json_lines == 1


def test_empty_and_garbage_text():
    assert read_text("").records == []
    r = read_text("fio: something went wrong\n\n\x00\x01 binary\n")
    assert r.records == [] and r.counts.non_json_lines == 2


# ---- property test: the reader never fails and never loses a document between foreign lines

_foreign = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="{\n\r"), min_size=1, max_size=40
).filter(lambda s: s.strip() != "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_reader_survives_foreign_lines_and_chunking(data, status_stream_text):
    text, docs = status_stream_text
    lines = text.split("\n")
    # foreign lines anywhere outside documents, plus arbitrary garbage lines inside them that do
    # not look like JSON (they start with a letter)
    inserts = data.draw(
        st.dictionaries(
            st.integers(0, len(lines)),
            st.tuples(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCXYZ"), _foreign).map("".join),
            max_size=6,
        )
    )
    garbled = _inject(text, inserts)
    chunk = data.draw(st.integers(1, 5000))
    stream = DocumentStream()
    out = []
    for i in range(0, len(garbled), chunk):
        out.extend(stream.feed(garbled[i : i + chunk]))
    out.extend(stream.finish())
    assert [d["jobs"][0]["read"]["total_ios"] for d in out] == [d["jobs"][0]["read"]["total_ios"] for d in docs]
    assert stream.counts.non_json_lines == len(inserts)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_reader_never_raises_on_arbitrary_text(text):
    result = read_text(text)
    assert result.counts.documents >= len(result.records)


@pytest.fixture(scope="session")
def status_stream_text(status_stream):
    text = status_stream.read_text()
    return text, decode_all(text)


def test_compact_documents_one_per_line(status_stream):
    """A writer that emits one compact JSON document per line (e.g. a simulator using json.dumps
    without indent) is read the same way, incrementally."""
    docs = decode_all(status_stream.read_text())
    stream = DocumentStream()
    got = []
    for d in docs:
        got.extend(stream.feed(json.dumps(d) + "\n"))
    assert [g["jobs"][0]["read"]["total_ios"] for g in got] == [d["jobs"][0]["read"]["total_ios"] for d in docs]
