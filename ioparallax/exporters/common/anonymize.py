r"""Consistent anonymization of what an exporter fetched, for captures a user sends us.

One :class:`Anonymizer` per capture: the same input always gets the same placeholder within it
(so a vdisk name on the main page and in the NFS Worker table, an address in a link and in the
Cluster State table, a UUID in two answers still join), and every placeholder keeps the form of
what it replaces, so that the capture still parses and replays:

| what | found | placeholder |
|---|---|---|
| UUIDs | anywhere, also inside a name (``vm_<uuid>``, ``disk<uuid>``): 8-4-4-4-12 hex digits separated by dashes or by underscores, or 32 hex digits as a word | ``00000000-0000-4000-8000-00000000000N`` (in the separators it was written with) |
| IPv4 addresses | anywhere, also inside a name (``nfs-10.1.2.3``, ``backup_10.1.2.3``), not inside a longer dotted number (``1.2.3.4.5``) | ``198.18.x.y`` (RFC 2544's benchmarking range) |
| IPv6 addresses | anywhere (validated), IPv4-mapped ones (``::ffff:10.1.2.3``) whole | ``2001:db8::N`` (the documentation prefix) |
| host names | in URLs (``scheme://[user@]host``) of any text learnt with :meth:`Anonymizer.learn_text`, and given by the caller | ``host-N.invalid`` |
| names | learnt by the caller (vdisk, VM, datastore, container, cluster names...) | ``name-N`` (or a prefix the caller gives) |
| paths | learnt by the caller (NFS paths, ``[datastore] dir/file``) | ``/path-N`` |
| strings given with ``--redact`` | anywhere | ``redacted-N`` |

With ``free_text=True`` (``--anonymize-free-text``), also, anywhere:

| what | found | placeholder |
|---|---|---|
| e-mail addresses | ``local@domain.tld`` | ``mail-N@example.invalid`` |
| host-name-shaped words | three or more dot-separated labels ending in a top-level domain of letters (``esx-12.corp.example.com``) | ``host-N.invalid`` |
| Windows paths | ``C:\dir\file``, ``\\server\share\...`` | ``winpath-N`` |
| query values | ``?key=value`` / ``&key=value`` whose value has a letter | ``value-N`` |

It is off by default: a host-name-shaped word can be a word of the protocol (vim25's property
paths ``summary.config.name``, Prism v4's ``vmm.v4.ahv.config.Vm``) and a query value a
parameter the replay must send again; the replay of a capture made with it may then differ
(``replay --check`` says so).

Numbers, layout, markup and every other text are kept byte for byte. Strings the caller marks as
``keep`` (a build version such as ``el7.3-release-euphrates-5.10.0.1-stable-...``) are never
touched, even if they look like an address.

**Spellings.** What is matched is the *decoded* text: HTML/XML character references
(``&#x41;CME``, ``&amp;``), JSON escapes (``\u0041CME``, ``grp\/vm``, ``Z\u00fcrich``) and
percent-encoding (``%41CME``) are decoded first, and in HTML pages (``markup=True``) inline tags
(``<b>``, ``<span>``, ``<font>``...) are transparent, as a browser shows them (a name split as
``<b>ACME</b>-db2`` is one word; its tags are kept, the text between them replaced). Each match
is replaced in the raw text, escapes included, by its placeholder, which is plain ASCII (letters,
digits, ``-``, ``.``, ``:``, ``/``, ``@``) and so the same in every escaping: a replay never
decodes a real name back into a label.

Names are replaced as whole words (not inside a longer name: ``cvm-1`` is not replaced inside
``cvm-10``), case-insensitively. A name that has no letter (a number, an address with a port) is
never learnt as a name: numbers are data, and addresses have their own rule.
"""

from __future__ import annotations

import bisect
import html
import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import unquote

# Each pattern starts with one character of a class and checks what precedes it after it (a
# lookbehind of that character and the one before): a pattern that starts with a lookbehind is
# tried at every position of a page, this one only where its first character fits (~4x faster).
_HEX = "[0-9A-Fa-f]"
# 8-4-4-4-12 hex digits separated by dashes or by underscores (the same throughout), whatever
# precedes them (a name's prefix: vm_<uuid>, disk<uuid>, cafe<uuid>: the first alignment that fits
# is taken); or 32 hex digits without separators (a guest's disk serial) as a word of its own (a
# longer run is a hash).
_UUID = (
    rf"{_HEX}(?:{_HEX}{{7}}(?P<sep>[-_]){_HEX}{{4}}(?P=sep){_HEX}{{4}}"
    rf"(?P=sep){_HEX}{{4}}(?P=sep){_HEX}{{12}}(?!{_HEX})|(?<![0-9A-Za-z].){_HEX}{{31}}(?![0-9A-Za-z]))"
)
# Not preceded by a digit or a dot, nor followed by a digit or ".digit": an address anywhere, also
# inside a name (nfs-10.1.2.3, backup_10.1.2.3), not a piece of a longer dotted number. A build
# string holding a 4-part version (euphrates-5.10.0.1-stable) is kept by the caller (keep()).
# Octets over 255 are left as they are (validated when replaced).
_IPV4 = r"[0-9](?<![0-9.].)[0-9]{0,2}(?:\.[0-9]{1,3}){3}(?![0-9]|\.[0-9])"
# A colon within the first five characters, then hex digits and colons, with an IPv4-mapped
# tail (::ffff:10.1.2.3) if there is one; validated when replaced (a time such as 22:13:20 is not
# an address and is left as it is).
_IPV6 = (
    r"[0-9A-Fa-f:](?<![\w:.].)(?=[0-9A-Fa-f]{0,3}:)[0-9A-Fa-f:]{2,38}"
    r"(?:(?<=[:0-9])\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3})?(?![\w:]|\.[0-9])"
)
_URL_HOST = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://(?:[^/@\s\"'<>]*@)?(\[[^\]/]*\]|[^/:\s\"'<>?#@]+)")
_LETTER = re.compile(r"[^\W\d_]")
#: What names a standard, not the site (learn_text leaves it out): namespace declarations and
#: schema locations, document types.
_STANDARDS = re.compile(
    r"""\bxmlns(?::[\w.-]+)?\s*=\s*(?:"[^"]*"|'[^']*')|\bschemaLocation\s*=\s*(?:"[^"]*"|'[^']*')|<!DOCTYPE[^>]*>""",
    re.IGNORECASE,
)

# Free text (free_text=True).
_EMAIL = (
    r"[A-Za-z0-9._%+\-](?<![\w.%+\-].)[A-Za-z0-9._%+\-]{0,63}@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*"
    r"\.[A-Za-z]{2,24}(?![\w\-])"
)
# Three or more labels, the last a top-level domain of letters: esx-12.corp.example.com (two
# labels are too often file names: vm.vmdk, flatfile.html).
_FQDN = (
    r"[A-Za-z0-9](?<![\w.\-/\\@].)[A-Za-z0-9\-]{0,62}(?:\.[A-Za-z0-9\-]{1,63}){1,8}\.[A-Za-z]{2,24}"
    r"(?![\w\-]|\.\w)"
)
_WINPATH = r"(?:[A-Za-z]:\\|\\\\[\w.\-$]+\\)[^\s\"'<>|*?\x00-\x1f]*[^\s\"'<>|*?.,;:)\]\x00-\x1f]"
_QUERY = r"(?<=[?&;])[A-Za-z_][\w.\-]{0,63}=[^&#\s\"'<>=]*[^\W\d_][^&#\s\"'<>]*"

#: Host names of standards (XML namespaces, schemas) that protocols spell: never free text.
_STANDARD_HOSTS = frozenset({"www.w3.org", "schemas.xmlsoap.org", "schemas.microsoft.com", "www.vmware.com"})

# Escapes decoded before matching (_pieces): character references, JSON escapes (a surrogate
# pair as one), percent-encoding (one ASCII byte, or a whole UTF-8 sequence); in markup, inline
# tags too, which a browser shows as nothing.
_ESCAPE = (
    r"&(?:#[0-9]{1,7}|#[xX][0-9A-Fa-f]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});?"
    r"|\\u[dD][89abAB][0-9A-Fa-f]{2}\\u[dD][c-fC-F][0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\[\\/\"bfnrt]"
    r"|%[C-Fc-f][0-9A-Fa-f](?:%[89ABab][0-9A-Fa-f]){1,3}|%[0-7][0-9A-Fa-f]"
)
_INLINE_TAG = r"</?(?:b|i|u|s|em|strong|span|font|a|small|big|tt|code|sub|sup|abbr|nobr|mark|q|wbr)\b[^<>]*>"
_ESCAPES = re.compile(_ESCAPE)
_ESCAPES_MARKUP = re.compile(f"{_ESCAPE}|(?P<tag>{_INLINE_TAG})", re.IGNORECASE)
_JSON_ESCAPES = {"\\": "\\", "/": "/", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class Anonymizer:
    """Learn what to replace (``host``, ``name``, ``path``, ``redact``, ``keep``, and the URL
    hosts of whole answers with :meth:`learn_text`), then :meth:`text` / :meth:`bytes` replace
    it, consistently across every call. ``free_text``: also e-mail addresses, host-name-shaped
    words, Windows paths and query values (module docstring)."""

    def __init__(self, redact: Iterable[str] = (), free_text: bool = False) -> None:
        self.free_text = free_text
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
        are left to their own rules; what is left is learnt if it has a letter (and, beside an
        address or UUID, if it is more than a short prefix such as ``vm_`` or ``nfs-``)."""
        rest, found = re.subn(f"{_UUID}|{_IPV4}|{_IPV6}", " ", value)
        rest = rest.strip(" \t()[]{}<>,;")
        if found and len(rest.strip("-_.:/ ")) <= 6 and not re.search(r"[0-9\s]", rest.strip("-_.:/ ")):
            return  # what is left is a prefix (vm_, nfs-, backup_): the address or UUID was the name
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
        """Learn the host of every URL in ``text`` (as it is: see :meth:`learn_text`)."""
        for m in _URL_HOST.finditer(text):
            self.host(m.group(1))

    def learn_text(self, raw: str | bytes, markup: bool = False) -> None:
        r"""Learn what a whole answer names by its shape: the hosts of its URLs, found in its
        decoded text (``http:\/\/esx-1.corp\/``, ``http://%65sx-1.corp/``, entities). XML
        namespaces and document types name standards, not the site: they are left out."""
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "surrogateescape")
        raw = _STANDARDS.sub(" ", raw)
        self.urls(raw)
        if _decodes(raw, markup):
            self.urls("".join(p[2] for p in _pieces(raw, markup)))

    def _learn(self, value: str, kind: str, template: str) -> None:
        key = value.lower()
        if key in self._map:
            return
        n = self._counts[kind] = self._counts.get(kind, 0) + 1
        self._map[key] = template.format(n=n)
        self.replaced[kind] = self.replaced.get(kind, 0) + 1
        # Texts are matched decoded (_pieces); the decoded spellings of a value learnt escaped, and
        # the escaped ones for text that is not decoded (a JSON string's own "&amp;" is literal).
        spellings = {value, html.unescape(value), unquote(value), html.escape(value, quote=False)}
        spellings.add(html.escape(value, quote=True))
        for spelling in spellings:
            if spelling:
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
            if self.free_text:  # before names: an e-mail address is replaced whole
                parts += [f"(?P<email>{_EMAIL})", f"(?P<winpath>{_WINPATH})", f"(?P<query>{_QUERY})"]
            if self._literals:
                parts.append(rf"(?P<name>{_trie(set(self._literals))}(?![\w\-]|\.\w))")
            parts += [f"(?P<uuid>{_UUID})", f"(?P<ipv4>{_IPV4})", f"(?P<ipv6>{_IPV6})"]
            if self.free_text:  # after addresses and names: a learnt host keeps its placeholder
                parts.append(f"(?P<fqdn>{_FQDN})")
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
        if kind == "uuid":  # the same UUID with or without separators: one placeholder, in its spelling
            key = value.lower().replace("-", "").replace("_", "")
            out = self._placeholder(key, "uuid", "00000000-0000-4000-8000-{n:012x}")
            return out if "-" in value else out.replace("-", "_" if "_" in value else "")
        if kind == "ipv4":
            if any(int(octet) > 255 for octet in value.split(".")):
                return value
            return self._placeholder(value, "ipv4", None)
        if kind == "email":
            return self._placeholder(value.lower(), "email", "mail-{n}@example.invalid")
        if kind == "winpath":
            return self._placeholder(value.lower(), "winpath", "winpath-{n}")
        if kind == "query":
            key, _, val = value.partition("=")
            return f"{key}={self._placeholder(val, 'value', 'value-{n}')}"
        if kind == "fqdn":
            if value.lower() in _STANDARD_HOSTS:
                return value
            known = self._map.get(value.lower())
            if known is not None:
                return known
            self.host(value)
            return self._map.get(value.lower(), value)
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

    def text(self, value: str, markup: bool = False) -> str:
        """``value`` with what was learnt, and every UUID and address, replaced, matched in its
        decoded text and replaced in its own (module docstring, Spellings); ``markup``: an HTML
        page, whose inline tags are transparent."""
        pattern = self._compiled()
        if not _decodes(value, markup):  # nothing escaped: the text is its own decoded text
            return pattern.sub(self._replace, value)
        pieces = _pieces(value, markup)
        decoded = "".join(p[2] for p in pieces)
        starts: list[int] = []  # decoded offset where each piece starts
        at = 0
        for p in pieces:
            starts.append(at)
            at += len(p[2])
        matches: list[tuple[int, int, str]] = []
        for m in pattern.finditer(decoded):
            out = self._replace(m)
            if out == m.group(0):
                continue
            # A match that starts or ends inside an escape takes the whole escape.
            s, e = m.start(), m.end()
            i = bisect.bisect_right(starts, s) - 1
            while i > 0 and not pieces[i][2]:
                i -= 1
            if pieces[i][3] != "text":
                s = starts[i]
            j = bisect.bisect_right(starts, e - 1) - 1
            while j > 0 and not pieces[j][2]:
                j -= 1
            if pieces[j][3] != "text":
                e = starts[j] + len(pieces[j][2])
            if matches and s < matches[-1][1]:
                continue  # overlaps the previous one once widened: rare, left to it
            matches.append((s, e, out))
        return "".join(self._rebuild(value, pieces, starts, matches, markup))

    def _rebuild(
        self, raw: str, pieces: list[tuple[int, int, str, str]], starts: list[int], matches: list, markup: bool
    ) -> Iterable[str]:
        """The raw text with each match (decoded offsets) replaced: a piece of plain text cut at
        the match's ends, an escape whole; an inline tag inside a match kept after the
        placeholder (its attributes anonymized on their own)."""
        k = 0  # the next match
        inside = False
        tags: list[str] = []
        for (r0, r1, dec, kind), d0 in zip(pieces, starts, strict=True):
            if kind == "tag":
                tag = self.text(raw[r0:r1])
                if inside:
                    tags.append(tag)
                else:
                    yield tag
                continue
            d1 = d0 + len(dec)
            pos = d0
            while pos < d1:
                if not inside:
                    if k >= len(matches) or matches[k][0] >= d1:
                        yield raw[r0 + pos - d0 : r1] if kind == "text" else raw[r0:r1]
                        break
                    ms = matches[k][0]
                    if ms > pos:
                        yield raw[r0 + pos - d0 : r0 + ms - d0]
                    yield matches[k][2]
                    inside, pos = True, ms
                me = matches[k][1]
                if me > d1:
                    break  # the match goes on in the next pieces
                pos, inside = me, False
                k += 1
                yield from tags
                tags = []
        yield from tags

    def bytes(self, value: bytes, markup: bool = False) -> bytes:
        """Bytes as fetched: decoded as UTF-8 (undecodable bytes kept as they are), replaced
        (:meth:`text`), encoded back."""
        return self.text(value.decode("utf-8", "surrogateescape"), markup).encode("utf-8", "surrogateescape")

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


def _decodes(raw: str, markup: bool) -> bool:
    """Whether ``raw`` holds an escape (or, in markup, an inline tag)."""
    if "&" not in raw and "\\" not in raw and "%" not in raw and not (markup and "<" in raw):
        return False
    return (_ESCAPES_MARKUP if markup else _ESCAPES).search(raw) is not None


def _pieces(raw: str, markup: bool) -> list[tuple[int, int, str, str]]:
    """``raw`` cut into (raw start, raw end, decoded text, kind) pieces: ``text`` (its own
    decoded text), ``escape`` (an escape and the character(s) it stands for) and, in markup,
    ``tag`` (an inline tag: no decoded text)."""
    out: list[tuple[int, int, str, str]] = []
    at = 0
    for m in (_ESCAPES_MARKUP if markup else _ESCAPES).finditer(raw):
        token = m.group(0)
        if markup and m.group("tag"):
            dec, kind = "", "tag"
        else:
            dec, kind = _unescape(token), "escape"
            if dec == token:
                continue  # not an escape after all (&unknown;): plain text
        if m.start() > at:
            out.append((at, m.start(), raw[at : m.start()], "text"))
        out.append((m.start(), m.end(), dec, kind))
        at = m.end()
    if at < len(raw):
        out.append((at, len(raw), raw[at:], "text"))
    return out


def _unescape(token: str) -> str:
    """What one escape of :data:`_ESCAPE` stands for."""
    if token[0] == "&":
        return html.unescape(token)
    if token[0] == "%":
        return bytes(int(token[i + 1 : i + 3], 16) for i in range(0, len(token), 3)).decode("utf-8", "surrogateescape")
    if token[1] == "u":
        units = [int(token[i + 2 : i + 6], 16) for i in range(0, len(token), 6)]
        if len(units) == 2:
            return chr(0x10000 + ((units[0] - 0xD800) << 10) + (units[1] - 0xDC00))
        return chr(units[0])
    return _JSON_ESCAPES[token[1]]


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
