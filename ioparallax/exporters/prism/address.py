"""Prism target addresses: the shared rules (:mod:`ioparallax.exporters.common.address`: one key
per target; user info, other schemes, paths, control characters refused before any connection),
with Prism's port 9440 and no path."""

from __future__ import annotations

from ioparallax.exporters.common.address import TargetAddress, parse_target

DEFAULT_PORT = 9440
ALLOWED_PATHS = ("", "/")


def parse_prism_target(target: str) -> TargetAddress:
    return parse_target(target, DEFAULT_PORT, ALLOWED_PATHS)


def target_key(target: str) -> str:
    """``PRISM1``, ``prism1:9440``, ``https://prism1:9440/`` -> ``prism1:9440``; ValueError for
    anything that is not plainly a host and a port."""
    return parse_prism_target(target).key
