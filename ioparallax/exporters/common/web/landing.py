"""The landing page at ``/``: what this exporter is, its links (metrics, an example probe) and
its configuration (never with secrets)."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ioparallax.exporters.common.web.app import ExporterApp


def render(app: ExporterApp) -> bytes:
    """The HTML of ``/`` for ``app``."""
    links = [("metrics", "/metrics: the exporter's own metrics")]
    if app.probe is not None:
        example = f"/probe?target={app.example_target}" if app.example_target else "/probe?target=..."
        links.append((example, f"{example}: probe one target"))
    links.extend(app.extra_links)
    items = "\n".join(f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links)
    cfg = f"<h2>Configuration</h2><pre>{html.escape(app.config_text)}</pre>" if app.config_text else ""
    return (
        f"<!DOCTYPE html><html><head><title>{html.escape(app.name)}</title></head><body>"
        f"<h1>{html.escape(app.name)}</h1><p>{html.escape(app.description)}</p>"
        f"<ul>{items}</ul>{cfg}</body></html>"
    ).encode()
