"""The inventory kept current with the PropertyCollector's ``WaitForUpdatesEx``: one full read,
then only what changed.

A refresh that reads the whole inventory again (``RetrievePropertiesEx``) costs the vCenter and
the exporter as much as the first read (at 5,000 VMs on stock vcsim ~35 MB of XML, 5-19 s), and a
probe that overlaps it shares the cores with it: it took up to 2.1x a steady probe's time at the
median and 4.3x for the slowest (bench/vcenter_scrape.py --inventory). Here the target gets a PropertyCollector of its own
(``CreatePropertyCollector``) with one filter (``CreateFilter``, the same object and property set
as the full read, ``partialUpdates`` false, so a changed property comes whole). The first
``WaitForUpdatesEx`` (version "") gives every object as ``enter``, paged (``truncated``); each
later one (``maxWaitSeconds`` 0: answer at once) gives only the objects that entered, changed or
left since the version it names, usually nothing. The version string of the last answer is kept.

The records kept per object are small (the parsed properties, never XML), the published
:class:`~.inventory.VirtualMachine` list is rebuilt only for the VMs that changed (all of them when
a host's or datastore's name changed), and a refresh that finds nothing returns ``None``, so the
collection keeps its exposition cache.

Any failure of an update (a SOAP fault such as ``InvalidCollectorVersion`` or a filter that is gone,
an answer that cannot be read, a change this module does not understand) is logged naming the
target and the cause, and the inventory is read whole again through a new collector and filter.
A new session (re-login) means a new collector: the next read is a full one. A vCenter (or a
capture being replayed) that refuses ``CreatePropertyCollector`` or ``CreateFilter`` is read with
the paged ``RetrievePropertiesEx`` of :func:`.inventory.collect_inventory_soap` instead, every refresh, as before.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyVmomi import vim, vmodl

from ioparallax.exporters.vcenter.client import (
    HOST_PROPERTIES,
    MAX_OBJECT_UPDATES,
    STALE_CONNECTION,
    VM_PROPERTIES,
    TargetError,
    create_collector_body,
    create_filter_body,
    destroy_collector_body,
    post,
    wait_body,
)
from ioparallax.exporters.vcenter.inventory import collect_inventory_soap
from ioparallax.exporters.vcenter.parse import (
    PAUSE_EVERY,
    GuestDisk,
    ObjectUpdate,
    UpdateSet,
    VirtualDisk,
    VirtualMachine,
    _disk_devices,
    _int,
    _no_pause,
    _value_text,
    disks_from_device_xml,
    guest_disks_from_xml,
    moref_answer,
    parse_update_set,
)

log = logging.getLogger(__name__)

#: The properties read per object type: any other change is not understood (full read again).
PROPERTIES = {
    "VirtualMachine": frozenset(VM_PROPERTIES),
    "HostSystem": frozenset(HOST_PROPERTIES),
    "Datastore": frozenset({"name"}),
}


def _vm_value(name: str, val: Any) -> Any:
    """One VM property's value element -> what is kept of it (no XML)."""
    if name == "config.hardware.device":
        disks = disks_from_device_xml(val, None)  # datastores by moref: resolved on publishing
        return disks, _disk_devices(val) - len(disks)
    if name == "guest.disk":
        return guest_disks_from_xml(val)
    if name == "name":
        return (val.text or "") if val is not None else None
    return _value_text(val)


@dataclass
class Counts:
    entered: int = 0
    modified: int = 0
    left: int = 0

    def __str__(self) -> str:
        return f"{self.entered} entered, {self.modified} modified, {self.left} left"

    @property
    def total(self) -> int:
        return self.entered + self.modified + self.left


class InventoryState:
    """The objects of one filter as updates leave them: the VMs' parsed properties and the hosts'
    and datastores' names; :meth:`inventory` resolves them to VirtualMachine records."""

    def __init__(self) -> None:
        self.vms: dict[str, dict[str, Any]] = {}
        self.hosts: dict[str, str] = {}
        self.hardware: dict[str, dict[str, int]] = {}  # host moref -> summary.hardware.* read
        self.datastores: dict[str, str] = {}
        self._resolved: dict[str, VirtualMachine | None] = {}
        self._dirty: set[str] = set()
        self._all_dirty = True

    def apply(self, update: ObjectUpdate) -> None:
        if update.type not in PROPERTIES:
            return  # the view holds nothing else; an object of another type is not ours to read
        known = PROPERTIES[update.type]
        if update.kind == "leave":
            if update.type == "VirtualMachine":
                self.vms.pop(update.moref, None)
                self._resolved.pop(update.moref, None)
                self._dirty.discard(update.moref)
            else:
                (self.hosts if update.type == "HostSystem" else self.datastores).pop(update.moref, None)
                self.hardware.pop(update.moref, None)
                self._all_dirty = True
            return
        for change in update.changes:
            if change.name not in known:
                raise TargetError(
                    f"an update of {update.moref} changes {change.name!r}, which was not asked for", "protocol"
                )
            if change.op not in ("assign", "remove", "indirectRemove"):
                # partialUpdates is false: a changed property comes whole, never as an add to it
                raise TargetError(f"an update of {update.moref} has op {change.op!r} on {change.name!r}", "protocol")
        if update.type == "VirtualMachine":
            record = self.vms.setdefault(update.moref, {})
            for change in update.changes:
                if change.op == "assign" and change.val is not None:
                    record[change.name] = _vm_value(change.name, change.val)
                else:
                    record.pop(change.name, None)
            self._dirty.add(update.moref)
        else:
            names = self.hosts if update.type == "HostSystem" else self.datastores
            for change in update.changes:
                if change.name != "name":  # a host's summary.hardware.*
                    hw = self.hardware.setdefault(update.moref, {})
                    if change.op == "assign" and change.val is not None:
                        hw[change.name] = _int(change.val)
                    else:
                        hw.pop(change.name, None)
                    continue
                if change.op == "assign" and change.val is not None:
                    names[update.moref] = _value_text(change.val)
                else:
                    names.pop(update.moref, None)
            if update.kind == "enter":
                names.setdefault(update.moref, "")
            self._all_dirty = True

    def _resolve(self, moref: str, p: dict[str, Any]) -> VirtualMachine | None:
        if p.get("name") is None:
            return None  # as the full read: a VM without a name is not listed
        disks, unread = p.get("config.hardware.device", ((), 0))
        guest: tuple[GuestDisk, ...] = p.get("guest.disk", ())
        host_id = p.get("runtime.host", "")
        hw = self.hardware.get(host_id, {})
        return VirtualMachine(
            moref=moref,
            name=p["name"],
            host=self.hosts.get(p.get("runtime.host", ""), ""),
            power_state=p.get("runtime.powerState", ""),
            uuid=p.get("config.uuid", ""),
            instance_uuid=p.get("config.instanceUuid", ""),
            disks=tuple(_with_datastore(d, self.datastores) for d in disks),
            unread_disks=unread,
            hostname=p.get("guest.hostName", ""),
            guest_disks=guest,
            vmx_path=p.get("config.files.vmPathName", ""),
            host_id=host_id,
            host_cpu_mhz=hw.get("summary.hardware.cpuMhz", 0),
            host_cores=hw.get("summary.hardware.numCpuCores", 0),
        )

    def inventory(self) -> list[VirtualMachine]:
        """The VMs, sorted as the full read sorts them; only changed ones are built again."""
        todo = self.vms.keys() if self._all_dirty else self._dirty
        for moref in list(todo):
            self._resolved[moref] = self._resolve(moref, self.vms[moref])
        self._dirty.clear()
        self._all_dirty = False
        out = [vm for vm in self._resolved.values() if vm is not None]
        out.sort(key=lambda v: (v.name, v.moref))
        return out


def _with_datastore(disk: VirtualDisk, datastores: dict[str, str]) -> VirtualDisk:
    return dataclasses.replace(disk, datastore=datastores.get(disk.datastore, ""))


@dataclass
class Read:
    """One refresh: the inventory (None: nothing changed), whether it was read whole, the changes."""

    inventory: list[VirtualMachine] | None
    full: bool
    counts: Counts
    how: str  # "WaitForUpdatesEx" or "RetrievePropertiesEx" (no collector of our own)


class InventoryWatch:
    """One target's inventory through a PropertyCollector of its own (see the module's docstring).
    Used by the target's inventory thread only."""

    def __init__(self, target: str, max_object_updates: int = MAX_OBJECT_UPDATES, updates: bool = True) -> None:
        self.target = target
        #: False: every read is the paged RetrievePropertiesEx (a capture records that, so that it
        #: replays in any version of the exporter).
        self.updates = updates
        self.max_object_updates = max_object_updates
        self._si: Any = None
        self._collector = ""
        self._view: Any = None
        self._version: str | None = None
        self.state = InventoryState()
        self.full_reads = 0
        self.fallbacks = 0  # failed updates answered by a full read
        self._unsupported_logged = False

    def read(self, si: Any, pause: Callable[[], None] = _no_pause) -> Read:
        """What changed since the last read of this session (a full read the first time, after a
        new login and after a failed update)."""
        if not self.updates:
            self.full_reads += 1
            return Read(collect_inventory_soap(si, pause), True, Counts(), "RetrievePropertiesEx")
        if self._si is si and self._version is not None:
            try:
                return self._updates(si, pause)
            except vim.fault.NotAuthenticated:
                self._forget()
                raise  # the client logs in again and calls read() with the new session: a full read
            except STALE_CONNECTION:
                self._version = None  # an answer may have been lost on the way: read it whole
                raise
            except Exception as exc:
                cause = (
                    exc.cause
                    if isinstance(exc, TargetError)
                    else f"{exc.__class__.__name__}: {getattr(exc, 'msg', '') or exc}"
                )
                log.warning(
                    "inventory updates of target=%s failed cause=%s; reading the whole inventory again",
                    self.target,
                    cause,
                )
                self.fallbacks += 1
        return self._full(si, pause)

    def _forget(self) -> None:
        self._si, self._collector, self._view, self._version = None, "", None, None

    def _wait(self, si: Any, collector: str, version: str) -> UpdateSet:
        status, data = post(si, wait_body(collector, version, self.max_object_updates), "WaitForUpdatesEx")
        return parse_update_set(data, status)

    @staticmethod
    def _create(si: Any, body: bytes, method: str) -> str:
        status, data = post(si, body, method)
        return moref_answer(data, status, method)

    def _full(self, si: Any, pause: Callable[[], None]) -> Read:
        self._close()
        pause()
        content = si.content
        try:
            collector = self._create(
                si, create_collector_body(content.propertyCollector._moId), "CreatePropertyCollector"
            )
            view = content.viewManager.CreateContainerView(
                content.rootFolder, [vim.VirtualMachine, vim.HostSystem, vim.Datastore], True
            )
            self._si, self._collector, self._view = si, collector, view
            self._create(si, create_filter_body(collector, view._moId), "CreateFilter")
        except (vim.fault.NotAuthenticated, *STALE_CONNECTION):
            self._forget()
            raise
        except (TargetError, vmodl.MethodFault) as exc:
            self._close()
            if not self._unsupported_logged:
                cause = (
                    exc.cause
                    if isinstance(exc, TargetError)
                    else f"{exc.__class__.__name__}: {getattr(exc, 'msg', '')}"
                )
                log.warning(
                    "inventory of target=%s cannot be watched for updates (cause=%s); it is read whole at every refresh",
                    self.target,
                    cause,
                )
                self._unsupported_logged = True
            self.full_reads += 1
            return Read(collect_inventory_soap(si, pause), True, Counts(), "RetrievePropertiesEx")
        state = InventoryState()
        counts = Counts()
        version = ""
        try:
            while True:
                pause()
                update = self._wait(si, collector, version)
                _apply(state, update, counts, pause)
                if update.version is not None:
                    version = update.version
                if not update.truncated:
                    break
        except vim.fault.NotAuthenticated:
            self._forget()  # the session is gone, and the collector with it
            raise
        # Anything else (a lost connection too): the collector stays recorded with no version, so
        # that the next read destroys it on the server before it makes a new one.
        self.state, self._version = state, version
        self.full_reads += 1
        return Read(state.inventory(), True, counts, "WaitForUpdatesEx")

    def _updates(self, si: Any, pause: Callable[[], None]) -> Read:
        counts = Counts()
        assert self._version is not None
        try:
            while True:
                pause()
                update = self._wait(si, self._collector, self._version)
                _apply(self.state, update, counts, pause)
                if update.version is not None:
                    self._version = update.version
                if not update.truncated:
                    break
        except BaseException:
            self._version = None  # the state may be half updated: never used again
            raise
        return Read(self.state.inventory() if counts.total else None, False, counts, "WaitForUpdatesEx")

    def _close(self) -> None:
        """Destroy the collector (and with it its filter) and the view of this session, if any;
        best effort: they die with the session anyway."""
        si, collector, view = self._si, self._collector, self._view
        self._forget()
        if si is None:
            return
        try:
            if collector:
                post(si, destroy_collector_body(collector), "DestroyPropertyCollector")
            if view is not None:
                view.Destroy()
        except Exception as exc:  # noqa: BLE001 (best effort, logged)
            log.debug("cleaning up the inventory collector of target=%s failed: %s", self.target, exc)


def _apply(state: InventoryState, update: UpdateSet, counts: Counts, pause: Callable[[], None]) -> None:
    for i, obj in enumerate(update.objects):
        if i and not i % PAUSE_EVERY:
            pause()
        state.apply(obj)
        if obj.kind == "enter":
            counts.entered += 1
        elif obj.kind == "modify":
            counts.modified += 1
        else:
            counts.left += 1
