"""Consistent anonymization of what an exporter fetched, for captures a user sends us (issue 26).

One :class:`Anonymizer` per capture: the same input always gets the same placeholder within it
(so a vdisk name on the main page and in the NFS Worker table, an address in a link and in the
Cluster State table, a UUID in two answers still join), and every placeholder keeps the form of
what it replaces, so that the capture still parses and replays:

| what | found | placeholder |
|---|---|---|
| UUIDs | anywhere (8-4-4-4-12 hex, or 32 hex digits) | ``00000000-0000-4000-8000-00000000000N`` (without dashes if written without) |
| IPv4 addresses | anywhere, not inside a longer dotted number (a build's ``5.10.0.1-``) | ``198.18.x.y`` (RFC 2544's benchmarking range) |
| IPv6 addresses | anywhere (validated) | ``2001:db8::N`` (the documentation prefix) |
| host names | in URLs (``scheme://host``) and given by the caller | ``host-N.invalid`` |
| names | learnt by the caller (vdisk, VM, datastore, container, cluster names...) | ``name-N`` (or a prefix the caller gives) |
| paths | learnt by the caller (NFS paths, ``[datastore] dir/file``) | ``/path-N`` |
| strings given with ``--redact`` | anywhere | ``redacted-N`` |

Numbers, layout, markup and every other text are kept byte for byte. Strings the caller marks as
``keep`` (a build version such as ``el7.3-release-euphrates-5.10.0.1-stable-...``) are never
touched, even if they look like an address.

Names are replaced as whole words (not inside a longer name: ``cvm-1`` is not replaced inside
``cvm-10``), case-insensitively, also in their HTML-escaped spelling. A name that has no letter
(a number, an address with a port) is never learnt as a name: numbers are data, and addresses
have their own rule.
"""

from __future__ import annotations

import html
import ipaddress
import re
from collections.abc import Iterable

# Each pattern starts with one character of a class and checks what precedes it after it (a
# lookbehind of that character and the one before): a pattern that starts with a lookbehind is
# tried at every position of a page, this one only where its first character fits (~4x faster).
# 8-4-4-4-12 hex digits, or 32 without dashes (a guest's disk serial), not inside a longer word.
_UUID = (
    r"[0-9A-Fa-f](?<![0-9A-Za-z].)(?:[0-9A-Fa-f]{7}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
    r"|[0-9A-Fa-f]{31})(?![0-9A-Za-z])"
)
# Not preceded by a word character, a dot or a dash, nor followed by one or by ".digit": an
# address, not a piece of a version number (5.10.0.1-stable) or of a longer dotted number.
# Octets over 255 are left as they are (validated when replaced).
_IPV4 = r"[0-9](?<![\w.\-].)[0-9]{0,2}(?:\.[0-9]{1,3}){3}(?![\w\-]|\.[0-9])"
# A colon within the first five characters, then hex digits and colons; validated when replaced
# (a time such as 22:13:20 is not an address and is left as it is).
_IPV6 = r"[0-9A-Fa-f:](?<![\w:.].)(?=[0-9A-Fa-f]{0,3}:)[0-9A-Fa-f:]{2,38}(?![\w:])"
_URL_HOST = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://(\[[^\]/]*\]|[^/:\s\"'<>?#]+)")
_LETTER = re.compile(r"[^\W\d_]")


class Anonymizer:
    """Learn what to replace (``host``, ``name``, ``path``, ``redact``, ``keep``), then
    :meth:`text` / :meth:`bytes` replace it, consistently across every call."""

    def __init__(self, redact: Iterable[str] = ()) -> None:
        self._map: dict[str, str] = {}  # key (lowercased) -> placeholder
        self._literals: dict[str, str] = {}  # spelling (lowercased) -> key
        self._keep: set[str] = set()
        self._counts: dict[str, int] = {}
        self._pattern: re.Pattern[str] | None = None
        self.replaced: dict[str, int] = {}  # kind -> distinct values replaced
        for word in redact:
            self._learn(word, "redacted", "redacted-{n}")

    # ------------------------------------------------------------------------------ learning
    def keep(self, value: str) -> None:
        """Never replace this string, nor anything inside it."""
        if value:
            self._keep.add(value)
            self._pattern = None

    def host(self, name: str) -> None:
        """A host name (from a URL or a target): ``host-N.invalid``. IP literals are left to
        the address rules."""
        name = name.strip().strip("[]").rstrip(".")
        if not name or _is_ip(name) or not _LETTER.search(name):
            return
        self._learn(name, "host", "host-{n}.invalid")

    def name(self, value: str, kind: str = "name") -> None:
        """A name (vdisk, VM, datastore, cluster...): ``<kind>-N``. The UUIDs and addresses in it
        are left to their own rules; what is left is learnt if it has a letter."""
        rest = re.sub(f"{_UUID}|{_IPV4}", " ", value)
        rest = rest.strip(" \t()[]{}<>,;")
        hostport = re.fullmatch(r"([^\s:/]+):[0-9]{1,5}", rest)
        if hostport:  # a host name and port (a Stargate handle): the host
            self.host(hostport.group(1))
            return
        if len(rest) < 2 or not _LETTER.search(rest) or rest.lower() in self._map:
            return
        if rest.startswith("/") and rest.count("/") >= 2:
            self._learn(rest, "path", "/path-{n}")
        else:
            self._learn(rest, kind, kind + "-{n}")

    def urls(self, text: str) -> None:
        """Learn the host of every URL in ``text``."""
        for m in _URL_HOST.finditer(text):
            self.host(m.group(1))

    def _learn(self, value: str, kind: str, template: str) -> None:
        key = value.lower()
        if key in self._map:
            return
        n = self._counts[kind] = self._counts.get(kind, 0) + 1
        self._map[key] = template.format(n=n)
        self.replaced[kind] = self.replaced.get(kind, 0) + 1
        for spelling in {value, html.escape(value, quote=False), html.escape(value, quote=True)}:
            self._literals[spelling.lower()] = key
        self._pattern = None

    # ------------------------------------------------------------------------------ replacing
    def _compiled(self) -> re.Pattern[str]:
        """One pattern for everything: kept strings, learnt names (as a case-insensitive trie:
        a thousand vdisk names cost about what one does), UUIDs, addresses."""
        if self._pattern is None:
            parts = []
            if self._keep:
                parts.append(f"(?P<keep>{_trie({k.lower() for k in self._keep})})")
            if self._literals:
                parts.append(rf"(?P<name>{_trie(set(self._literals))}(?![\w\-]|\.\w))")
            parts += [f"(?P<uuid>{_UUID})", f"(?P<ipv4>{_IPV4})", f"(?P<ipv6>{_IPV6})"]
            self._pattern = re.compile("|".join(parts))
        return self._pattern

    def _replace(self, m: re.Match[str]) -> str:
        kind = m.lastgroup
        value = m.group(0)
        if kind == "keep":
            return value
        if kind == "name":
            start = m.start()
            if start and (m.string[start - 1].isalnum() or m.string[start - 1] in "_.-"):
                return value  # inside a longer word or name: not this name
            return self._map[self._literals[value.lower()]]
        if kind == "uuid":  # the same UUID with or without dashes: one placeholder, in its spelling
            out = self._placeholder(value.lower().replace("-", ""), "uuid", "00000000-0000-4000-8000-{n:012x}")
            return out if "-" in value else out.replace("-", "")
        if kind == "ipv4":
            if any(int(octet) > 255 for octet in value.split(".")):
                return value
            return self._placeholder(value, "ipv4", None)
        try:
            ip = ipaddress.IPv6Address(value)
        except ValueError:
            return value  # a time (12:34:56) or other colon-separated text, not an address
        return self._placeholder(str(ip), "ipv6", "2001:db8::{n:x}")

    def _placeholder(self, key: str, kind: str, template: str | None) -> str:
        key = f"{kind}:{key}"
        out = self._map.get(key)
        if out is None:
            n = self._counts[kind] = self._counts.get(kind, 0) + 1
            if template is None:  # IPv4: 198.18.0.1 ... 198.19.255.254
                out = str(ipaddress.IPv4Address(int(ipaddress.IPv4Address("198.18.0.0")) + n % 131_072))
            else:
                out = template.format(n=n)
            self._map[key] = out
            self.replaced[kind] = self.replaced.get(kind, 0) + 1
        return out

    def text(self, value: str) -> str:
        return self._compiled().sub(self._replace, value)

    def bytes(self, value: bytes) -> bytes:
        """Bytes as fetched: decoded as UTF-8 (undecodable bytes kept as they are), replaced,
        encoded back."""
        return self.text(value.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")

    def summary(self) -> str:
        kinds = sorted(self.replaced.items())
        return ", ".join(f"{n} {kind}" for kind, n in kinds) if kinds else "nothing"


def _trie(words: set[str]) -> str:
    """A pattern matching any of ``words`` (lowercase), case-insensitively, as a trie: the
    longest at a position wins, and a position is given up after its first unmatched character,
    however many words there are. Letters become ``[aA]`` classes, so the whole pattern needs no
    IGNORECASE (which costs every other alternative too)."""
    root: dict[str, dict] = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def char(ch: str) -> str:
        up = ch.upper()
        return f"[{re.escape(ch)}{re.escape(up)}]" if up != ch and len(up) == 1 else re.escape(ch)

    def build(node: dict[str, dict]) -> str:
        # Iterative over long single-branch chains (names of ~100 characters), recursive at forks.
        out = []
        while True:
            keys = [k for k in node if k]
            end = "" in node
            if len(keys) == 1 and not end:
                out.append(char(keys[0]))
                node = node[keys[0]]
                continue
            if not keys:
                return "".join(out)
            alts = [char(k) + build(node[k]) for k in sorted(keys)]  # distinct first characters
            body = "(?:" + "|".join(alts) + ")"
            out.append(body + "?" if end else body)
            return "".join(out)

    return build(root)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
