"""Inventory: VMs and their virtual disks (controller address, backing file, disk UUID,
datastore, host), collected in one PropertyCollector pass over a ContainerView and cached by
the caller (it changes slowly and is the expensive part of talking to vCenter)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyVmomi import vim, vmodl

VM_PROPERTIES = [
    "name",
    "runtime.host",
    "runtime.powerState",
    "config.uuid",
    "config.instanceUuid",
    "config.hardware.device",
    "guest.hostName",  # VMware Tools: the guest's host name (DiskSPD's ComputerName, windows_exporter's hostname)
    "guest.disk",  # VMware Tools: guest volumes with the virtual disks behind them (vSphere 7+ mappings)
]

#: performance counter instance prefix of each controller type (instance = prefix + bus:unit)
CONTROLLER_PREFIXES: tuple[tuple[Any, str], ...] = (
    (vim.vm.device.VirtualSCSIController, "scsi"),
    (vim.vm.device.VirtualSATAController, "sata"),
    (vim.vm.device.VirtualNVMEController, "nvme"),
    (vim.vm.device.VirtualIDEController, "ide"),
)


@dataclass(frozen=True)
class VirtualDisk:
    instance: str  # performance counter instance and controller address: scsi0:1
    label: str  # "Hard disk 2"
    backing_file: str  # "[ctr01] vm/vm_1.vmdk"
    disk_uuid: str  # backing UUID, normalised (see normalize_disk_uuid): the guest's disk serial
    datastore: str
    capacity_bytes: int
    key: int = 0  # the device key: what guest.disk's mappings name


@dataclass(frozen=True)
class GuestDisk:
    """A guest volume as VMware Tools reports it (``guest.disk``): its path in the guest (``D:\\``, a drive root;
    ``/data``) and the device keys of the virtual disks behind it (``mappings``, vSphere 7+)."""

    disk_path: str
    keys: tuple[int, ...]


@dataclass(frozen=True)
class VirtualMachine:
    moref: str  # vm-42
    name: str
    host: str
    power_state: str
    uuid: str
    instance_uuid: str
    disks: tuple[VirtualDisk, ...]
    #: Virtual disks of the VM left out: no controller address the exporter reads (so no
    #: performance instance); counted in vcenter_inventory_unread_disks.
    unread_disks: int = 0
    hostname: str = ""  # guest.hostName ("" without VMware Tools)
    guest_disks: tuple[GuestDisk, ...] = ()

    def guest_disk_rows(self) -> list[tuple[str, str]]:
        """(virtual disk instance, guest path) per guest volume and virtual disk it maps to; a
        mapping to a key that is no virtual disk of the VM is left out."""
        instance = {d.key: d.instance for d in self.disks}
        return [(instance[k], g.disk_path) for g in self.guest_disks for k in g.keys if k in instance]


_HEX32 = re.compile(r"[0-9a-f]{32}")


def normalize_disk_uuid(value: str) -> str:
    """A virtual disk UUID as lowercase 8-4-4-4-12 hex, the form shared by every ioparallax
    view so that joins match: vCenter writes the backing UUID ``6000C29a-...`` in mixed case,
    the guest sees the same 32 hex digits as the disk serial (``6000c29a...``, no dashes, with
    ``disk.EnableUUID``). Dashes, spaces and case are ignored; anything that is not 32 hex
    digits is returned stripped and lowercased rather than guessed at."""
    text = (value or "").strip().lower()
    digits = text.replace("-", "").replace(" ", "")
    if _HEX32.fullmatch(digits):
        return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
    return text


def _moid(ref: Any) -> str:
    return getattr(ref, "_moId", "") if ref is not None else ""


def disks_from_devices(devices: Iterable[Any] | None, datastore_names: dict[str, str]) -> tuple[VirtualDisk, ...]:
    """Virtual disks of a VM from its config.hardware.device list (pure mapping)."""
    devices = list(devices or [])
    controllers: dict[int, str] = {}
    for dev in devices:
        for cls, prefix in CONTROLLER_PREFIXES:
            if isinstance(dev, cls):
                controllers[dev.key] = f"{prefix}{dev.busNumber}"
                break
    disks = []
    for dev in devices:
        if not isinstance(dev, vim.vm.device.VirtualDisk):
            continue
        ctrl = controllers.get(dev.controllerKey)
        if ctrl is None or dev.unitNumber is None:
            continue  # a disk without a controller address has no performance instance
        backing = dev.backing
        ds_ref = getattr(backing, "datastore", None)
        disks.append(
            VirtualDisk(
                instance=f"{ctrl}:{dev.unitNumber}",
                label=(dev.deviceInfo.label if dev.deviceInfo else "") or "",
                backing_file=getattr(backing, "fileName", "") or "",
                disk_uuid=normalize_disk_uuid(getattr(backing, "uuid", "") or ""),
                datastore=datastore_names.get(_moid(ds_ref), ""),
                capacity_bytes=int(getattr(dev, "capacityInBytes", 0) or (dev.capacityInKB or 0) * 1024),
                key=int(dev.key or 0),
            )
        )
    disks.sort(key=lambda d: d.instance)
    return tuple(disks)


def guest_disks_from_objects(values: Iterable[Any] | None) -> tuple[GuestDisk, ...]:
    """guest.disk (GuestDiskInfo objects) -> GuestDisk records (pure mapping)."""
    out = []
    for g in values or []:
        keys = tuple(int(m.key) for m in (getattr(g, "mappings", None) or []) if getattr(m, "key", None) is not None)
        out.append(GuestDisk(disk_path=str(getattr(g, "diskPath", "") or ""), keys=keys))
    return tuple(out)


def inventory_from_objects(objects: Iterable[tuple[str, str, dict[str, Any]]]) -> list[VirtualMachine]:
    """(type name, moref, properties) triples as the PropertyCollector returns them -> VMs."""
    objects = list(objects)
    hosts = {moref: p.get("name", "") for kind, moref, p in objects if kind == "HostSystem"}
    datastores = {moref: p.get("name", "") for kind, moref, p in objects if kind == "Datastore"}
    vms = []
    for kind, moref, p in objects:
        if kind != "VirtualMachine" or "name" not in p:
            continue
        vms.append(
            VirtualMachine(
                moref=moref,
                name=p["name"],
                host=hosts.get(_moid(p.get("runtime.host")), ""),
                power_state=str(p.get("runtime.powerState", "") or ""),
                uuid=p.get("config.uuid", "") or "",
                instance_uuid=p.get("config.instanceUuid", "") or "",
                disks=disks_from_devices(p.get("config.hardware.device"), datastores),
                hostname=str(p.get("guest.hostName") or ""),
                guest_disks=guest_disks_from_objects(p.get("guest.disk")),
            )
        )
    vms.sort(key=lambda v: (v.name, v.moref))
    return vms


def retrieve_objects(si: Any, page_size: int = 500) -> list[tuple[str, str, dict[str, Any]]]:
    """All VMs, hosts and datastores with the properties we need, paged with
    RetrievePropertiesEx / ContinueRetrievePropertiesEx."""
    content = si.content
    view = content.viewManager.CreateContainerView(
        content.rootFolder, [vim.VirtualMachine, vim.HostSystem, vim.Datastore], True
    )
    try:
        pc = content.propertyCollector
        traversal = vmodl.query.PropertyCollector.TraversalSpec(
            name="view", path="view", skip=False, type=vim.view.ContainerView
        )
        spec = vmodl.query.PropertyCollector.FilterSpec(
            objectSet=[vmodl.query.PropertyCollector.ObjectSpec(obj=view, skip=True, selectSet=[traversal])],
            propSet=[
                vmodl.query.PropertyCollector.PropertySpec(type=vim.VirtualMachine, pathSet=VM_PROPERTIES),
                vmodl.query.PropertyCollector.PropertySpec(type=vim.HostSystem, pathSet=["name"]),
                vmodl.query.PropertyCollector.PropertySpec(type=vim.Datastore, pathSet=["name"]),
            ],
        )
        out: list[tuple[str, str, dict[str, Any]]] = []
        result = pc.RetrievePropertiesEx([spec], vmodl.query.PropertyCollector.RetrieveOptions(maxObjects=page_size))
        while result is not None:
            for obj in result.objects or []:
                props = {prop.name: prop.val for prop in obj.propSet or []}
                out.append((obj.obj.__class__.__name__.split(".")[-1], obj.obj._moId, props))
            if not result.token:
                break
            result = pc.ContinueRetrievePropertiesEx(result.token)
        return out
    finally:
        try:
            view.Destroy()
        except Exception:  # the view dies with the session anyway
            pass


def collect_inventory(si: Any) -> list[VirtualMachine]:
    return inventory_from_objects(retrieve_objects(si))
