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
    targets:
      vc1.example.com:              # the ?target= value (host, host:port or https://host[:port]/)
        password_env: VC1_PASSWORD
      vc-lab.example.com:
        username: lab
        password: secret            # inline passwords are allowed but discouraged
        insecure_skip_verify: true  # explicit opt-out of TLS certificate verification
                                    # (alias: tls_verify: false)
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
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from ioparallax.exporters.common import targets as common
from ioparallax.exporters.vcenter.address import target_key
from ioparallax.yamlconf import Section

DEFAULT_INVENTORY_REFRESH = 300.0
DEFAULT_TIMEOUT = 30.0
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
class TargetConfig:
    """How to reach one vCenter. ``password`` is resolved, never printed (see ``describe``)."""

    username: str = ""
    password: str = field(default="", repr=False)
    password_source: str = ""  # "env VC1_PASSWORD", "file", "" (for messages)
    insecure_skip_verify: bool = False
    ca_file: str | None = None
    inventory_refresh: float = DEFAULT_INVENTORY_REFRESH
    timeout: float = DEFAULT_TIMEOUT  # socket timeout of one SOAP call
    max_query_metrics: int | None = None  # None: read config.vpxd.stats.maxQueryMetrics (default 256)
    perf_format: str = "csv"  # csv is ~40 % cheaper to parse; "normal" for old servers
    sample_max_age: float = DEFAULT_SAMPLE_MAX_AGE  # latest-sample gauges older than this are not shown
    inventory_mode: str = "background"
    #: VMs whose name matches are CVMs (re.search); a VM whose .vmx lies in a ServiceVM folder is one too.
    cvm_name_pattern: re.Pattern[str] = field(default=re.compile(DEFAULT_CVM_NAME_PATTERN), compare=False)
    cpu: bool = True  # False: no CPU counters asked for (cpu.usagemhz, cpu.ready)

    def describe(self) -> str:
        tls = (
            "verification OFF (insecure_skip_verify)"
            if self.insecure_skip_verify
            else (f"verified with {self.ca_file}" if self.ca_file else "verified with the system CAs")
        )
        return (
            f"user={self.username or '(none)'} password={'(set, ' + self.password_source + ')' if self.password else '(not set)'} "
            f"tls={tls} inventory_refresh={self.inventory_refresh:g}s timeout={self.timeout:g}s "
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


_duration = common.positive_duration


def _read_target(sec: Section, base: TargetConfig) -> TargetConfig:
    """A target's own keys (common.Schema reads its credentials and ca_file)."""
    insecure = common.read_insecure_skip_verify(sec, base.insecure_skip_verify)
    refresh = sec.get("inventory_refresh", _duration, default=base.inventory_refresh)
    timeout = sec.get("timeout", _duration, default=base.timeout)
    mqm = sec.get("max_query_metrics", int, default=base.max_query_metrics)
    if mqm is not None and mqm < 1:
        raise sec.error("max_query_metrics", f"must be at least 1, got {mqm}")
    fmt = sec.get("perf_format", str, default=base.perf_format)
    if fmt not in PERF_FORMATS:
        raise sec.error("perf_format", f"expected one of {', '.join(PERF_FORMATS)}, got {fmt!r}")
    max_age = sec.get("sample_max_age", _duration, default=base.sample_max_age)
    mode = sec.get("inventory_mode", str, default=base.inventory_mode)
    if mode not in INVENTORY_MODES:
        raise sec.error("inventory_mode", f"expected one of {', '.join(INVENTORY_MODES)}, got {mode!r}")
    pattern = sec.get("cvm_name_pattern", str, default=None)
    cvm = base.cvm_name_pattern
    if pattern is not None:
        try:
            cvm = re.compile(pattern)
        except re.error as exc:
            raise sec.error("cvm_name_pattern", f"not a regular expression: {exc}") from None
    cpu = sec.get("cpu", bool, default=base.cpu)
    sec.reject_unknown()
    return replace(
        base,
        cvm_name_pattern=cvm,
        cpu=cpu,
        insecure_skip_verify=insecure,
        inventory_refresh=refresh,
        timeout=timeout,
        max_query_metrics=mqm,
        perf_format=fmt,
        sample_max_age=max_age,
        inventory_mode=mode,
    )


SCHEMA = common.Schema(ExporterConfig.names, TargetConfig, _read_target, target_key, DEFAULT_SESSION_IDLE_TIMEOUT)


def load_config(
    path: str | None,
    env: dict[str, str] | None = None,
    extra_targets: Sequence[str] = (),
    allow_unlisted: bool | None = None,
    session_idle_timeout: float | None = None,
    latest_samples: bool | None = None,
) -> ExporterConfig:
    """Read and validate the config file; errors name the file and the key.

    ``extra_targets`` (``--vcenter.target``) and ``VCENTER_TARGETS`` are listed beside the file's
    targets with the defaults; ``allow_unlisted`` (``--vcenter.allow-unlisted-targets``) and
    ``session_idle_timeout`` and ``latest_samples`` (``--[no-]collector.latest-samples``) override
    the file when given."""
    got = SCHEMA.load(
        path,
        env,
        extra_targets=extra_targets,
        allow_unlisted=allow_unlisted,
        session_idle_timeout=session_idle_timeout,
        latest_samples=latest_samples,
    )
    return ExporterConfig(**got.fields(path), latest_samples=got.latest_samples)
