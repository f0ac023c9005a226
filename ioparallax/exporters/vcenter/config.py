"""Configuration of the vCenter exporter: targets, credentials, TLS, refresh intervals.

A YAML file (``--config.file``)::

    defaults:                       # applied to every listed target
      username: monitor@vsphere.local
      password_env: VCENTER_PASSWORD  # the password comes from this environment variable
      inventory_refresh: 5m
      timeout: 30s
      cpu: true                     # CPU of the VMs and hosts (cpu.usagemhz, cpu.ready); false: disks only
      cvm_name_pattern: '^NTNX-.*-CVM$'   # which VMs are Nutanix CVMs (or a .vmx in a ServiceVM folder)
    allow_unlisted_targets: false   # default: a ?target= not listed below is refused (HTTP 400)
    latest_samples: true            # false: no latest-sample gauges (15 series per VM disk fewer)
    session_idle_timeout: 10m       # log out of a target not probed for this long
    targets:                        # the ?target= values (common/targets.py: credentials, TLS)
      vc1.example.com:
        password_env: VC1_PASSWORD
        inventory_refresh: 10m      # any of the defaults' keys, for this target
      vc2.example.com:
        ca_file: /etc/ssl/vc2-ca.pem

Without a config file, the credentials come from the environment variables ``VCENTER_USERNAME``
and ``VCENTER_PASSWORD`` (TLS verification on), and the targets that may receive them are listed
with ``--vcenter.target`` (or ``VCENTER_TARGETS``, comma-separated); ``--vcenter.allow-unlisted-targets``
is the explicit opt-in to sending them to any target. Target names are compared in their
normalised form (see :mod:`.address`), so ``VC1``, ``vc1:443`` and ``https://vc1/`` are one
target. Passwords are never logged nor shown on the landing page.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar, Unpack

from ioparallax.exporters.common import targets as common
from ioparallax.exporters.vcenter.address import target_key

DEFAULT_INVENTORY_REFRESH = 300.0
#: Sessions of targets not probed for this long are logged out (50 spellings or an abandoned
#: target must not hold vCenter sessions forever).
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0
#: A disk's latest 20 s sample is shown as a gauge only while it is at most this much older than
#: the newest sample of the VMs on its ESXi host: realtime samples come every 20 s and may be published up to
#: ~40 s late; older means the VM stopped reporting (powered off, vanished, host down).
DEFAULT_SAMPLE_MAX_AGE = 60.0
PERF_FORMATS = ("csv", "normal")
#: background: the inventory is read off the probe path (the default); sync: the collection reads
#: it when due, through pyvmomi, as before (kept as the benchmark's baseline).
INVENTORY_MODES = ("background", "sync")
#: A Nutanix Controller VM as the installer names it on ESXi: NTNX-<block serial>-<position>-CVM.
DEFAULT_CVM_NAME_PATTERN = r"^NTNX-.*-CVM$"


@dataclass(frozen=True)
class TargetConfig(common.Access):
    """How to reach one vCenter (common.Access: credentials, TLS, the socket timeout of one SOAP
    call) and read it."""

    inventory_refresh: float = DEFAULT_INVENTORY_REFRESH
    max_query_metrics: int | None = None  # None: read config.vpxd.stats.maxQueryMetrics (default 256)
    perf_format: str = "csv"  # csv is ~40 % cheaper to parse; "normal" for old servers
    sample_max_age: float = DEFAULT_SAMPLE_MAX_AGE  # latest-sample gauges older than this are not shown
    inventory_mode: str = "background"
    #: VMs whose name matches are CVMs (re.search); a VM whose .vmx lies in a ServiceVM folder is one too.
    cvm_name_pattern: re.Pattern[str] = field(default=re.compile(DEFAULT_CVM_NAME_PATTERN), compare=False)
    cpu: bool = True  # False: no CPU counters asked for (cpu.usagemhz, cpu.ready)

    def describe(self) -> str:
        return (
            f"{self.access()} inventory_refresh={self.inventory_refresh:g}s timeout={self.timeout:g}s "
            f"perf_format={self.perf_format} sample_max_age={self.sample_max_age:g}s "
            f"inventory_mode={self.inventory_mode} cpu={'on' if self.cpu else 'off'} "
            f"cvm_name_pattern={self.cvm_name_pattern.pattern!r}"
        )


@dataclass(frozen=True)
class ExporterConfig(common.ExporterConfig[TargetConfig]):
    """The targets' settings and allow-list (common.ExporterConfig), and the collector switch."""

    names: ClassVar[common.Names] = common.Names("vCenters", "VCENTER", "vcenter")

    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    latest_samples: bool = True  # False: the latest-sample gauges are not exposed (series budget)

    def collector_lines(self) -> list[str]:
        return [f"latest-sample gauges: {'on' if self.latest_samples else 'off'}"]


def _at_least_one(count: int) -> int:
    if count < 1:
        raise ValueError(f"must be at least 1, got {count}")
    return count


def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None


#: A target's own keys (common.Schema reads its credentials, TLS and timeout first).
SCHEMA = common.Schema(
    ExporterConfig.names,
    TargetConfig,
    (
        common.Key("inventory_refresh", common.positive_duration),
        common.Key("max_query_metrics", int, _at_least_one),
        common.Key("perf_format", str, common.one_of(PERF_FORMATS)),
        common.Key("sample_max_age", common.positive_duration),
        common.Key("inventory_mode", str, common.one_of(INVENTORY_MODES)),
        common.Key("cvm_name_pattern", str, _regex),
        common.Key("cpu", bool),
    ),
    target_key,
    DEFAULT_SESSION_IDLE_TIMEOUT,
)


def load_config(path: str | None, env: dict[str, str] | None = None, **flags: Unpack[common.Flags]) -> ExporterConfig:
    """Read and validate the config file; errors name the file and the key.

    ``extra_targets`` (``--vcenter.target``) and ``VCENTER_TARGETS`` are listed beside the file's
    targets with the defaults; ``allow_unlisted`` (``--vcenter.allow-unlisted-targets``) and
    ``session_idle_timeout`` and ``latest_samples`` (``--[no-]collector.latest-samples``) override
    the file when given."""
    got = SCHEMA.load(path, env, **flags)
    return ExporterConfig(**got.fields(path), latest_samples=got.latest_samples)
