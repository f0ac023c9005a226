"""Transport of prism-exporter: the shared Prism client (:mod:`ioparallax.exporters.common.prismclient`,
also the Stargate exporter's) on a target's address and the configured scheme."""

from __future__ import annotations

from ioparallax.exporters.common.prismclient import PrismClient
from ioparallax.exporters.prism.address import parse_prism_target
from ioparallax.exporters.prism.config import TargetConfig


def base_url(key: str, cfg: TargetConfig) -> str:
    """``prism1:9440`` -> ``https://prism1:9440`` (``http://`` with ``scheme: http``)."""
    addr = parse_prism_target(key)
    host = f"[{addr.host}]" if ":" in addr.host else addr.host
    return f"{cfg.scheme}://{host}:{addr.port}"


def client_for(key: str, cfg: TargetConfig) -> PrismClient:
    return PrismClient(base_url(key, cfg), cfg)
