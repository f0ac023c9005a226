"""Configuration of the vCenter exporter: targets, credentials, TLS, refresh intervals.

A YAML file (``--config.file``)::

    defaults:                       # applied to every target (and to targets not listed)
      username: monitor@vsphere.local
      password_env: VCENTER_PASSWORD  # the password comes from this environment variable
      inventory_refresh: 5m
      timeout: 30s
    targets:
      vc1.example.com:              # the ?target= value (host or host:port)
        password_env: VC1_PASSWORD
      vc-lab.example.com:
        username: lab
        password: secret            # inline passwords are allowed but discouraged
        insecure_skip_verify: true  # explicit opt-out of TLS certificate verification
      vc2.example.com:
        ca_file: /etc/ssl/vc2-ca.pem

Without a config file, any target may be probed with the credentials from the environment
variables ``VCENTER_USERNAME`` and ``VCENTER_PASSWORD`` and TLS verification on.
Passwords are never logged nor shown on the landing page.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

from exporters.common.config import ConfigError, Section, load_yaml, parse_duration

DEFAULT_INVENTORY_REFRESH = 300.0
DEFAULT_TIMEOUT = 30.0
PERF_FORMATS = ("csv", "normal")


@dataclass(frozen=True)
class TargetConfig:
    """How to reach one vCenter. ``password`` is resolved, never printed (see ``describe``)."""

    username: str = ""
    password: str = field(default="", repr=False)
    password_source: str = ""          # "env VC1_PASSWORD", "file", "" (for messages)
    insecure_skip_verify: bool = False
    ca_file: str | None = None
    inventory_refresh: float = DEFAULT_INVENTORY_REFRESH
    timeout: float = DEFAULT_TIMEOUT   # socket timeout of one SOAP call
    max_query_metrics: int | None = None  # None: read config.vpxd.stats.maxQueryMetrics (default 256)
    perf_format: str = "csv"            # csv is ~40 % cheaper to parse; "normal" for old servers

    def describe(self) -> str:
        tls = "verification OFF (insecure_skip_verify)" if self.insecure_skip_verify else (
            f"verified with {self.ca_file}" if self.ca_file else "verified with the system CAs")
        return (f"user={self.username or '(none)'} password={'(set, ' + self.password_source + ')' if self.password else '(not set)'} "
                f"tls={tls} inventory_refresh={self.inventory_refresh:g}s timeout={self.timeout:g}s "
                f"perf_format={self.perf_format}")


@dataclass(frozen=True)
class ExporterConfig:
    defaults: TargetConfig
    targets: dict[str, TargetConfig]
    allow_unlisted: bool = True  # targets not listed use `defaults`
    path: str | None = None

    def target(self, name: str) -> TargetConfig | None:
        if name in self.targets:
            return self.targets[name]
        return self.defaults if self.allow_unlisted else None

    def describe(self) -> str:
        lines = [f"config file: {self.path or '(none: credentials from VCENTER_USERNAME/VCENTER_PASSWORD)'}",
                 f"defaults: {self.defaults.describe()}",
                 f"unlisted targets: {'allowed, with the defaults' if self.allow_unlisted else 'refused'}"]
        lines += [f"target {name}: {t.describe()}" for name, t in sorted(self.targets.items())]
        return "\n".join(lines)


def _duration(value: Any) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return seconds


def _read_target(sec: Section, base: TargetConfig, env: dict[str, str]) -> TargetConfig:
    username = sec.get("username", str, default=base.username)
    password, source = base.password, base.password_source
    if "password" in sec.data and "password_env" in sec.data:
        raise sec.error("password", "give either password or password_env, not both")
    inline = sec.get("password", str, default=None)
    if inline is not None:
        password, source = inline, "inline in the config file"
    var = sec.get("password_env", str, default=None)
    if var is not None:
        if var not in env:
            raise sec.error("password_env", f"environment variable {var} is not set")
        password, source = env[var], f"env {var}"
    user_var = sec.get("username_env", str, default=None)
    if user_var is not None:
        if user_var not in env:
            raise sec.error("username_env", f"environment variable {user_var} is not set")
        username = env[user_var]
    insecure = sec.get("insecure_skip_verify", bool, default=base.insecure_skip_verify)
    ca_file = sec.get("ca_file", str, default=base.ca_file)
    if ca_file is not None and not os.path.isfile(ca_file):
        raise sec.error("ca_file", f"no such file: {ca_file}")
    refresh = sec.get("inventory_refresh", _duration, default=base.inventory_refresh)
    timeout = sec.get("timeout", _duration, default=base.timeout)
    mqm = sec.get("max_query_metrics", int, default=base.max_query_metrics)
    if mqm is not None and mqm < 1:
        raise sec.error("max_query_metrics", f"must be at least 1, got {mqm}")
    fmt = sec.get("perf_format", str, default=base.perf_format)
    if fmt not in PERF_FORMATS:
        raise sec.error("perf_format", f"expected one of {', '.join(PERF_FORMATS)}, got {fmt!r}")
    sec.reject_unknown()
    return replace(base, username=username, password=password, password_source=source,
                   insecure_skip_verify=insecure, ca_file=ca_file, inventory_refresh=refresh,
                   timeout=timeout, max_query_metrics=mqm, perf_format=fmt)


def env_defaults(env: dict[str, str] | None = None) -> TargetConfig:
    env = dict(os.environ) if env is None else env
    password = env.get("VCENTER_PASSWORD", "")
    return TargetConfig(username=env.get("VCENTER_USERNAME", ""), password=password,
                        password_source="env VCENTER_PASSWORD" if password else "")


def load_config(path: str | None, env: dict[str, str] | None = None) -> ExporterConfig:
    """Read and validate the config file; errors name the file and the key."""
    env = dict(os.environ) if env is None else env
    base = env_defaults(env)
    if path is None:
        return ExporterConfig(defaults=base, targets={})
    root = Section(load_yaml(path), path)
    defaults = _read_target(root.section("defaults"), base, env)
    allow = root.get("allow_unlisted_targets", bool, default=True)
    targets: dict[str, TargetConfig] = {}
    tsec = root.section("targets")
    for name in list(tsec.data):
        if not isinstance(name, str) or not name.strip():
            raise tsec.error(str(name), "target names must be non-empty strings (host or host:port)")
        targets[name] = _read_target(tsec.section(name), defaults, env)
    tsec.reject_unknown()
    root.reject_unknown()
    if not allow and not targets:
        raise ConfigError(path, "targets", "no targets listed and allow_unlisted_targets is false")
    return ExporterConfig(defaults=defaults, targets=targets, allow_unlisted=allow, path=str(path))
