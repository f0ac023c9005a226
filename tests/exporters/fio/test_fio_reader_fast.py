"""The reader's fast paths (msgspec for a whole document, typed decoding that checks numbers as it
decodes, numbers checked a block at a time, known keys remembered) give exactly what the
field-by-field path gives, on real fio output, and reject what it rejects."""

from __future__ import annotations

import json

import pytest

from ioparallax.exporters.fio import parse, reader
from ioparallax.exporters.fio.parse import InvalidValue, parse_document
from ioparallax.exporters.fio.reader import read_text


@pytest.fixture
def slow_path(monkeypatch):
    """Every block goes the field-by-field way, every key is checked anew."""
    monkeypatch.setattr(parse, "_fine", lambda *a, **k: False)
    monkeypatch.setattr(parse, "_PERCENTILE_KEYS", {})
    monkeypatch.setattr(parse, "_BIN_KEYS", set())
    monkeypatch.setattr(parse, "_KNOWN_KEYS_LIMIT", 0)
    monkeypatch.setattr(parse, "_msgspec_decode", _refuse)
    monkeypatch.setattr(parse, "_typed_decode", _refuse)


def _refuse(raw: bytes) -> None:
    raise parse.msgspec.DecodeError("refused (test)")


@pytest.mark.parametrize("fixture", ["jsonplus_result", "plain_json_result", "status_stream", "unified_gtod_result"])
def test_fast_and_field_by_field_paths_give_the_same_records(request, fixture, monkeypatch):
    text = request.getfixturevalue(fixture).read_text()
    fast = read_text(text)
    fast_again = read_text(text)  # with the keys remembered from the first read
    request.getfixturevalue("slow_path")
    slow = read_text(text)
    assert fast.records and fast.records == slow.records == fast_again.records
    assert fast.counts == slow.counts


def _record(jsonplus_result) -> dict:
    return json.loads(jsonplus_result.read_text())


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("read", "total_ios"), -5, "jobs[0].read.total_ios = -5: negative"),
        (("read", "iops"), float("nan"), "jobs[0].read.iops = nan: not a finite number"),
        (("read", "clat_ns", "mean"), 2.0**65, "jobs[0].read.clat_ns.mean"),
        (("read", "clat_ns", "N"), -1, "jobs[0].read.clat_ns.N = -1: negative"),
        (("ctx",), 2**64 + 1, "jobs[0].ctx"),
        (("usr_cpu",), float("inf"), "jobs[0].usr_cpu = inf"),
    ],
)
def test_a_bad_number_in_a_block_is_named_as_before(jsonplus_result, path, value, message):
    doc = _record(jsonplus_result)
    parse_document(doc)  # fine as fio wrote it (and its keys now remembered)
    target = doc["jobs"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InvalidValue, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_document(doc)


def test_a_bool_or_string_where_a_number_goes_reads_as_absent_as_before(jsonplus_result):
    doc = _record(jsonplus_result)
    doc["jobs"][0]["read"]["total_ios"] = True
    doc["jobs"][0]["ctx"] = "12"
    job = parse_document(doc).jobs[0]
    assert job.directions["read"].total_ios == 0 and job.ctx is None


def test_remembered_bin_keys_do_not_let_a_bad_key_or_count_through(jsonplus_result):
    doc = _record(jsonplus_result)
    parse_document(doc)
    bins = doc["jobs"][0]["read"]["clat_ns"]["bins"]
    assert bins and set(bins) <= parse._BIN_KEYS
    key = next(iter(bins))
    bins[key] = -3
    with pytest.raises(InvalidValue, match="negative"):
        parse_document(doc)
    bins[key] = "3"
    with pytest.raises(InvalidValue, match="not a count"):
        parse_document(doc)
    doc["jobs"][0]["read"]["clat_ns"]["bins"] = {"": 1}  # an empty key alone: not a latency
    with pytest.raises(InvalidValue, match="not a latency in ns"):
        parse_document(doc)


def test_msgspec_and_the_json_module_decode_a_record_alike(jsonplus_result):
    raw = jsonplus_result.read_bytes()
    assert parse.msgspec.json.decode(raw) == json.loads(raw)
    found, trailing = reader._decode(raw)
    assert found == [json.loads(raw)] and not trailing


@pytest.mark.parametrize(
    "raw",
    [
        b'{"jobs": [], "x": NaN}',  # msgspec refuses NaN: the json module's way reads it
        b'{"jobs": [], "x": 1e400}',  # infinity: likewise
        b'{"jobs": [], "x": 123456789012345678901234567890}',  # beyond 64 bits: an int either way
        b'{"jobs": []}\n{"jobs": []}',  # two documents
        b'{"jobs": []} trailing',
    ],
)
def test_what_msgspec_refuses_is_decoded_by_the_json_module(raw):
    text = raw.decode()
    expected = []
    pos = 0
    dec = json.JSONDecoder()
    while True:
        doc, end = dec.raw_decode(text, pos)
        expected.append(doc)
        rest = text[end:].lstrip()
        if not rest.startswith("{"):
            break
        pos = len(text) - len(rest)
    found, trailing = reader._decode(raw)
    assert repr(found) == repr(expected)  # repr: NaN == NaN, and int stays int
    assert trailing == raw.endswith(b"trailing")


# ---- typed decoding (read_text and the exporter's tailer): numbers checked by msgspec


def _text(doc: dict) -> str:
    """A document written back in fio's pretty style (NaN and Infinity as the json module writes
    them: fio cannot, so they are what a damaged file holds)."""
    return json.dumps(doc, indent=2, separators=(",", " : ")) + "\n"


def test_typed_and_dict_documents_give_the_same_records(request, jsonplus_result, status_stream):
    for path in (jsonplus_result, status_stream):
        raw = path.read_bytes()
        stream = reader.DocumentStream(typed=True)
        typed = stream.feed(raw) + stream.finish()
        assert typed and all(type(d) is parse.FioDocument for d in typed)
        plain = reader.DocumentStream()
        dicts = plain.feed(raw) + plain.finish()
        assert [parse_document(d) for d in typed] == [parse_document(d) for d in dicts]


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("read", "total_ios"), -5, "jobs[0].read.total_ios = -5: negative"),
        (("read", "iops"), float("nan"), "jobs[0].read.iops = nan: not a finite number"),
        (("read", "bw_bytes"), float("inf"), "jobs[0].read.bw_bytes = inf: not a finite number"),
        (("read", "clat_ns", "mean"), 2.0**65, "jobs[0].read.clat_ns.mean"),
        (("read", "clat_ns", "N"), -1, "jobs[0].read.clat_ns.N = -1: negative"),
        (("read", "clat_ns", "percentile", "99.000000"), -7, "percentile['99.000000'] = -7: negative"),
        (("ctx",), 2**64 + 1, "jobs[0].ctx"),
        (("port",), 70000, "jobs[0].port = 70000: above 65535"),
    ],
)
def test_read_text_rejects_a_bad_number_with_the_same_message(jsonplus_result, path, value, message):
    doc = _record(jsonplus_result)
    read_text(_text(doc))  # fine as fio wrote it
    target = doc["jobs"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InvalidValue, match=message.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        read_text(_text(doc))


def test_read_text_rejects_a_bad_bin_count_even_with_its_key_remembered(jsonplus_result):
    doc = _record(jsonplus_result)
    read_text(_text(doc))
    bins = doc["jobs"][0]["read"]["clat_ns"]["bins"]
    key = next(iter(bins))
    assert key in parse._BIN_KEYS
    bins[key] = -3
    with pytest.raises(InvalidValue, match=r"bins\['%s'\] = -3: negative" % key):
        read_text(_text(doc))


def test_typed_bounds_hand_what_they_cannot_decide_to_the_dict_way(jsonplus_result):
    """Counts between 2^63 and 2^64 (beyond msgspec's int64 bounds, within fio's uint64) and a
    bool or string where a number goes read as the field-by-field way reads them."""
    doc = _record(jsonplus_result)
    doc["jobs"][0]["read"]["io_bytes"] = 2**64
    doc["jobs"][0]["read"]["iops"] = 2**63 + 4096
    doc["jobs"][0]["read"]["total_ios"] = True
    doc["jobs"][0]["ctx"] = "12"
    job = read_text(_text(doc)).records[0].jobs[0]
    assert job.directions["read"].io_bytes == 2**64
    assert job.directions["read"].iops == float(2**63 + 4096)
    assert job.directions["read"].total_ios == 0 and job.ctx is None
    assert read_text(_text(doc)).records == [parse_document(doc)]


def test_keys_never_seen_are_checked_on_a_typed_document(jsonplus_result, monkeypatch):
    """A typed document with percentile or bin keys not yet proven fine goes the dict way, which
    checks them: a bad key is rejected, good ones are remembered and the records are the same."""
    monkeypatch.setattr(parse, "_PERCENTILE_KEYS", {})
    monkeypatch.setattr(parse, "_BIN_KEYS", set())
    doc = _record(jsonplus_result)
    first = read_text(_text(doc)).records
    assert parse._PERCENTILE_KEYS and parse._BIN_KEYS  # remembered by the dict way
    assert first == read_text(_text(doc)).records == [parse_document(doc)]
    doc["jobs"][0]["read"]["clat_ns"]["bins"]["12x"] = 1
    with pytest.raises(InvalidValue, match="not a latency in ns"):
        read_text(_text(doc))
    del doc["jobs"][0]["read"]["clat_ns"]["bins"]["12x"]
    doc["jobs"][0]["read"]["clat_ns"]["percentile"]["101.000000"] = 5
    with pytest.raises(InvalidValue, match="not a percentile"):
        read_text(_text(doc))
