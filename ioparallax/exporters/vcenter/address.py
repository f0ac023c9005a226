"""vCenter target addresses: the shared rules (:mod:`ioparallax.exporters.common.address`: one key
per target; user info, other schemes, paths, control characters refused before any connection),
with vCenter's port 443 and the SOAP endpoint's path."""

from __future__ import annotations

from ioparallax.exporters.common.address import TargetAddress, parse_target

DEFAULT_PORT = 443
#: Paths a user may paste with a vCenter URL; the SOAP endpoint is always /sdk.
ALLOWED_PATHS = ("", "/", "/sdk", "/sdk/")


def parse_vcenter_target(target: str) -> TargetAddress:
    return parse_target(target, DEFAULT_PORT, ALLOWED_PATHS)


def target_key(target: str) -> str:
    """``VC1``, ``vc1:443``, ``https://vc1/sdk`` -> ``vc1:443``; ValueError for anything that is
    not plainly a host and a port."""
    return parse_vcenter_target(target).key
