"""Tokens planted in the simulators' answers in the spellings a real source writes (issue 33),
and the grep of a whole capture archive for them: every member, decompressed, searched as it
is and decoded (character references, JSON escapes, percent-encoding, tags removed), so that a
token the anonymizer missed in any spelling is found.

Each exporter's capture test plants the spellings its source can carry (HTML entities and a
name split by a tag in Stargate pages; JSON escapes in Prism answers; character references in
vCenter's SOAP) and the ones any source can (addresses and UUIDs inside names, IPv4-mapped IPv6,
URL hosts, percent-encoding), then asserts :func:`survivors` is empty and the replay's values
are the live probe's.
"""

from __future__ import annotations

import gzip
import html
import io
import re
import tarfile
from urllib.parse import unquote

#: The distinctive part of each planted token (lowercase): found in every spelling of it.
CORES = {
    "&#x41;CMEHEX-db (a character reference)": "cmehex",
    "<b>SPLITCO</b>-db2 (a name split by a tag)": "splitco",
    "\\u0041CMEJSON-vm (a JSON escape)": "cmejson",
    "grp\\/SLASHVM (an escaped slash)": "slashvm",
    "Z\\u00fcrich-store / Z&uuml;rich-store (a non-ASCII letter escaped)": "rich-store",
    "%50CTNAME-vm (percent-encoding)": "ctname",
    "nfs-10.55.66.77 (an IPv4 address inside a name)": "10.55.66.77",
    "backup_10.66.77.88 (an IPv4 address after an underscore)": "10.66.77.88",
    "::ffff:10.77.88.99 (an IPv4-mapped IPv6 address)": "10.77.88.99",
    "vma4cd5576-8fd3-48e6-93c4-9f72698125b5 (a UUID with a letter prefix)": "9f72698125b5",
    "vm_a1b2c3d4_1111_4222_8333_444455556666 (a UUID with underscores)": "444455556666",
    "http://esx-secret.corp.example/ (a URL host inside an answer)": "esx-secret",
}

_JSON_U = re.compile(r"\\u([0-9A-Fa-f]{4})")
_TAG = re.compile(r"<[^<>]*>")


def members(path: str) -> dict[str, bytes]:
    """Every member of the archive, decompressed (a gzip member inside it too)."""
    out = {}
    with tarfile.open(path, "r:gz") as tar:
        for m in tar:
            f = tar.extractfile(m)
            if f is None:
                continue
            data = f.read()
            if data[:2] == b"\x1f\x8b":
                data = gzip.GzipFile(fileobj=io.BytesIO(data)).read()
            out[m.name] = data
    return out


def spellings(text: str) -> list[str]:
    """``text`` as it is and decoded every way a reader may decode it."""
    json_decoded = _JSON_U.sub(lambda m: chr(int(m.group(1), 16)), text).replace("\\/", "/")
    decoded = html.unescape(unquote(json_decoded))
    return [text, json_decoded, decoded, _TAG.sub("", decoded)]


def survivors(path: str, cores: dict[str, str] = CORES) -> list[tuple[str, str]]:
    """(member, planted token) for every token found in the archive, in any spelling."""
    found = []
    for name, data in members(path).items():
        texts = [t.lower() for t in spellings(data.decode("utf-8", "replace"))]
        for token, core in cores.items():
            if any(core in t for t in texts):
                found.append((name, token))
    return found


def values_by_name(lines: list[str]) -> dict[str, list[float]]:
    """Each metric's values, sorted, without labels: what anonymization must not change."""
    out: dict[str, list[float]] = {}
    for line in lines:
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        out.setdefault(name, []).append(float(line.rsplit(" ", 1)[1]))
    return {k: sorted(v) for k, v in out.items()}
