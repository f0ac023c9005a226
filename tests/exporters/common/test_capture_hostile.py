"""Hostile captures (issue 33): every way a ``.tar.gz`` handed to ``<exporter> replay`` or
``--replay`` can lie is a one-line error naming the file (exit 2), never a traceback, a hang or
memory without bound. Each archive is built here from a real capture of tests/captures/, changed
in one way: a long-name or PAX header claiming megabytes, a chain of them, corrupt deflate data
inside a member, a manifest too big, too deep or of the wrong types, a FIFO, ``-o`` to nowhere."""

from __future__ import annotations

import gzip
import io
import json
import os
import random
import tarfile
import zlib
from pathlib import Path
from typing import Any

import pytest

from ioparallax.exporters.common import capture as archive
from ioparallax.exporters.common.capture import CaptureError
from ioparallax.exporters.prism import capture as prism
from ioparallax.exporters.prism.cli import main as prism_main
from ioparallax.exporters.stargate import capture as stargate
from ioparallax.exporters.stargate.cli import main as stargate_main
from ioparallax.exporters.vcenter import capture as vcenter
from ioparallax.exporters.vcenter.cli import main as vcenter_main
from tests.support import without_waiting

CAPTURES = Path(__file__).parent.parent.parent / "captures"
#: (the exporter's capture module, its main(), a real capture of it)
EXPORTERS = {
    "stargate": (stargate, stargate_main, CAPTURES / "simulator-zero-heavy-2016.tar.gz"),
    "prism": (prism, prism_main, CAPTURES / "prism-simulator-noisy-neighbour.tar.gz"),
    "vcenter": (vcenter, vcenter_main, CAPTURES / "vcenter-simulator-postgres.tar.gz"),
}


def members(path: Path) -> list[tuple[str, bytes]]:
    with tarfile.open(path) as tar:
        out = []
        for m in tar:
            f = tar.extractfile(m)
            assert f is not None
            out.append((m.name, f.read()))
        return out


def tar_bytes(files: list[tuple[str, bytes]], before: list[tuple[tarfile.TarInfo, bytes]] = ()) -> bytes:
    """An uncompressed tar of ``files``, with raw ``before`` members (hostile headers) first."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in before:
            tar.addfile(info, io.BytesIO(data))
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def changed(
    exporter: str,
    tmp_path: Path,
    manifest: Any = None,
    raw_manifest: bytes | None = None,
    before: list[tuple[tarfile.TarInfo, bytes]] = (),
) -> Path:
    """The exporter's real capture, its manifest changed by ``manifest(dict) -> None`` or replaced by
    ``raw_manifest``, ``before`` members put first."""
    files = members(EXPORTERS[exporter][2])
    out = []
    for name, data in files:
        if name == archive.MANIFEST:
            if raw_manifest is not None:
                data = raw_manifest
            elif manifest is not None:
                doc = json.loads(data)
                manifest(doc)
                data = json.dumps(doc).encode()
        out.append((name, data))
    path = tmp_path / f"{exporter}-hostile.tar.gz"
    path.write_bytes(gzip.compress(tar_bytes(out, before), compresslevel=1))
    return path


def one_line_error(main, argv: list[str], capsys, *needles: str) -> str:
    """``main(argv)`` exits 2 with one line on stderr that holds every needle."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    for needle in needles:
        assert needle in err, err
    return err


def replay_error(exporter: str, path: Path, capsys, *needles: str) -> None:
    """``<exporter> replay FILE`` and the module's read() refuse the capture in one line naming it."""
    module, main, _ = EXPORTERS[exporter]
    one_line_error(main, ["replay", str(path)], capsys, str(path), *needles)
    with pytest.raises(CaptureError):
        module.read(str(path))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_the_real_captures_still_replay(exporter, tmp_path, capsys):
    """What the refusals below are measured against: the unchanged capture, rebuilt, replays."""
    module, main, _ = EXPORTERS[exporter]
    path = changed(exporter, tmp_path)
    assert main(["replay", str(path), "--check"]) == 0
    assert "as expected" in capsys.readouterr().out


# -------------------------------------------------------------------------------- the archive
def long_name(size: int, data: bytes = b"") -> tuple[tarfile.TarInfo, bytes]:
    """A GNU long-name header claiming ``size`` bytes (holding ``data``, zero-padded)."""
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = tarfile.GNUTYPE_LONGNAME, size
    return info, data.ljust(size, b"\0")


def pax_header(size: int) -> tuple[tarfile.TarInfo, bytes]:
    """A PAX extended header of ``size`` bytes (one long comment record)."""
    body = b"comment=" + b"x" * (size - 20) + b"\n"
    record = b"%d %s" % (len(body) + 8, body)
    record = b"%d %s" % (len(body) + len(str(len(record))) + 1, body)
    info = tarfile.TarInfo("./PaxHeaders/x")
    info.type, info.size = tarfile.XHDTYPE, len(record)
    return info, record


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("header", [long_name, pax_header], ids=["gnu-long-name", "pax"])
def test_an_extended_header_claiming_megabytes_is_refused_before_it_is_read(exporter, header, tmp_path, capsys):
    """tarfile reads a long name or a PAX header whole before anything else looks at it: a 2.7 MB
    archive whose long-name header claimed 600 MB took 1.2 GB and then replayed. 4 MB stands for
    the 600 here: before the fix the capture replayed (exit 0), the header read whole."""
    path = changed(exporter, tmp_path, before=[header(4 * 1024 * 1024)])
    replay_error(exporter, path, capsys, "extended header", f"over {archive.MAX_HEADER_BYTES}")


def test_extended_headers_count_against_the_capture_limit(tmp_path, monkeypatch, capsys):
    """Each header under its own limit, all together over the capture's: refused at the header."""
    monkeypatch.setattr(archive, "MAX_CAPTURE_BYTES", 100_000)
    headers = []
    for _ in range(4):  # four members, each preceded by a 60 KB long name: 240 KB of names
        info, data = long_name(60_000, b"n")
        member = tarfile.TarInfo("x")
        headers += [(info, data), (member, b"")]
    path = changed("stargate", tmp_path, before=headers)
    replay_error("stargate", path, capsys, "over 100000 bytes uncompressed", "extended headers")


def test_a_chain_of_extended_headers_is_refused_before_recursion_runs_out(tmp_path, capsys):
    """tarfile reads a chain of long names by recursion: 2,000 of them (1 MB, 3 KB compressed)
    raised RecursionError."""
    path = changed("prism", tmp_path, before=[long_name(10, b"n")] * 2000)
    replay_error("prism", path, capsys, f"more than {archive.MAX_HEADER_CHAIN} extended headers")


def corrupt_deflate(path: Path, member: str) -> None:
    """Rewrite the capture at ``path`` so that its deflate stream turns invalid 600 KB into
    ``member``'s data: the archive opens and its headers read, then reading the member's data
    raises zlib.error (tarfile turns one met while reading a header into a ReadError itself)."""
    raw = gzip.decompress(path.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        cut = tar.getmember(member).offset_data + 600_000
    deflate = zlib.compressobj(1, zlib.DEFLATED, -15)
    body = deflate.compress(raw[:cut]) + deflate.flush(zlib.Z_FULL_FLUSH)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    path.write_bytes(header + body + b"\x07" + b"\0" * 64)  # BFINAL, block type 11: reserved, invalid


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_corrupt_deflate_data_inside_a_member_is_one_line(exporter, tmp_path, capsys):
    """A member of 1 MB (random: it does not compress) whose data turns invalid 600 KB in."""
    padding = tarfile.TarInfo("padding.bin")
    padding.size = 2**20
    path = changed(exporter, tmp_path, before=[(padding, random.Random(33).randbytes(2**20))])
    corrupt_deflate(path, "padding.bin")
    replay_error(exporter, path, capsys, "not a capture", "invalid block type")


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_fifo_is_refused_not_waited_on(exporter, tmp_path, capsys):
    """A FIFO given as the capture blocked open() for ever (replay and --replay)."""
    _, main, _ = EXPORTERS[exporter]
    fifo = tmp_path / "capture.tar.gz"
    os.mkfifo(fifo)
    assert without_waiting(fifo, lambda: main(["replay", str(fifo)])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a regular file (a FIFO)" in err
    assert without_waiting(fifo, lambda: main(["--replay", str(fifo)])) == 2
    assert "not a regular file (a FIFO)" in capsys.readouterr().err


# ------------------------------------------------------------------------------- the manifest
@pytest.mark.parametrize("exporter", EXPORTERS)
def test_a_deeply_nested_manifest_is_one_line(exporter, tmp_path, capsys):
    """100,000 nested objects raised RecursionError (only ValueError was caught); 17 are over the cap."""
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    replay_error(exporter, changed(exporter, tmp_path, raw_manifest=deep), capsys, "nested deeper than")

    def nest(m: dict) -> None:
        m["extra"] = json.loads('{"a":' * 20 + "1" + "}" * 20)

    replay_error(
        exporter, changed(exporter, tmp_path, nest), capsys, f"nested deeper than {archive.MAX_MANIFEST_DEPTH}"
    )


def test_a_manifest_of_millions_of_small_values_is_refused_before_parsing(tmp_path, capsys):
    """20 MB of ``{}`` (100 KB compressed) parsed to 567 MB."""
    raw = b'{"kind":"prism-capture","format":1,"x":[' + b"{}," * 7_000_000 + b"{}]}"
    path = changed("prism", tmp_path, raw_manifest=raw)
    assert path.stat().st_size < 200_000
    replay_error("prism", path, capsys, f"more than {archive.MAX_MANIFEST_VALUES} JSON values")


def test_a_manifest_over_its_size_limit_is_refused_by_its_header(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(archive, "MAX_MANIFEST_BYTES", 1000)
    path = changed("vcenter", tmp_path)
    replay_error("vcenter", path, capsys, "manifest.json", "over 1000")


def set_entry(key: str, field: str, value: Any):
    def change(m: dict) -> None:
        m[key][0][field] = value

    return change


def set_key(*keys: str, value: Any):
    def change(m: dict) -> None:
        node = m
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return change


WRONG_TYPES = [
    # (exporter, change, what the error names)
    ("stargate", set_key("pages", value=5), "pages: 5 is not a list"),
    ("stargate", set_key("pages", value=[5]), "pages[0]: 5 is not an object"),
    ("stargate", set_entry("pages", "bytes", 1e300), "pages[0]: bytes"),
    ("stargate", set_entry("pages", "status", "200"), "pages[0]: status"),
    ("stargate", set_entry("pages", "file", ["x"]), "pages[0]: file"),
    ("stargate", set_key("target", value="http://[::1"), "target"),
    ("stargate", set_key("discover", value="yes"), "discover"),
    ("prism", set_key("exchanges", value=5), "exchanges: 5 is not a list"),
    ("prism", set_entry("exchanges", "status", 1e300), "exchanges[0]: status"),
    ("prism", set_entry("exchanges", "answer", {"a": 1}), "exchanges[0]: answer"),
    ("prism", set_key("settings", value=[1]), "settings: list is not an object"),
    ("prism", set_key("collectors", value=[1]), "collectors: list is not an object"),
    ("prism", set_key("settings", "page_size", value=1e300), "settings.page_size"),
    ("prism", set_key("settings", "controller_api", value="v9"), "settings.controller_api"),
    ("prism", set_key("collectors", "vm_info", value="no"), "collectors.vm_info"),
    ("prism", set_key("logins", value=1e300), "logins"),
    ("vcenter", set_key("exchanges", value={"a": 1}), "exchanges: dict is not a list"),
    ("vcenter", set_entry("exchanges", "status", 1e300), "exchanges[0]: status"),
    ("vcenter", set_entry("exchanges", "request", 5), "exchanges[0]: request"),
    ("vcenter", set_key("counters", value=[1]), "counters: list is not an object"),
    ("vcenter", set_key("counters", "1", value="no-dots"), "counters"),
    ("vcenter", set_key("perf_format", value="xml"), "perf_format"),
    ("vcenter", set_key("max_query_metrics", value=1e300), "max_query_metrics"),
    ("vcenter", set_key("target", value="not a host!"), "target"),
]


@pytest.mark.parametrize("exporter, change, names", WRONG_TYPES)
def test_a_manifest_of_the_wrong_types_is_one_line_naming_the_field(exporter, change, names, tmp_path, capsys):
    """Each field the replay uses is type-checked when the capture is read: ``"pages": 5`` was a
    TypeError, settings as a list an AttributeError, a garbage target a ValueError from --replay."""
    module, main, _ = EXPORTERS[exporter]
    path = changed(exporter, tmp_path, change)
    replay_error(exporter, path, capsys, names)
    assert main(["--replay", str(path)]) == 2


@pytest.mark.parametrize("exporter", EXPORTERS)
@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "1" * 5000])
def test_a_number_out_of_range_in_a_numeric_field_is_one_line(exporter, number, tmp_path, capsys):
    """``1e400`` in bytes, status, logins or page_size was an OverflowError from int(inf)."""
    field = {"stargate": ("pages", "bytes"), "prism": ("exchanges", "status"), "vcenter": ("exchanges", "status")}
    key, name = field[exporter]
    files = dict(members(EXPORTERS[exporter][2]))
    doc = json.loads(files[archive.MANIFEST])
    doc[key][0][name] = "@NUMBER@"
    raw = json.dumps(doc).replace('"@NUMBER@"', number).encode()
    replay_error(exporter, changed(exporter, tmp_path, raw_manifest=raw), capsys, "manifest.json")


def test_prism_numbers_out_of_range_in_logins_and_page_size(tmp_path, capsys):
    files = dict(members(EXPORTERS["prism"][2]))
    for text in ('"logins": 1e400', '"page_size": 1e400'):
        doc = json.loads(files[archive.MANIFEST])
        doc["logins"] = "@L@"
        doc["settings"]["page_size"] = "@P@"
        raw = json.dumps(doc).replace('"@L@"', "1").replace('"@P@"', "500")
        key = text.split(":")[0]
        raw = raw.replace(f"{key}: 1" if key == '"logins"' else f"{key}: 500", text, 1)
        assert text in raw
        replay_error("prism", changed("prism", tmp_path, raw_manifest=raw.encode()), capsys, "manifest.json")


# --------------------------------------------------------------------------------------- -o
def test_replay_o_to_a_missing_folder_or_a_directory_is_one_line(tmp_path, capsys):
    capture = str(EXPORTERS["stargate"][2])
    one_line_error(stargate_main, ["replay", capture, "-o", str(tmp_path / "no" / "m.prom")], capsys, "no such folder")
    one_line_error(stargate_main, ["replay", capture, "-o", str(tmp_path)], capsys, "is a directory")


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_capture_o_to_a_missing_folder_is_refused_before_the_probe(exporter, tmp_path, capsys):
    """Nothing listens on 127.0.0.1:9: the probe is never made (it would fail otherwise, later)."""
    _, main, _ = EXPORTERS[exporter]
    out = str(tmp_path / "no" / "c.tar.gz")
    one_line_error(main, ["capture", "--target", "127.0.0.1:9", "-o", out], capsys, "no such folder")
    one_line_error(main, ["capture", "--target", "127.0.0.1:9", "-o", str(tmp_path)], capsys, "is a directory")


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_replay_check_from_a_fifo_is_refused(exporter, tmp_path, capsys):
    _, main, capture = EXPORTERS[exporter]
    fifo = tmp_path / "expected.prom"
    os.mkfifo(fifo)
    argv = ["replay", str(capture), "--log.level=error", "--check", str(fifo)]
    assert without_waiting(fifo, lambda: main(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a regular file (a FIFO)" in err
