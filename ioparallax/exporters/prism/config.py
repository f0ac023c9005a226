"""Configuration of the Prism exporter: targets, credentials, TLS, sampling.

A YAML file (``--config.file``)::

    defaults:                         # applied to every listed target
      username: monitor
      password_env: PRISM_PASSWORD    # the password comes from this environment variable
      timeout: 30s                    # one HTTP request
      inventory_refresh: 60s          # VM list (host, power state)
      page_size: 500                  # virtual_disks entities per request
      v2_sample_delay: 10s            # an answer dated this long after a 30 s boundary is that sample
      v2_sample_keeper: true          # read each 30 s sample even when no probe does
      controller_api: v2              # v4: storage view from v4 time series (AOS 6.8+), 1 request per disk
      v4_concurrency: 8               # v4 requests in flight
      cpu: true                       # CPU of VMs, CVMs, hosts (the VM and host lists at every read)
    allow_unlisted_targets: false     # default: a ?target= not listed below is refused (HTTP 400)
    latest_samples: true
    session_idle_timeout: 10m
    targets:
      prism1.example.com:             # the ?target= value (host, host:port or https://host[:port]/)
        password_env: PRISM1_PASSWORD
      prism-lab.example.com:
        username: lab
        password: secret              # inline passwords are allowed but discouraged
        insecure_skip_verify: true    # explicit opt-out of TLS certificate verification
                                      # (alias: tls_verify: false)
      10.0.0.50:
        ca_file: /etc/ssl/prism-ca.pem

Without a config file the credentials come from ``PRISM_USERNAME`` and ``PRISM_PASSWORD`` (TLS
verification on), and the targets that may receive them are listed with ``--prism.target`` (or
``PRISM_TARGETS``, comma-separated). Target names are compared in their normalised form
(:mod:`.address`). Passwords are never logged nor shown on the landing page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from ioparallax.exporters.common import targets as common
from ioparallax.exporters.prism.address import target_key
from ioparallax.units import parse_duration
from ioparallax.yamlconf import Section

DEFAULT_TIMEOUT = 30.0
DEFAULT_INVENTORY_REFRESH = 60.0
DEFAULT_PAGE_SIZE = 500
#: An answer dated (by Prism's Date header) at least this long after a 30 s boundary holds the
#: sample that ended at that boundary: Prism's publish delay plus the answer's time must be less.
DEFAULT_V2_SAMPLE_DELAY = 10.0
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0
SAMPLE_SECONDS = 30


@dataclass(frozen=True)
class TargetConfig:
    """How to reach one Prism. ``password`` is resolved, never printed (see ``describe``)."""

    username: str = ""
    password: str = field(default="", repr=False)
    password_source: str = ""
    insecure_skip_verify: bool = False  # True: the explicit opt-out of TLS verification
    ca_file: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    inventory_refresh: float = DEFAULT_INVENTORY_REFRESH
    page_size: int = DEFAULT_PAGE_SIZE
    v2_sample_delay: float = DEFAULT_V2_SAMPLE_DELAY
    v2_sample_keeper: bool = True
    controller_api: str = "v2"  # v4: the storage view from v4 time series, one request per disk
    v4_concurrency: int = 8
    cpu: bool = True  # CPU of the VMs, CVMs and hosts: the VM and host lists read at every read
    scheme: str = "https"  # "http": plain HTTP (a simulator; credentials then cross in clear text)

    def describe(self) -> str:
        tls = (
            "none (scheme: http, credentials in clear text)"
            if self.scheme == "http"
            else "verification OFF (insecure_skip_verify)"
            if self.insecure_skip_verify
            else (f"verified with {self.ca_file}" if self.ca_file else "verified with the system CAs")
        )
        pw = f"(set, {self.password_source})" if self.password else "(not set)"
        return (
            f"user={self.username or '(none)'} password={pw} tls={tls} timeout={self.timeout:g}s "
            f"inventory_refresh={self.inventory_refresh:g}s page_size={self.page_size} "
            f"v2_sample_delay={self.v2_sample_delay:g}s v2_sample_keeper={'on' if self.v2_sample_keeper else 'off'} "
            f"controller_api={self.controller_api}"
        )


@dataclass(frozen=True)
class Collectors:
    """What a probe exposes beyond the counters (series budget, docs/prism.md)."""

    latest_samples: bool = True  # prism_virtual_disk_sample_*: 6 gauges per disk
    controller: bool = True  # prism_virtual_disk_controller_*: 6 counters per disk
    vm_info: bool = True  # prism_vm_info and the VM list call


@dataclass(frozen=True)
class ExporterConfig(common.ExporterConfig[TargetConfig]):
    """The targets' settings and allow-list (common.ExporterConfig), and what a probe exposes."""

    names: ClassVar[common.Names] = common.Names("Prism addresses", "PRISM", "prism")

    session_idle_timeout: float = DEFAULT_SESSION_IDLE_TIMEOUT
    collectors: Collectors = Collectors()
    #: Prism seconds per local second for the sample keeper's sleeps (tests with an accelerated
    #: simulator clock); never from the file.
    time_scale: float = 1.0

    def collector_lines(self) -> list[str]:
        c = self.collectors
        return [
            f"collectors: latest_samples={'on' if c.latest_samples else 'off'} "
            f"controller={'on' if c.controller else 'off'} vm_info={'on' if c.vm_info else 'off'}"
        ]


_duration = common.positive_duration


def _read_target(sec: Section, base: TargetConfig) -> TargetConfig:
    """A target's own keys (common.Schema reads its credentials and ca_file)."""
    insecure = common.read_insecure_skip_verify(sec, base.insecure_skip_verify)
    timeout = sec.get("timeout", _duration, default=base.timeout)
    refresh = sec.get("inventory_refresh", _duration, default=base.inventory_refresh)
    page_size = sec.get("page_size", int, default=base.page_size)
    if not 1 <= page_size <= 10000:
        raise sec.error("page_size", f"expected 1-10000, got {page_size}")
    delay = sec.get("v2_sample_delay", parse_duration, default=base.v2_sample_delay)
    if not 0 <= delay <= SAMPLE_SECONDS - 5:
        raise sec.error("v2_sample_delay", f"expected 0s-25s (inside a 30 s sample), got {delay:g}s")
    keeper = sec.get("v2_sample_keeper", bool, default=base.v2_sample_keeper)
    api = sec.get("controller_api", str, default=base.controller_api)
    if api not in ("v2", "v4"):
        raise sec.error("controller_api", f"expected v2 or v4, got {api!r}")
    conc = sec.get("v4_concurrency", int, default=base.v4_concurrency)
    if not 1 <= conc <= 64:
        raise sec.error("v4_concurrency", f"expected 1-64, got {conc}")
    scheme = sec.get("scheme", str, default=base.scheme)
    if scheme not in ("https", "http"):
        raise sec.error("scheme", f"expected https (Prism) or http (a plain simulator), got {scheme!r}")
    cpu = sec.get("cpu", bool, default=base.cpu)
    sec.reject_unknown()
    return replace(
        base,
        cpu=cpu,
        insecure_skip_verify=insecure,
        timeout=timeout,
        inventory_refresh=refresh,
        page_size=page_size,
        v2_sample_delay=delay,
        v2_sample_keeper=keeper,
        controller_api=api,
        v4_concurrency=conc,
        scheme=scheme,
    )


SCHEMA = common.Schema(ExporterConfig.names, TargetConfig, _read_target, target_key, DEFAULT_SESSION_IDLE_TIMEOUT)


def load_config(
    path: str | None,
    env: dict[str, str] | None = None,
    extra_targets: Sequence[str] = (),
    allow_unlisted: bool | None = None,
    session_idle_timeout: float | None = None,
    latest_samples: bool | None = None,
    controller: bool | None = None,
    vm_info: bool | None = None,
) -> ExporterConfig:
    """Read and validate the config file; errors name the file and the key. Flags given on the
    command line override the file."""
    got = SCHEMA.load(
        path,
        env,
        extra_targets=extra_targets,
        allow_unlisted=allow_unlisted,
        session_idle_timeout=session_idle_timeout,
        latest_samples=latest_samples,
    )
    collectors = Collectors(
        latest_samples=got.latest_samples,
        controller=True if controller is None else controller,
        vm_info=True if vm_info is None else vm_info,
    )
    return ExporterConfig(**got.fields(path), collectors=collectors)
