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
    targets:                          # the ?target= values (common/targets.py: credentials, TLS)
      prism1.example.com:
        password_env: PRISM1_PASSWORD
      10.0.0.50:
        ca_file: /etc/ssl/prism-ca.pem
        controller_api: v4            # any of the defaults' keys, for this target

Without a config file the credentials come from ``PRISM_USERNAME`` and ``PRISM_PASSWORD`` (TLS
verification on), and the targets that may receive them are listed with ``--prism.target`` (or
``PRISM_TARGETS``, comma-separated). Target names are compared in their normalised form
(:mod:`.address`). Passwords are never logged nor shown on the landing page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Unpack

from ioparallax.exporters.common import targets as common
from ioparallax.exporters.prism.address import target_key
from ioparallax.units import parse_duration

DEFAULT_INVENTORY_REFRESH = 60.0
DEFAULT_PAGE_SIZE = 500
#: An answer dated (by Prism's Date header) at least this long after a 30 s boundary holds the
#: sample that ended at that boundary: Prism's publish delay plus the answer's time must be less.
DEFAULT_V2_SAMPLE_DELAY = 10.0
DEFAULT_SESSION_IDLE_TIMEOUT = 600.0
SAMPLE_SECONDS = 30


@dataclass(frozen=True)
class TargetConfig(common.Access):
    """How to reach one Prism (common.Access: credentials, TLS, timeout of one request) and read it."""

    inventory_refresh: float = DEFAULT_INVENTORY_REFRESH
    page_size: int = DEFAULT_PAGE_SIZE
    v2_sample_delay: float = DEFAULT_V2_SAMPLE_DELAY
    v2_sample_keeper: bool = True
    controller_api: str = "v2"  # v4: the storage view from v4 time series, one request per disk
    v4_concurrency: int = 8
    cpu: bool = True  # CPU of the VMs, CVMs and hosts: the VM and host lists read at every read
    scheme: str = "https"  # "http": plain HTTP (a simulator; credentials then cross in clear text)

    def tls(self) -> str:
        return "none (scheme: http, credentials in clear text)" if self.scheme == "http" else super().tls()

    def describe(self) -> str:
        return (
            f"{self.access()} timeout={self.timeout:g}s "
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


def _sample_delay(delay: float) -> float:
    if not 0 <= delay <= SAMPLE_SECONDS - 5:
        raise ValueError(f"expected 0s-25s (inside a 30 s sample), got {delay:g}s")
    return delay


#: A target's own keys (common.Schema reads its credentials, TLS and timeout first).
SCHEMA = common.Schema(
    ExporterConfig.names,
    TargetConfig,
    (
        common.Key("inventory_refresh", common.positive_duration),
        common.Key("page_size", int, common.within(1, 10000)),
        common.Key("v2_sample_delay", parse_duration, _sample_delay),
        common.Key("v2_sample_keeper", bool),
        common.Key("controller_api", str, common.one_of(("v2", "v4"), "v2 or v4")),
        common.Key("v4_concurrency", int, common.within(1, 64)),
        common.Key("scheme", str, common.one_of(("https", "http"), "https (Prism) or http (a plain simulator)")),
        common.Key("cpu", bool),
    ),
    target_key,
    DEFAULT_SESSION_IDLE_TIMEOUT,
)


def load_config(
    path: str | None,
    env: dict[str, str] | None = None,
    controller: bool | None = None,
    vm_info: bool | None = None,
    **flags: Unpack[common.Flags],
) -> ExporterConfig:
    """Read and validate the config file; errors name the file and the key. The command line's
    ``flags`` (common.Flags), ``controller`` and ``vm_info`` override the file when given."""
    got = SCHEMA.load(path, env, **flags)
    collectors = Collectors(
        latest_samples=got.latest_samples,
        controller=True if controller is None else controller,
        vm_info=True if vm_info is None else vm_info,
    )
    return ExporterConfig(**got.fields(path), collectors=collectors)
