"""vdisk -> VM and disk names from Prism's v2 REST API (``GET .../v2.0/virtual_disks``).

Transport and mapping: the requests go through the one Prism client
(:class:`~ioparallax.exporters.common.prismclient.PrismClient`, prism-exporter's: basic auth, TLS
verified unless the config opts out, nothing from the environment, one deadline per request, caps
on the answer) and Prism's paging (:mod:`ioparallax.exporters.common.prismlist`);
:func:`mapping_from_virtual_disks` turns the entities into records; :class:`VDiskNames` keeps the last good answer (inventory: slow-changing, cached for
``refresh_interval``), refreshes it when it is stale, and merges it with the YAML mapping.

A Prism failure (refused, timeout, HTTP error, bad credentials, not JSON) is logged once with its
cause and never fails a probe: the mapping stays as it was (or YAML-only before the first
success). Credentials never appear in a log line, an error message or a ``repr``.

The join (see docs/stargate-simulator.md, "Mapping assumption"): an entity's ``uuid`` is the
vdisk UUID Stargate prints in parentheses after the vdisk name; ``virtual_disk_id`` is
``<cluster id>::<vdisk id>``. vdisks are matched by UUID (globally unique, so a Prism of another
cluster can never label them); the id is used only for a vdisk whose row shows no UUID.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ioparallax.exporters.common import prismlist as paging, targets
from ioparallax.exporters.common.prismclient import PrismClient, TargetError
from ioparallax.exporters.common.prismlist import ParseError
from ioparallax.units import parse_duration
from ioparallax.yamlconf import Section

log = logging.getLogger(__name__)

VIRTUAL_DISKS_PATH = "/PrismGateway/services/rest/v2.0/virtual_disks"
DEFAULT_PORT = 9440


@dataclass
class PrismConfig:
    url: str  # base, e.g. https://10.0.0.10:9440
    username: str = ""
    password: str = field(default="", repr=False)
    insecure_skip_verify: bool = False  # True: the explicit opt-out of TLS verification
    ca_file: str | None = None  # CA bundle to verify against (default: the system CAs)
    timeout: float = 5.0
    refresh_interval: float = 300.0
    page_size: int = 500  # virtual_disks entities per request

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + VIRTUAL_DISKS_PATH


def prism_config(section: Section, environ: dict[str, str] | None = None) -> PrismConfig | None:
    """The ``prism:`` section of --config.file (None when absent); errors name file and key."""
    env = os.environ if environ is None else environ
    if not section.data:
        return None
    url = section.get("url", str).strip()
    if "://" not in url:
        url = f"https://{url}" + ("" if ":" in url.rsplit("]", 1)[-1] else f":{DEFAULT_PORT}")
    if not url.startswith(("http://", "https://")):
        raise section.error("url", f"expected an http:// or https:// URL, got {url!r}")
    if "@" in url.split("://", 1)[1].split("/", 1)[0]:
        # A URL is printed in log lines; credentials in it would be too.
        raise section.error("url", "no credentials in the URL: use username(_env) and password_env")
    username = _inline_or_env(section, "username", env)
    password = _inline_or_env(section, "password", env)
    if password and not username:
        raise section.error("username", "is required with a password")
    insecure = targets.read_insecure_skip_verify(section, False)
    ca_file = section.get("ca_file", str, default="")
    if ca_file:
        if insecure:
            raise section.error("ca_file", "makes no sense with insecure_skip_verify: true (no verification)")
        if not os.path.isfile(ca_file):
            raise section.error("ca_file", f"no such file: {ca_file}")
    timeout = section.get("timeout", parse_duration, default=5.0)
    refresh = section.get("refresh_interval", parse_duration, default=300.0)
    page_size = section.get("page_size", int, default=500)
    if not 1 <= page_size <= 10_000:
        raise section.error("page_size", f"expected 1-10000, got {page_size}")
    if timeout <= 0:
        raise section.error("timeout", "must be positive")
    if refresh < 0:
        raise section.error("refresh_interval", "must not be negative")
    section.reject_unknown()
    return PrismConfig(
        url=url,
        username=username,
        password=password,
        insecure_skip_verify=insecure,
        ca_file=ca_file or None,
        timeout=timeout,
        refresh_interval=refresh,
        page_size=page_size,
    )


def virtual_disks(client: PrismClient, cfg: PrismConfig, timeout: float | None = None) -> list[dict[str, Any]]:
    """Every entity of ``virtual_disks``, page by page (``count=page_size``; Prism may page a
    list asked without ``count``, and a mapping of the first page only would leave the other
    vdisks unnamed), with prism-exporter's paging. ``timeout`` bounds the whole list, each
    request at most ``cfg.timeout``. Raises TargetError or ParseError naming the cause."""
    budget = cfg.timeout if timeout is None else timeout
    deadline = time.monotonic() + budget

    def get(params: dict[str, Any]) -> tuple[Any, None]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TargetError(f"timed out after {budget:.1f} s (page {params.get('page')})", "timeout")
        return client.get(VIRTUAL_DISKS_PATH, params, min(left, cfg.timeout)).doc, None

    entities, _, _ = paging.list_all(get, "virtual_disks", cfg.page_size, name="prism-names")
    return entities


@dataclass(frozen=True)
class VDiskName:
    vm: str
    disk: str  # Prism's disk_address, e.g. scsi.1 (bus.index, not vCenter's scsi0:1)
    disk_uuid: str  # Prism's device_uuid: vCenter's virtual disk UUID, lowercase


def mapping_from_virtual_disks(entities: list[dict[str, Any]]) -> tuple[dict[str, VDiskName], dict[str, VDiskName]]:
    """(by vdisk UUID, by Stargate vdisk id) -> VM name, disk address and the disk's vCenter UUID.
    Entities without a VM (volume groups, unattached disks) are skipped."""
    by_uuid: dict[str, VDiskName] = {}
    by_id: dict[str, VDiskName] = {}
    for e in entities:
        vm = e.get("attached_vmname")
        if not isinstance(vm, str) or not vm:
            continue
        disk = e.get("disk_address")
        device = e.get("device_uuid")
        name = VDiskName(vm, disk if isinstance(disk, str) else "", device.lower() if isinstance(device, str) else "")
        uuid = e.get("uuid")
        if isinstance(uuid, str) and uuid:
            by_uuid[uuid.lower()] = name
        vdisk_id = str(e.get("virtual_disk_id") or "").rpartition("::")[2]
        if vdisk_id.isdigit():
            by_id[vdisk_id] = name
    return by_uuid, by_id


class VDiskNames:
    """The vdisk -> VM/disk mapping of a probe: YAML entries first, then Prism's (cached)."""

    def __init__(
        self,
        yaml_mapping: dict[str, dict[str, str]] | None = None,
        prism: PrismConfig | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.yaml = yaml_mapping or {}
        self.prism = prism
        self.client = PrismClient(prism.url, prism) if prism else None
        self.clock = clock
        self._by_uuid: dict[str, VDiskName] = {}
        self._by_id: dict[str, VDiskName] = {}
        self._fetched_at: float | None = None  # last success
        self._tried_at: float | None = None  # last attempt
        self._last_error: str | None = None
        self._lock = threading.Lock()
        self._refreshing = threading.Lock()

    @property
    def prism_up(self) -> bool | None:
        """None without Prism; else whether the last request succeeded."""
        if self.client is None:
            return None
        return self._tried_at is not None and self._last_error is None

    @property
    def prism_age(self) -> float | None:
        return None if self._fetched_at is None else self.clock() - self._fetched_at

    #: After a failure, Prism is asked again this soon (or at refresh_interval if shorter).
    RETRY_AFTER_FAILURE = 60.0

    def stale(self) -> bool:
        if self.client is None:
            return False
        last = self._tried_at
        assert self.prism is not None
        interval = self.prism.refresh_interval
        if self._last_error is not None:
            interval = min(interval, self.RETRY_AFTER_FAILURE)
        return last is None or self.clock() - last >= interval

    def refresh(self, timeout: float | None = None) -> bool:
        """Ask Prism now (one request at a time; a concurrent caller returns at once). On
        failure the previous mapping stays. True if this call got a fresh answer."""
        if self.client is None or self.prism is None or not self._refreshing.acquire(blocking=False):
            return False
        try:
            try:
                by_uuid, by_id = mapping_from_virtual_disks(virtual_disks(self.client, self.prism, timeout))
            except Exception as exc:  # TargetError, ParseError, or a surprise in the answer: never escapes
                cause = (
                    exc.cause
                    if isinstance(exc, TargetError)
                    else str(exc)
                    if isinstance(exc, ParseError)
                    else f"unexpected {exc.__class__.__name__} reading the answer"
                )
                error = f"{self.prism.endpoint}: {cause}"
                with self._lock:
                    self._tried_at = self.clock()
                    first = self._last_error != error
                    self._last_error = error
                kept = (
                    f"keeping the mapping from {self.prism_age:.0f} s ago"
                    if self._fetched_at is not None
                    else "vdisk names from the YAML mapping only"
                )
                # One warning per new cause; a persisting one is repeated at debug level.
                log.log(logging.WARNING if first else logging.DEBUG, "prism virtual_disks failed: %s; %s", error, kept)
                return False
            with self._lock:
                self._by_uuid, self._by_id = by_uuid, by_id
                self._fetched_at = self._tried_at = self.clock()
                if self._last_error is not None:
                    log.info("prism virtual_disks answers again (%d vdisks attached to VMs)", len(by_uuid))
                self._last_error = None
            log.debug("prism virtual_disks: %d vdisks attached to VMs", len(by_uuid))
            return True
        finally:
            self._refreshing.release()

    def start_refresh_if_stale(self) -> threading.Thread | None:
        """Refresh in a thread of its own (a probe runs meanwhile and need not wait for it)."""
        if not self.stale():
            return None
        t = threading.Thread(target=self.refresh, name="prism-refresh", daemon=True)
        t.start()
        return t

    def lookup(self, vdisk_id: str, vdisk_uuid: str) -> dict[str, str]:
        """{"vm", "disk", "disk_uuid"} for a vdisk (empty when unknown). YAML wins over Prism."""
        entry = self.yaml.get(vdisk_id)
        if entry is not None:
            return entry
        with self._lock:
            name = self._by_uuid.get(vdisk_uuid.lower()) if vdisk_uuid else self._by_id.get(vdisk_id)
        return {"vm": name.vm, "disk": name.disk, "disk_uuid": name.disk_uuid} if name else {}


def _inline_or_env(section: Section, name: str, env: Mapping[str, str]) -> str:
    """``name`` given inline or through ``name_env`` (the variable holding it), not both."""
    value = section.get(name, str, default="")
    var = section.get(f"{name}_env", str, default="")
    if var:
        if value:
            raise section.error(f"{name}_env", f"give {name} or {name}_env, not both")
        value = env.get(var, "")
        if not value:
            raise section.error(f"{name}_env", f"environment variable {var} is not set")
    return value
