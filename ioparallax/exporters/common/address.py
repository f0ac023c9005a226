"""Target addresses of the HTTPS exporters (vCenter, Prism): every spelling of one target
(``vc1``, ``VC1:443``, ``https://vc1/``, ``https://vc1/sdk``) reduced to one key, ``host:port``,
used for the allow-list and the session cache. Each exporter's ``address.py`` gives its default
port and the paths a user may paste. Anything that is not plainly a host and a port is refused before any connection: user
info (``https://listed@other/``), other schemes, paths, queries, non-ASCII or control
characters, bad ports, over-long DNS labels. Nothing here resolves a name.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

_AUTHORITY = re.compile(r"[A-Za-z0-9._:\[\]-]+")
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")


@dataclass(frozen=True)
class TargetAddress:
    host: str  # lowercase DNS name without the trailing dot, dotted IPv4, or IPv6 (no brackets)
    port: int

    @property
    def key(self) -> str:
        """The one spelling of this target: ``vc1.example.com:443``, ``[::1]:8989``."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def _port(text: str, target: str, default: int) -> int:
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 5 or not 0 < int(text) < 65536:
        raise ValueError(f"bad port {text!r} in target {target!r} (expected 1-65535)")
    return int(text)


def _hostname(text: str, target: str) -> str:
    name = text.lower()
    if name.endswith("."):
        name = name[:-1]
    labels = name.split(".")
    if labels and all(label.isdigit() for label in labels):
        try:
            return str(ipaddress.IPv4Address(name))
        except ValueError:
            raise ValueError(f"bad IPv4 address {text!r} in target {target!r}") from None
    if not name or len(name) > 253:
        raise ValueError(f"bad host name in target {target!r} (1-253 characters)")
    for label in labels:
        if not _LABEL.fullmatch(label):
            raise ValueError(
                f"bad host name {text!r} in target {target!r}: each dot-separated label is "
                "1-63 letters, digits, '-' or '_', not starting or ending with '-'"
            )
    if labels[-1].isdigit():  # 127.1 or 2130706433 would be read as an IPv4 address by the resolver
        raise ValueError(
            f"bad host name {text!r} in target {target!r}: a numeric name that is not a dotted IPv4 address"
        )
    return name


def parse_target(target: str, default_port: int, allowed_paths: tuple[str, ...]) -> TargetAddress:
    """``host``, ``host:port``, ``[v6]:port``, ``https://host[:port][<allowed path>]`` ->
    TargetAddress. Raises ValueError with the reason for anything else."""
    text = target.strip()
    if not text.isascii() or not text.isprintable():
        raise ValueError(
            f"target {target!r} contains non-ASCII or control characters "
            "(give an internationalised name in its xn-- form)"
        )
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme.lower() != "https":
            raise ValueError(f"target {target!r}: only https:// (or a bare host[:port]) is supported")
        text = rest
    authority, slash, path = text.partition("/")
    path = slash + path
    if "@" in text:
        raise ValueError(
            f"target {target!r} contains user info ('@'): credentials come from the exporter's configuration only"
        )
    if path not in allowed_paths:
        shown = " or ".join(p for p in allowed_paths if p not in ("", "/")) or "/"
        raise ValueError(f"target {target!r}: a path other than {shown} is not allowed")
    if not authority or not _AUTHORITY.fullmatch(authority):
        raise ValueError(
            f"target {target!r} is not host[:port] (letters, digits, '.', '-', '_', an [IPv6] literal and a port only)"
        )
    if authority.startswith("["):
        inside, bracket, after = authority[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise ValueError(f"target {target!r}: bad [IPv6] literal")
        try:
            host = str(ipaddress.IPv6Address(inside))
        except ValueError:
            raise ValueError(f"target {target!r}: bad IPv6 address {inside!r}") from None
        return TargetAddress(host, _port(after[1:], target, default_port))
    if authority.count(":") > 1:
        raise ValueError(f"target {target!r}: an IPv6 address must be written in brackets, [::1]:443")
    name, _, port = authority.partition(":")
    return TargetAddress(_hostname(name, target), _port(port, target, default_port))
