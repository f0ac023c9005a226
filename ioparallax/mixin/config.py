"""The mixin config (``ioparallax/mixin/config.yml``) as typed values.

Rules, alerts and dashboards are all generated from one :class:`MixinConfig`, so a selector, a
threshold or a window is changed in one place. Errors name the file and the key.
"""

from __future__ import annotations

import copy
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ioparallax.units import parse_duration, parse_prometheus_duration
from ioparallax.yamlconf import ConfigError, Section, load_yaml

DEFAULT_CONFIG = Path(__file__).with_name("config.yml")

_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_SELECTOR = re.compile(r'^(\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*(,|$))*$')


@dataclass(frozen=True)
class Selectors:
    stargate: str
    vcenter: str
    fio: str
    exporters: str
    node: str = 'job="guest-node"'  # node_exporter inside each guest (the guest OS block-layer view)
    prism: str = 'job="prism"'  # prism-exporter /probe: the VM view on AHV clusters
    windows: str = 'job="guest-windows"'  # windows_exporter inside each Windows guest (its disk view)
    diskspd: str = 'job="diskspd"'  # diskspd-exporter (DiskSPD results copied off the Windows guests)
    vdbench: str = 'job="vdbench"'  # vdbench-exporter (vdbench output directories)
    pgbench: str = 'job="pgbench"'  # pgbench-exporter (the application view: pgbench's runs)
    app: str = 'app!=""'  # any application's app_* series (the contract of docs/pgbench.md)
    esxtop: str = 'job="esxtop"'  # esxtop-exporter (esxtop captures: the 2 s VM view on ESXi)


@dataclass(frozen=True)
class Windows:
    rate: str  # a Prometheus duration, e.g. "1m"
    agreement: str
    density_baseline: str = "24h"  # how far back a density test's one-VM step is looked for


@dataclass(frozen=True)
class Thresholds:
    zero_read_ratio: float
    zero_write_ratio: float
    busy_bytes_per_second: float
    cache_read_ratio: float
    working_set_to_cache_ratio: float
    cvm_cache_bytes: float
    burstiness_ratio: float
    asked_to_implied_iodepth_ratio: float
    views_bytes_ratio: float
    misaligned_read_to_write_ratio: float
    misaligned_frontend_read_to_write_ratio: float
    scrape_duration_ratio: float
    split_io_ratio: float = 0.5  # Windows guests: split I/Os over I/Os (misalignment hint)
    cvm_host_cpu_ratio: float = 0.10  # the CVM's share of its host's CPU capacity (info alert)


@dataclass(frozen=True)
class ForDurations:
    zero_heavy: str
    cache: str
    burst: str
    misaligned_partition: str
    misaligned_io: str
    hygiene: str
    views_disagree: str
    down: str
    scrape_slow: str
    unread_fields: str
    cvm_cpu: str = "10m"  # IoparallaxCvmCpuHigh (optional key)


@dataclass(frozen=True)
class AlertSettings:
    runbook_url: str

    def runbook(self, alert: str) -> str:
        """The alert's runbook URL: ``%s`` in the pattern takes the anchor (the alert name in lower
        case), as kubernetes-mixin's runbookURLPattern; without it ``#<anchor>`` is appended."""
        anchor = alert.lower()
        return self.runbook_url.replace("%s", anchor) if "%s" in self.runbook_url else f"{self.runbook_url}#{anchor}"


@dataclass(frozen=True)
class DashboardSettings:
    uid_prefix: str
    tags: tuple[str, ...]
    refresh: str
    time_from: str
    datasource: str


@dataclass(frozen=True)
class MixinConfig:
    selectors: Selectors
    windows: Windows
    thresholds: Thresholds
    for_: ForDurations
    alerts: AlertSettings
    dashboards: DashboardSettings
    path: str
    cluster_label: str = "cluster"  # "" for a Prometheus that only ever holds one cluster

    @property
    def w(self) -> str:
        """The rate window as rule names carry it (``1m`` -> ``1m``)."""
        return self.windows.rate

    def sel(self, source: str, *extra: str) -> str:
        """``{job="stargate",extra...}`` for a source, dropping empty matchers."""
        parts = [getattr(self.selectors, source)] + [e for e in extra if e]
        parts = [p for p in parts if p]
        return "{" + ",".join(parts) + "}"


def _duration(sec: Section, name: str) -> str:
    """A window or ``for`` duration, written into the rules as it is: Prometheus' grammar."""
    value = sec.get(name, (str, int))
    try:
        return parse_prometheus_duration(value)
    except ValueError as exc:
        raise sec.error(name, str(exc)) from None


def _selector(sec: Section, name: str, default: str | None = None) -> str:
    value = (sec.get(name, str) if default is None else sec.get(name, str, default=default)).strip()
    if not _SELECTOR.match(value):
        raise sec.error(name, f'expected label matchers such as job="stargate", got {value!r}')
    return value


def _number(sec: Section, name: str, low: float = 0.0, high: float | None = None) -> float:
    value = sec.get(name, float)
    if value < low or (high is not None and value > high):
        bound = f"between {low:g} and {high:g}" if high is not None else f"at least {low:g}"
        raise sec.error(name, f"must be {bound}, got {value:g}")
    return value


def parse_config(data: Any, path: str | os.PathLike[str] | None = None) -> MixinConfig:
    root = Section(data, path)
    s = root.section("selectors", required=True)
    selectors = Selectors(
        stargate=_selector(s, "stargate"),
        vcenter=_selector(s, "vcenter"),
        fio=_selector(s, "fio"),
        exporters=_selector(s, "exporters"),
        node=_selector(s, "node", Selectors.node),
        prism=_selector(s, "prism", Selectors.prism),
        windows=_selector(s, "windows", Selectors.windows),
        diskspd=_selector(s, "diskspd", Selectors.diskspd),
        vdbench=_selector(s, "vdbench", Selectors.vdbench),
        pgbench=_selector(s, "pgbench", Selectors.pgbench),
        app=_selector(s, "app", Selectors.app),
        esxtop=_selector(s, "esxtop", Selectors.esxtop),
    )
    s.reject_unknown()

    w = root.section("windows", required=True)
    windows = Windows(
        rate=_duration(w, "rate"),
        agreement=_duration(w, "agreement"),
        density_baseline=_duration(w, "density_baseline") if "density_baseline" in w.data else Windows.density_baseline,
    )
    w.reject_unknown()
    if parse_duration(windows.agreement) < parse_duration(windows.rate):
        raise w.error("agreement", f"must be at least windows.rate ({windows.rate})")

    t = root.section("thresholds", required=True)
    thresholds = Thresholds(
        zero_read_ratio=_number(t, "zero_read_ratio", 0, 1),
        zero_write_ratio=_number(t, "zero_write_ratio", 0, 1),
        busy_bytes_per_second=_number(t, "busy_bytes_per_second"),
        cache_read_ratio=_number(t, "cache_read_ratio", 0, 1),
        working_set_to_cache_ratio=_number(t, "working_set_to_cache_ratio"),
        cvm_cache_bytes=_number(t, "cvm_cache_bytes", 1),
        burstiness_ratio=_number(t, "burstiness_ratio", 1),
        asked_to_implied_iodepth_ratio=_number(t, "asked_to_implied_iodepth_ratio", 1),
        views_bytes_ratio=_number(t, "views_bytes_ratio", 1),
        misaligned_read_to_write_ratio=_number(t, "misaligned_read_to_write_ratio", 0, 1),
        misaligned_frontend_read_to_write_ratio=_number(t, "misaligned_frontend_read_to_write_ratio", 0, 1),
        scrape_duration_ratio=_number(t, "scrape_duration_ratio", 0, 1),
        split_io_ratio=_number(t, "split_io_ratio", 0, 1) if "split_io_ratio" in t.data else Thresholds.split_io_ratio,
        cvm_host_cpu_ratio=_number(t, "cvm_host_cpu_ratio", 0, 1)
        if "cvm_host_cpu_ratio" in t.data
        else Thresholds.cvm_host_cpu_ratio,
    )
    t.reject_unknown()

    f = root.section("for", required=True)
    optional = {"cvm_cpu"}  # keys added later: their defaults when absent
    fors = ForDurations(
        **{n: _duration(f, n) for n in ForDurations.__dataclass_fields__ if n not in optional or n in f.data}
    )
    f.reject_unknown()

    a = root.section("alerts", required=True)
    alerts = AlertSettings(runbook_url=a.get("runbook_url", str))
    if alerts.runbook_url.count("%s") > 1:
        raise a.error("runbook_url", f"at most one %s (where the alert's anchor goes), got {alerts.runbook_url!r}")
    a.reject_unknown()

    d = root.section("dashboards", required=True)
    tags = d.get("tags", list, default=[])
    if not all(isinstance(x, str) for x in tags):
        raise d.error("tags", "expected a list of strings")
    uid_prefix = d.get("uid_prefix", str)
    if not re.fullmatch(r"[a-zA-Z0-9_-]{1,30}", uid_prefix):
        raise d.error("uid_prefix", f"expected up to 30 letters, digits, '-' or '_', got {uid_prefix!r}")
    dashboards = DashboardSettings(
        uid_prefix=uid_prefix,
        tags=tuple(tags),
        refresh=d.get("refresh", str),
        time_from=d.get("time_from", str),
        datasource=d.get("datasource", str),
    )
    d.reject_unknown()
    cluster_label = root.get("cluster_label", str, default="cluster").strip()
    if cluster_label and not _LABEL.fullmatch(cluster_label):
        raise root.error(
            "cluster_label", f"expected a Prometheus label name such as cluster, or '' for none, got {cluster_label!r}"
        )
    root.reject_unknown()
    return MixinConfig(selectors, windows, thresholds, fors, alerts, dashboards, str(path or "<config>"), cluster_label)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_config(path: str | os.PathLike[str] | None = None, overrides: dict[str, Any] | None = None) -> MixinConfig:
    """The config file (default: the shipped one), with ``overrides`` merged in key by key.

    Tests use overrides for short windows and ``for`` durations; users edit the file."""
    path = Path(path) if path else DEFAULT_CONFIG
    data = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(path, None, "expected a mapping at the top level")
    if overrides:
        data = _merge(data, overrides)
    return parse_config(data, path)
