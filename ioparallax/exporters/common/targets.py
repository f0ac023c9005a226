"""Config parsing shared by the multi-target exporters (vCenter, Prism): credentials, TLS, allow-list.

Each exporter keeps its own ``TargetConfig``, an :class:`Access` (how to reach a target) with its
own settings, read by its :class:`Schema` (a :class:`Key` per setting). What is the same in both
lives here: where a password comes from (inline, ``password_env``, ``<PREFIX>_PASSWORD``), the TLS
opt-out (``insecure_skip_verify``, Prometheus' ``tls_config`` spelling, with its alias
``tls_verify``, also read by the Stargate exporter's ``prism:`` section), the ``ca_file`` check, the
request ``timeout``, the ``targets:`` section and the ``--<exporter>.target`` / ``<PREFIX>_TARGETS``
allow-list, the refusal message of an unlisted target and the error when nothing may be probed.
Errors name the file and the key (:class:`~ioparallax.yamlconf.ConfigError`).

The ``targets:`` section of either exporter's file::

    targets:
      vc1.example.com:              # the ?target= value (host, host:port or https://host[:port]/)
        password_env: VC1_PASSWORD  # the password comes from this environment variable
      vc-lab.example.com:
        username: lab
        password: secret            # inline passwords are allowed but discouraged
        insecure_skip_verify: true  # explicit opt-out of TLS certificate verification
                                    # (alias: tls_verify: false)
      vc2.example.com:
        ca_file: /etc/ssl/vc2-ca.pem
        timeout: 60s                # one request
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, TypedDict, TypeVar, Unpack

from ioparallax.units import parse_duration
from ioparallax.yamlconf import ConfigError, Section, load_yaml

T = TypeVar("T")


@dataclass(frozen=True)
class Credentials:
    """A username and a resolved password; ``source`` says where the password came from (for messages)."""

    username: str = ""
    password: str = field(default="", repr=False)
    source: str = ""  # "env VC1_PASSWORD", "inline in the config file", "" (not set)


@dataclass(frozen=True)
class Access:
    """How to reach one target, the part every exporter's ``TargetConfig`` starts with (read by
    :class:`Schema`): the credentials, the TLS opt-out and CA bundle, and the timeout of one
    request. ``password`` is resolved, never printed (see :meth:`access`)."""

    username: str = ""
    password: str = field(default="", repr=False)
    password_source: str = ""  # "env VC1_PASSWORD", "inline in the config file", "" (for messages)
    insecure_skip_verify: bool = False  # True: the explicit opt-out of TLS verification
    ca_file: str | None = None
    timeout: float = 30.0  # seconds one request may take

    def tls(self) -> str:
        """How TLS is checked, for the landing page."""
        if self.insecure_skip_verify:
            return "verification OFF (insecure_skip_verify)"
        return f"verified with {self.ca_file}" if self.ca_file else "verified with the system CAs"

    def access(self) -> str:
        """The landing page's words on the credentials and TLS (never the password)."""
        password = f"(set, {self.password_source})" if self.password else "(not set)"
        return f"user={self.username or '(none)'} password={password} tls={self.tls()}"


A = TypeVar("A", bound=Access)


@dataclass(frozen=True)
class Key:
    """One key of a target's section beyond its :class:`Access`, read into the ``TargetConfig``
    field of the same name: ``kind`` as for :meth:`~ioparallax.yamlconf.Section.get` (a type, or
    a function raising ValueError), then ``check`` (the value read -> the value kept, or
    ValueError saying what was expected: the error names the file and the key)."""

    name: str
    kind: Any
    check: Callable[[Any], Any] | None = None


def within(lo: int, hi: int) -> Callable[[int], int]:
    """A :attr:`Key.check`: a number from ``lo`` to ``hi``."""

    def check(value: int) -> int:
        if not lo <= value <= hi:
            raise ValueError(f"expected {lo}-{hi}, got {value}")
        return value

    return check


def one_of(values: Sequence[str], expected: str | None = None) -> Callable[[str], str]:
    """A :attr:`Key.check`: one of ``values`` (``expected`` says them in the error, default
    "one of a, b")."""

    def check(value: str) -> str:
        if value not in values:
            raise ValueError(f"expected {expected or 'one of ' + ', '.join(values)}, got {value!r}")
        return value

    return check


def positive_duration(value: Any) -> float:
    """A duration (``30s``, ``5m``, a number of seconds) that must be more than zero."""
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"must be positive, got {value!r}")
    return seconds


def env_credentials(env: dict[str, str], prefix: str) -> Credentials:
    """``<PREFIX>_USERNAME`` and ``<PREFIX>_PASSWORD``: the credentials without a config file."""
    password = env.get(f"{prefix}_PASSWORD", "")
    return Credentials(
        username=env.get(f"{prefix}_USERNAME", ""),
        password=password,
        source=f"env {prefix}_PASSWORD" if password else "",
    )


def env_targets(env: dict[str, str], prefix: str) -> list[str]:
    """``<PREFIX>_TARGETS``: comma- or space-separated target names."""
    return [t for t in re.split(r"[,\s]+", env.get(f"{prefix}_TARGETS", "")) if t]


def read_credentials(sec: Section, base: Credentials, env: dict[str, str]) -> Credentials:
    """``username``, ``username_env``, ``password`` or ``password_env`` of one section over ``base``."""
    username = sec.get("username", str, default=base.username)
    password, source = base.password, base.source
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
    return Credentials(username=username, password=password, source=source)


#: The one key of the TLS opt-out, and its alias (the opposite truth value): ``tls_verify: false``
#: is ``insecure_skip_verify: true``.
INSECURE_KEY = "insecure_skip_verify"
INSECURE_ALIAS = "tls_verify"


def read_insecure_skip_verify(sec: Section, default: bool) -> bool:
    """``insecure_skip_verify`` (true: TLS certificates are not verified, the explicit opt-out), or
    its alias ``tls_verify`` (false means the same); both given must agree, else a ConfigError
    naming the file and the key."""
    skip = sec.get(INSECURE_KEY, bool, default=None)
    verify = sec.get(INSECURE_ALIAS, bool, default=None)
    if skip is not None and verify is not None and skip == verify:
        raise sec.error(
            INSECURE_ALIAS,
            f"{INSECURE_ALIAS}: {str(verify).lower()} contradicts {INSECURE_KEY}: {str(skip).lower()} "
            f"in the same section ({INSECURE_ALIAS} is the older spelling with the opposite meaning; "
            f"give {INSECURE_KEY} only)",
        )
    if skip is not None:
        return bool(skip)
    if verify is not None:
        return not verify
    return default


def read_ca_file(sec: Section, default: str | None) -> str | None:
    """``ca_file``: a CA bundle that must exist when given."""
    ca_file = sec.get("ca_file", str, default=default)
    if ca_file is not None and not os.path.isfile(ca_file):
        raise sec.error("ca_file", f"no such file: {ca_file}")
    return ca_file


def read_targets(
    tsec: Section,
    target_key: Callable[[str], str],
    read_target: Callable[[Section], T],
) -> dict[str, T]:
    """The ``targets:`` section, by normalised key; two spellings of one target are an error."""
    targets: dict[str, T] = {}
    for name in list(tsec.data):
        if not isinstance(name, str) or not name.strip():
            raise tsec.error(str(name), "target names must be non-empty strings (host or host:port)")
        try:
            key = target_key(name)
        except ValueError as exc:
            raise tsec.error(name, str(exc)) from None
        if key in targets:
            raise tsec.error(name, f"the same target as another entry (both are {key})")
        targets[key] = read_target(tsec.section(name))
    tsec.reject_unknown()
    return targets


def add_listed_targets(
    targets: dict[str, T],
    names: Iterable[str],
    defaults: T,
    target_key: Callable[[str], str],
    source: str,
    flag: str,
) -> None:
    """List the command line's and the environment's target names with ``defaults`` (a target
    already in the file keeps its own settings); a bad name is a :class:`ConfigError` on ``flag``."""
    for name in names:
        try:
            key = target_key(name)
        except ValueError as exc:
            raise ConfigError(source, flag, str(exc)) from None
        targets.setdefault(key, defaults)


def positive_override(value: float, source: str, flag: str) -> float:
    """A duration given on the command line (``flag``), which must be more than zero."""
    if not value > 0:
        raise ConfigError(source, flag, f"must be positive, got {value}")
    return value


def refusal(key: str, path: str | None, listed_with: str) -> str:
    """Why an unlisted ``key`` is refused (for the 400 answer and the log line); ``listed_with`` names
    the flag and variable that list targets when there is no config file."""
    where = f"--config.file {path}" if path else listed_with
    return (
        f"target {key} is not listed in {where}, and unlisted targets are refused "
        "(credentials are only sent to listed targets)"
    )


def unlisted_line(allow_unlisted: bool) -> str:
    """The landing page's line about unlisted targets."""
    return f"unlisted targets: {'ALLOWED, they receive the default credentials' if allow_unlisted else 'refused'}"


def require_targets(
    allow_unlisted: bool, targets: dict[str, Any], source: str, what: str, prefix: str, exporter: str
) -> None:
    """Refuse a configuration under which no target may be probed: ``what`` names the targets
    ("vCenters"), ``prefix`` the environment variables (``VCENTER``), ``exporter`` the flags (``vcenter``)."""
    if not allow_unlisted and not targets:
        raise ConfigError(
            source,
            "targets",
            f"no targets listed and unlisted targets are refused: list the {what} "
            f"(--{exporter}.target, {prefix}_TARGETS or targets: in the config file), or "
            f"opt in to any target with --{exporter}.allow-unlisted-targets",
        )


@dataclass(frozen=True)
class Loaded(Generic[T]):
    """What the config file and the flags say that both exporters have: the targets' settings."""

    defaults: T
    targets: dict[str, T]
    allow_unlisted: bool
    session_idle_timeout: float
    latest_samples: bool

    def fields(self, path: str | os.PathLike[str] | None) -> dict[str, Any]:
        """The :class:`ExporterConfig` fields of the config file ``path`` (all but the exporter's
        collector switches)."""
        return {
            "defaults": self.defaults,
            "targets": self.targets,
            "allow_unlisted": self.allow_unlisted,
            "path": path and str(path),
            "session_idle_timeout": self.session_idle_timeout,
        }


@dataclass(frozen=True)
class Names:
    """How an exporter names its targets in messages: ``what`` ("vCenters"), ``prefix`` of the
    environment variables (``VCENTER``), ``exporter`` of the flags (``vcenter``)."""

    what: str
    prefix: str
    exporter: str


class Flags(TypedDict, total=False):
    """What the command line may say over the config file: the targets it lists
    (``--<exporter>.target``), and, when given, ``--<exporter>.allow-unlisted-targets``,
    ``--<exporter>.session-idle-timeout`` and ``--[no-]collector.latest-samples``."""

    extra_targets: Iterable[str]
    allow_unlisted: bool | None
    session_idle_timeout: float | None
    latest_samples: bool | None


def load(
    path: str | None,
    env: dict[str, str] | None,
    base: Callable[[Credentials], T],
    read_target: Callable[[Section, T, dict[str, str]], T],
    target_key: Callable[[str], str],
    names: Names,
    extra_targets: Iterable[str] = (),
    allow_unlisted: bool | None = None,
    session_idle_timeout: float | None = None,
    latest_samples: bool | None = None,
    default_idle: float = 600.0,
) -> Loaded[T]:
    """The file's ``defaults``, ``allow_unlisted_targets``, ``session_idle_timeout``,
    ``latest_samples`` and ``targets`` (each target over the defaults, over ``base`` made of the
    ``<PREFIX>_USERNAME``/``_PASSWORD`` credentials of ``env``, default the process'), the
    targets listed with ``--<exporter>.target`` and ``<PREFIX>_TARGETS``, and the flags that
    override the file when given; refused when no target may be probed."""
    env = dict(os.environ) if env is None else env
    source = path or "the command line"
    defaults, allow, idle, latest = base(env_credentials(env, names.prefix)), False, default_idle, True
    targets: dict[str, T] = {}
    if path is not None:
        root = Section(load_yaml(path), path)
        defaults = read_target(root.section("defaults"), defaults, env)
        allow = root.get("allow_unlisted_targets", bool, default=False)
        idle = root.get("session_idle_timeout", positive_duration, default=idle)
        latest = root.get("latest_samples", bool, default=latest)
        file_defaults = defaults
        targets = read_targets(root.section("targets"), target_key, lambda sec: read_target(sec, file_defaults, env))
        root.reject_unknown()
    listed = [*extra_targets, *env_targets(env, names.prefix)]
    add_listed_targets(targets, listed, defaults, target_key, source, f"--{names.exporter}.target")
    if allow_unlisted is not None:
        allow = allow or allow_unlisted
    if session_idle_timeout is not None:
        idle = positive_override(session_idle_timeout, source, f"--{names.exporter}.session-idle-timeout")
    if latest_samples is not None:
        latest = latest_samples
    require_targets(allow, targets, source, names.what, names.prefix, names.exporter)
    return Loaded(defaults, targets, allow, idle, latest)


_UNSET = object()


@dataclass(frozen=True)
class Schema(Generic[A]):
    """How one exporter reads its targets: its :class:`Names`, its ``TargetConfig`` class (an
    :class:`Access` with the exporter's own fields), the :class:`Key` of each of those fields a
    target's section may set, its ``target_key`` and the default session idle timeout."""

    names: Names
    target_config: Callable[..., A]
    keys: Sequence[Key]
    target_key: Callable[[str], str]
    default_idle: float = 600.0

    def load(self, path: str | None, env: dict[str, str] | None = None, **flags: Unpack[Flags]) -> Loaded[A]:
        """:func:`load` with this exporter's parts and the command line's ``flags``."""
        return load(
            path,
            env,
            self._base,
            self._read_target,
            self.target_key,
            self.names,
            **flags,
            default_idle=self.default_idle,
        )

    def _base(self, cred: Credentials) -> A:
        return self.target_config(username=cred.username, password=cred.password, password_source=cred.source)

    def _read_target(self, sec: Section, base: A, env: dict[str, str]) -> A:
        """A target's section over ``base``: its :class:`Access` (the credentials, see
        :func:`read_credentials`; ``ca_file``, ``insecure_skip_verify``, ``timeout``), then the
        exporter's :attr:`keys`; any other key is an error."""
        cred = read_credentials(sec, Credentials(base.username, base.password, base.password_source), env)
        values: dict[str, Any] = {
            "username": cred.username,
            "password": cred.password,
            "password_source": cred.source,
            "ca_file": read_ca_file(sec, base.ca_file),
            "insecure_skip_verify": read_insecure_skip_verify(sec, base.insecure_skip_verify),
            "timeout": sec.get("timeout", positive_duration, default=base.timeout),
        }
        for key in self.keys:
            value = sec.get(key.name, key.kind, default=_UNSET)
            if value is _UNSET:
                continue  # the base's value stands
            if key.check is not None:
                try:
                    value = key.check(value)
                except ValueError as exc:
                    raise sec.error(key.name, str(exc)) from None
            values[key.name] = value
        sec.reject_unknown()
        return replace(base, **values)


@dataclass(frozen=True)
class ExporterConfig(Generic[T]):
    """The shape of a multi-target exporter's configuration: the targets' settings (each
    exporter's own ``TargetConfig``, with a ``describe()`` that never shows a password), the
    allow-list and the session idle timeout. An exporter's subclass sets :attr:`names` and adds
    its collector switches (and their :meth:`collector_lines` for the landing page)."""

    names: ClassVar[Names]

    defaults: T
    targets: dict[str, T]  # by normalised key (the exporter's address.target_key)
    allow_unlisted: bool = False  # True: targets not listed are probed with `defaults` credentials
    path: str | None = None
    session_idle_timeout: float = 600.0

    def target(self, key: str) -> T | None:
        """The settings of a normalised target key, or None when it may not be probed."""
        if key in self.targets:
            return self.targets[key]
        return self.defaults if self.allow_unlisted else None

    def refusal(self, key: str) -> str:
        """Why ``key`` is refused (for the 400 answer and the log line)."""
        n = self.names
        return refusal(key, self.path, f"--{n.exporter}.target / {n.prefix}_TARGETS")

    def collector_lines(self) -> list[str]:
        return []

    def describe(self) -> str:
        """The landing page's configuration (no password: see each TargetConfig.describe)."""
        n = self.names
        lines = [
            f"config file: {self.path or f'(none: credentials from {n.prefix}_USERNAME/{n.prefix}_PASSWORD)'}",
            f"defaults: {self.defaults.describe()}",  # type: ignore[attr-defined]
            unlisted_line(self.allow_unlisted),
            f"session idle timeout: {self.session_idle_timeout:g}s",
            *self.collector_lines(),
        ]
        lines += [f"target {name}: {t.describe()}" for name, t in sorted(self.targets.items())]  # type: ignore[attr-defined]
        return "\n".join(lines)
