"""The stack's Prometheus scrape configs: exporter jobs, blackbox-style probe jobs, one job per source."""

from __future__ import annotations

from typing import Any

# The label a probe job's static_configs group carries its exporter's address in (a blackbox-style
# job whose targets several exporters probe: one per cluster). ``__tmp`` labels are Prometheus'
# scratch space for relabelling and are dropped from the target's labels.
EXPORTER_LABEL = "__tmp_exporter"


def merge_jobs(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Scrape configs of one job from several clusters as one job, their static_configs groups side
    by side: Prometheus refuses two jobs of one name, and the mixin selects each source by its job."""
    jobs: dict[str, dict[str, Any]] = {}
    for cfg in configs:
        if cfg["job_name"] in jobs:
            jobs[cfg["job_name"]]["static_configs"].extend(cfg["static_configs"])
        else:
            jobs[cfg["job_name"]] = {**cfg, "static_configs": list(cfg["static_configs"])}
    return list(jobs.values())


def exporter_scrape(job: str, url: str, interval: str | None = None, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"job_name": job, "static_configs": [{"targets": [url.split("://", 1)[1]]}]}
    if interval:
        cfg["scrape_interval"] = interval
    cfg.update(extra)
    return cfg


def probe_scrape(
    job: str,
    exporter_url: str,
    targets: list[str],
    interval: str | None = None,
    params: dict[str, list[str]] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A blackbox-style scrape config: each target becomes ?target=, the exporter the address.
    The exporter's address travels in the targets' group (EXPORTER_LABEL), so that the groups of
    several clusters, each probed by its own exporter, make one job (merge_jobs)."""
    cfg: dict[str, Any] = {
        "job_name": job,
        "metrics_path": "/probe",
        "static_configs": [
            {"targets": targets, "labels": {**(labels or {}), EXPORTER_LABEL: exporter_url.split("://", 1)[1]}}
        ],
        "relabel_configs": [
            {"source_labels": ["__address__"], "target_label": "__param_target"},
            {"source_labels": ["__param_target"], "target_label": "instance"},
            {"source_labels": [EXPORTER_LABEL], "target_label": "__address__"},
        ],
    }
    if interval:
        cfg["scrape_interval"] = interval
        cfg["scrape_timeout"] = interval if float(interval.rstrip("s")) <= 15 else "15s"
    if params:
        cfg["params"] = params
    return cfg
