"""Every ioparallax dashboard as a JSON model, and the committed files.

``build_dashboards(cfg)`` returns {file name: dashboard JSON model}; ``write_dashboards(cfg,
outdir)`` writes them with sorted keys and 2-space indents, so regenerating from the same config
gives the same bytes (tests/mixin/dashboards checks it against the committed dashboards/).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.cog.encoder import JSONEncoder

from ioparallax.mixin.cluster import per_cluster, select_cluster
from ioparallax.mixin.config import MixinConfig
from ioparallax.mixin.dashboards.base import CLUSTER_VARIABLE
from ioparallax.mixin.dashboards.density import density
from ioparallax.mixin.dashboards.fio import fio_jobs
from ioparallax.mixin.dashboards.overview import overview
from ioparallax.mixin.dashboards.three_views import three_views
from ioparallax.mixin.dashboards.vcenter import vcenter
from ioparallax.mixin.dashboards.vdisk import vdisk
from ioparallax.mixin.queries import panels

BUILDERS = {
    "ioparallax-overview.json": overview,
    "ioparallax-three-views.json": three_views,
    "ioparallax-vdisk.json": vdisk,
    "ioparallax-fio.json": fio_jobs,
    "ioparallax-vcenter.json": vcenter,
    "ioparallax-density.json": density,
}


def _number_panels(model: dict[str, Any]) -> dict[str, Any]:
    """Stable panel ids in layout order (Grafana needs unique ids; the SDK leaves them unset)."""
    n = 0
    for panel in model.get("panels", []):
        n += 1
        panel["id"] = n
        for sub in panel.get("panels", []):
            n += 1
            sub["id"] = n
    return model


def _per_cluster(model: dict[str, Any], label: str) -> dict[str, Any]:
    """Every panel query and variable (but $cluster) selects ``$cluster`` and keeps the cluster
    label in each by/on (ioparallax/mixin/cluster.py), so two clusters' equal vdisk ids never mix."""
    for p in panels(model):
        for t in p.get("targets", []) or []:
            t["expr"] = select_cluster(per_cluster(t["expr"], label), label, CLUSTER_VARIABLE)
    for v in model.get("templating", {}).get("list", []):
        if v.get("type") == "query" and v["name"] != CLUSTER_VARIABLE:
            v["query"] = select_cluster(v["query"], label, CLUSTER_VARIABLE)
    return model


def build_dashboards(cfg: MixinConfig) -> dict[str, dict[str, Any]]:
    """{file name: dashboard JSON model} of every dashboard, from the mixin config."""
    out = {}
    for filename, build in BUILDERS.items():
        model = json.loads(json.dumps(build(cfg).build(), cls=JSONEncoder))
        out[filename] = _number_panels(_per_cluster(model, cfg.cluster_label))
    return out


def render(model: dict[str, Any]) -> str:
    """The committed form: sorted keys, 2-space indent, trailing newline."""
    return json.dumps(model, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def write_dashboards(cfg: MixinConfig, outdir: str | os.PathLike[str]) -> list[Path]:
    """Write every dashboard to ``outdir``; returns the paths written."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    written = []
    for filename, model in build_dashboards(cfg).items():
        path = outdir / filename
        path.write_text(render(model))
        written.append(path)
    return written
