"""Which Stargate URLs a probe may fetch: the target string, the allow-list, links on its pages.

A probe only ever speaks HTTP(S) to:

- the target, when it is well formed and its host is on the allow-list (``targets:`` in the
  config file, ``--stargate.allowed-target``, or everything with an explicit opt-in);
- the target itself again for the vdisk detail views its page links (same scheme, host, port);
- with ``discover=true``, the CVMs listed in the *target's own* Cluster State table, on the
  Stargate port (2009 or the target's port), each once, each on the allow-list too, and on each
  of those only its own detail views.

Everything here is pure (no I/O, no DNS): a host name is matched by its spelling, an IP literal by
the CIDRs too. A name is never resolved to decide whether it is allowed.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORT = 2009
SCHEMES = ("http", "https")

_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?", re.ASCII)
_PATH_OK = re.compile(r"[!#-~]*", re.ASCII)  # printable ASCII, no space, no quote


class TargetError(ValueError):
    """A target or link that is not a URL this exporter will fetch; the message says why."""


@dataclass(frozen=True)
class Origin:
    """Scheme, host and port: what "the same server" means for links."""

    scheme: str
    host: str  # lower case; an IPv6 literal without brackets
    port: int

    @property
    def netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """The main page of this origin."""
        return self.page_url("/")

    def page_url(self, path: str) -> str:
        """The URL of ``path`` (``/vdisk_stats?id=7``) on this origin."""
        return f"{self.scheme}://{self.netloc}{path}"

    def __str__(self) -> str:
        return self.netloc


def _check_host(host: str) -> str:
    if not host:
        raise TargetError("no host")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if labels[-1].isdigit():  # 127.1 or 2130706433: a resolver reads these as IPv4 addresses
        raise TargetError(f"{host!r} is neither a dotted IPv4 address nor a host name")
    if len(host) > 253:
        raise TargetError(f"host name of {len(host)} characters (at most 253)")
    for label in host.rstrip(".").split("."):
        if not _LABEL.fullmatch(label):
            if len(label) > 63:
                raise TargetError(f"DNS label of {len(label)} characters (at most 63)")
            raise TargetError(f"{label!r} is not a DNS label (letters, digits, '-')")
    return host.lower().rstrip(".")


def _split(url: str) -> tuple[Origin, str]:
    """An absolute http(s) URL -> (origin, path with query). Raises TargetError."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise TargetError("control character (newline, NUL...) in the URL")
    if not url.isascii():
        raise TargetError("not ASCII (give an internationalised host name in its xn-- form)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise TargetError(f"not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise TargetError(f"scheme {scheme or 'none'!r} not allowed (http or https only)")
    if parts.username is not None or parts.password is not None:
        raise TargetError("user information (user:password@) in the URL is not allowed")
    if port == 0:
        raise TargetError("port 0")
    host = _check_host(parts.hostname or "")
    path = parts.path or "/"
    if not _PATH_OK.fullmatch(path) or not _PATH_OK.fullmatch(parts.query) or "%00" in url:
        raise TargetError("path or query with a space, quote or NUL")
    origin = Origin(scheme, host, port if port is not None else (443 if scheme == "https" else 80))
    return origin, path + (f"?{parts.query}" if parts.query else "")


@dataclass(frozen=True)
class Target:
    """A parsed ``?target=``: where its main page is."""

    text: str
    origin: Origin
    path: str

    @property
    def url(self) -> str:
        return self.origin.page_url(self.path)


def parse_target(text: str) -> Target:
    """``10.0.0.5``, ``10.0.0.5:2010``, ``[fd00::5]:2009``, ``cvm-1.example.com`` (port 2009) or
    ``http(s)://host[:port][/path]`` -> Target. Anything else raises :class:`TargetError`."""
    t = text.strip()
    if not t:
        raise TargetError("empty target")
    if "://" in t:
        origin, path = _split(t)
    else:
        if "/" in t or "?" in t or "#" in t or "@" in t:
            raise TargetError("a target without a scheme is host[:port] only")
        origin, path = _split(f"http://{t}")
        if urlsplit(f"http://{t}").port is None:
            origin = Origin("http", origin.host, DEFAULT_PORT)
    return Target(text, origin, path)


def resolve_link(page_url: str, href: str) -> str:
    """The absolute URL of a link on a page (never raises: a malformed link stays as written,
    and :func:`same_origin_link` refuses it with the reason)."""
    from urllib.parse import urljoin

    try:
        return urljoin(page_url, href)
    except ValueError:
        return href


#: A path (and query) that _split would return unchanged: the fast path of same_origin_link.
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9_.~/?=&+,;:-]*(?<!\?)", re.ASCII)


def same_origin_link(origin: Origin, url: str) -> str:
    """``url`` as a path to request from ``origin``; TargetError when it points elsewhere or is
    malformed (the exporter follows links only on the server that showed them)."""
    # The usual link (a main page links every vdisk, as joined by parse.py): the origin's own
    # "scheme://host:port" then a plain path, which _split would take apart to the same answer.
    base = f"{origin.scheme}://{origin.netloc}"
    if url.startswith(base) and _PLAIN_PATH.fullmatch(url, len(base)):
        return url[len(base) :]
    link_origin, path = _split(url)
    if link_origin != origin:
        raise TargetError(
            f"link to {link_origin.scheme}://{link_origin.netloc} is not on "
            f"{origin.scheme}://{origin.netloc} (links are followed on the same server only)"
        )
    return path


def cluster_cvms(
    target: Target, links: Iterable[str], policy: TargetPolicy, extra_ports: Iterable[int] = ()
) -> tuple[list[Origin], list[str]]:
    """The other CVMs to probe for ``discover=true``: the Cluster State links of the target's own
    page, as origins on the Stargate port (2009, the target's, or one of ``extra_ports``), allowed
    by ``policy``, each once. Returns (origins, reasons for every link not followed)."""
    ports = {DEFAULT_PORT, target.origin.port, *extra_ports}
    seen = {target.origin}
    out: list[Origin] = []
    refused: list[str] = []
    for link in links:
        try:
            origin, _ = _split(link)
        except TargetError as exc:
            refused.append(f"Cluster State link {link[:200]!r}: {exc}")
            continue
        if origin.scheme != target.origin.scheme:
            refused.append(
                f"Cluster State link {link!r}: scheme {origin.scheme}, the target's is {target.origin.scheme}"
            )
        elif origin.port not in ports:
            refused.append(
                f"Cluster State link {link!r}: port {origin.port} is not the Stargate port "
                f"({' or '.join(str(p) for p in sorted(ports))})"
            )
        elif not policy.allows(origin.host):
            refused.append(f"Cluster State link {link!r}: host {origin.host} is not on the targets allow-list")
        elif origin not in seen:
            seen.add(origin)
            out.append(origin)
    return out, refused


class TargetPolicy:
    """The allow-list: host name patterns (``cvm-*.example.com``, shell-style, case-insensitive),
    IP literals and CIDRs (``10.0.0.0/24``, ``fd00::/64``), or everything (``allow_any``)."""

    def __init__(self, entries: Iterable[str] = (), allow_any: bool = False):
        self.allow_any = allow_any
        self.entries = [str(e).strip() for e in entries]
        self._nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        self._patterns: list[str] = []
        for entry in self.entries:
            if not entry:
                raise ValueError("empty entry")
            try:
                self._nets.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            if "/" in entry or ":" in entry or not entry.isascii() or " " in entry:
                raise ValueError(f"{entry!r} is neither a CIDR, an IP address nor a host name pattern")
            self._patterns.append(entry.lower().rstrip("."))

    @classmethod
    def loopback(cls) -> TargetPolicy:
        return cls(["127.0.0.0/8", "::1", "localhost"])

    def allows(self, host: str) -> bool:
        if self.allow_any:
            return True
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            name = host.lower().rstrip(".")
            return any(fnmatch.fnmatchcase(name, p) for p in self._patterns)
        return any(ip in net for net in self._nets if net.version == ip.version)

    def describe(self) -> str:
        if self.allow_any:
            return "any target (allow_unlisted_targets / --stargate.allow-unlisted-targets)"
        return ", ".join(self.entries) if self.entries else "none"
