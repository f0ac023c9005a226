"""The inventory as plain SOAP: one ``RetrievePropertiesEx`` over a ContainerView (paged with
``ContinueRetrievePropertiesEx``) written as text, the answer parsed with lxml straight into
:class:`~.inventory.VirtualMachine` records, reading only the fields used.

The PropertyCollector cannot select fields inside an array, so ``config.hardware.device`` comes
whole (controllers, NICs, CD-ROMs and disks with every field). pyvmomi builds a Python object for
each of their elements: at 5,000 VMs on stock vcsim that was 10-14 s of exporter CPU per
inventory, against 1.2-1.8 s here (bench/vcenter_scrape.py --inventory). Here the device list is walked once in C (lxml) and only the controllers' bus numbers
and the disks' address, label, backing file/UUID/datastore and capacity are read. The mapping
rules are those of :func:`.inventory.disks_from_devices` (the pyvmomi path, kept as the
``inventory_mode: sync`` baseline); a test checks that both give the same inventory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any
from xml.sax.saxutils import escape

from pyVmomi import VmomiSupport, vim

from ioparallax.exporters.vcenter.client import TargetError
from ioparallax.exporters.vcenter.inventory import (
    CONTROLLER_PREFIXES,
    VM_PROPERTIES,
    GuestDisk,
    VirtualDisk,
    VirtualMachine,
    normalize_disk_uuid,
)
from ioparallax.exporters.vcenter.soap import (
    SOAPENV,
    VIM,
    XSI_TYPE,
    post,
    soap_response,
)

#: Objects per answer page: fewer round trips than pyvmomi's 500 without making one answer huge
#: (7 KB of XML per stock vcsim VM: ~7 MB a page).
PAGE_SIZE = 1000
#: Objects turned into records between two calls of the ``pause`` callable (see
#: :func:`collect_inventory_soap`): at 5,000 VMs a page of 1,000 takes ~0.3 s of CPU, 100 ~30 ms.
PAUSE_EVERY = 100


def _no_pause() -> None:
    pass


_ENVELOPE_START = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    f'<soapenv:Envelope xmlns:soapenv="{SOAPENV}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xmlns:xsd="http://www.w3.org/2001/XMLSchema"><soapenv:Body>'
)
_ENVELOPE_END = "</soapenv:Body></soapenv:Envelope>"


def _q(tag: str) -> str:
    return f"{{{VIM}}}{tag}"


_T_RETURNVAL, _T_TOKEN, _T_OBJECTS, _T_OBJ = _q("returnval"), _q("token"), _q("objects"), _q("obj")
_T_PROPSET, _T_NAME, _T_VAL, _T_KEY = _q("propSet"), _q("name"), _q("val"), _q("key")
_T_BUS, _T_CTRL_KEY, _T_UNIT = _q("busNumber"), _q("controllerKey"), _q("unitNumber")
_T_DEVICE_INFO, _T_LABEL, _T_BACKING = _q("deviceInfo"), _q("label"), _q("backing")
_T_FILE, _T_UUID, _T_DATASTORE = _q("fileName"), _q("uuid"), _q("datastore")
_T_CAP_BYTES, _T_CAP_KB = _q("capacityInBytes"), _q("capacityInKB")
_T_DISK_PATH, _T_MAPPINGS = _q("diskPath"), _q("mappings")


def filter_spec(view: str) -> str:
    """The PropertyFilterSpec's content: VMs (VM_PROPERTIES), hosts and datastores (name) in
    ``view``, elements in the WSDL's order; shared by RetrievePropertiesEx and CreateFilter."""
    vm_paths = "".join(f"<pathSet>{escape(p)}</pathSet>" for p in VM_PROPERTIES)
    return (
        f"<propSet><type>VirtualMachine</type><all>false</all>{vm_paths}</propSet>"
        "<propSet><type>HostSystem</type><all>false</all><pathSet>name</pathSet></propSet>"
        "<propSet><type>Datastore</type><all>false</all><pathSet>name</pathSet></propSet>"
        f'<objectSet><obj type="ContainerView">{escape(view)}</obj><skip>true</skip>'
        '<selectSet xsi:type="TraversalSpec"><name>view</name><type>ContainerView</type><path>view</path>'
        "<skip>false</skip></selectSet></objectSet>"
    )


def retrieve_body(collector: str, view: str, page_size: int = PAGE_SIZE) -> bytes:
    """RetrievePropertiesEx for VMs (VM_PROPERTIES), hosts and datastores (name) in ``view``;
    elements in the WSDL's order."""
    return (
        f'{_ENVELOPE_START}<RetrievePropertiesEx xmlns="{VIM}">'
        f'<_this type="PropertyCollector">{escape(collector)}</_this><specSet>{filter_spec(view)}'
        f"</specSet><options><maxObjects>{int(page_size)}</maxObjects></options></RetrievePropertiesEx>"
        f"{_ENVELOPE_END}"
    ).encode()


def continue_body(collector: str, token: str) -> bytes:
    return (
        f'{_ENVELOPE_START}<ContinueRetrievePropertiesEx xmlns="{VIM}">'
        f'<_this type="PropertyCollector">{escape(collector)}</_this><token>{escape(token)}</token>'
        f"</ContinueRetrievePropertiesEx>{_ENVELOPE_END}"
    ).encode()


def _local(type_name: str | None) -> str:
    return (type_name or "").rsplit(":", 1)[-1]


@lru_cache(maxsize=256)
def device_kind(type_name: str) -> str | None:
    """A device's xsi:type -> its performance instance prefix ("scsi", "sata", "nvme", "ide") for
    a controller, "disk" for a virtual disk, None for anything else (looked up in pyvmomi's
    type tree, so every controller subtype, e.g. ParaVirtualSCSIController, is known)."""
    try:
        cls = VmomiSupport.GetWsdlType(VIM, type_name)
    except KeyError:
        return None
    if not isinstance(cls, type):
        return None
    if issubclass(cls, vim.vm.device.VirtualDisk):
        return "disk"
    for base, prefix in CONTROLLER_PREFIXES:
        if issubclass(cls, base):
            return prefix
    return None


def _text(el: Any, tag: str) -> str | None:
    child = el.find(tag)
    return child.text if child is not None else None


def disks_from_device_xml(devices: Any, datastore_names: dict[str, str] | None) -> tuple[VirtualDisk, ...]:
    """Virtual disks of a VM from its ``config.hardware.device`` value element (the same rules
    as :func:`.inventory.disks_from_devices`); ``datastore`` is the datastore's moref when no
    ``datastore_names`` are given."""
    if devices is None:
        return ()
    controllers: dict[str, str] = {}
    disk_elements = []
    for dev in devices:
        if not isinstance(dev.tag, str):
            continue
        kind = device_kind(_local(dev.get(XSI_TYPE)))
        if kind is None:
            continue
        if kind == "disk":
            disk_elements.append(dev)
            continue
        key, bus = _text(dev, _T_KEY), _text(dev, _T_BUS)
        if key is not None and bus is not None:
            controllers[key.strip()] = f"{kind}{bus.strip()}"
    disks = []
    for dev in disk_elements:
        ctrl = controllers.get((_text(dev, _T_CTRL_KEY) or "").strip())
        unit = _text(dev, _T_UNIT)
        if ctrl is None or unit is None:
            continue  # a disk without a controller address has no performance instance
        info = dev.find(_T_DEVICE_INFO)
        backing = dev.find(_T_BACKING)
        cap_bytes, cap_kb = _text(dev, _T_CAP_BYTES), _text(dev, _T_CAP_KB)
        try:
            capacity = int(cap_bytes) if cap_bytes and int(cap_bytes) else int(cap_kb or 0) * 1024
        except ValueError:
            raise TargetError(
                f"inventory answer has a non-integer disk capacity ({cap_bytes!r}, {cap_kb!r})", "protocol"
            ) from None
        ds = (_text(backing, _T_DATASTORE) or "").strip() if backing is not None else ""
        key = (_text(dev, _T_KEY) or "0").strip()
        disks.append(
            VirtualDisk(
                instance=f"{ctrl}:{unit.strip()}",
                label=(_text(info, _T_LABEL) or "") if info is not None else "",
                backing_file=(_text(backing, _T_FILE) or "") if backing is not None else "",
                disk_uuid=normalize_disk_uuid((_text(backing, _T_UUID) or "") if backing is not None else ""),
                datastore=ds if datastore_names is None else datastore_names.get(ds, ""),
                capacity_bytes=capacity,
                key=int(key) if key.lstrip("-").isdigit() else 0,
            )
        )
    disks.sort(key=lambda d: d.instance)
    return tuple(disks)


def guest_disks_from_xml(value: Any) -> tuple[GuestDisk, ...]:
    """``guest.disk`` (an ArrayOfGuestDiskInfo value element) -> GuestDisk records; a mapping key
    that is not an integer is left out rather than guessed at."""
    if value is None:
        return ()
    out = []
    for info in value:
        if not isinstance(info.tag, str):
            continue
        keys = []
        for mapping in info.iterchildren(_T_MAPPINGS):
            key = (_text(mapping, _T_KEY) or "").strip()
            if key.lstrip("-").isdigit():
                keys.append(int(key))
        out.append(GuestDisk(disk_path=_text(info, _T_DISK_PATH) or "", keys=tuple(keys)))
    return tuple(out)


def parse_page(body: bytes, status: int = 200) -> tuple[list[tuple[str, str, dict[str, Any]]], str | None]:
    """One RetrievePropertiesEx/ContinueRetrievePropertiesEx answer -> ((type, moref, {property:
    value element}) per object, the next page's token or None)."""
    response = soap_response(body, status, "inventory")
    objects: list[tuple[str, str, dict[str, Any]]] = []
    token = None
    returnval = response.find(_T_RETURNVAL)
    if returnval is None:
        return objects, None  # nothing in the view
    for child in returnval:
        if child.tag == _T_TOKEN:
            token = (child.text or "").strip() or None
        elif child.tag == _T_OBJECTS:
            obj = child.find(_T_OBJ)
            if obj is None:
                raise TargetError("inventory answer has an object without obj", "protocol")
            props = {}
            for prop in child.iterchildren(_T_PROPSET):
                props[(_text(prop, _T_NAME) or "").strip()] = prop.find(_T_VAL)
            objects.append((_local(obj.get("type")), (obj.text or "").strip(), props))
    return objects, token


def _pages(
    si: Any, collector: str, view: str, pause: Callable[[], None] = _no_pause
) -> Iterator[list[tuple[str, str, dict[str, Any]]]]:
    pause()
    status, data = post(si, retrieve_body(collector, view), "RetrievePropertiesEx")
    while True:
        objects, token = parse_page(data, status)
        yield objects
        if token is None:
            return
        pause()
        status, data = post(si, continue_body(collector, token), "ContinueRetrievePropertiesEx")


def _disk_devices(devices: Any) -> int:
    """The virtual disks among a VM's devices (read or not)."""
    if devices is None:
        return 0
    return sum(1 for dev in devices if isinstance(dev.tag, str) and device_kind(_local(dev.get(XSI_TYPE))) == "disk")


def _value_text(el: Any) -> str:
    return (el.text or "").strip() if el is not None else ""


def inventory_from_pages(
    pages: Iterator[list[tuple[str, str, dict[str, Any]]]], pause: Callable[[], None] = _no_pause
) -> list[VirtualMachine]:
    """Objects as parse_page gives them -> VMs (hosts and datastores resolved to names). Each
    page is reduced to records before the next is read, so only one answer's tree is alive."""
    hosts: dict[str, str] = {}
    datastores: dict[str, str] = {}
    vms: list[VirtualMachine] = []
    for objects in pages:
        for i, (kind, moref, p) in enumerate(objects):
            if i and not i % PAUSE_EVERY:
                pause()
            if kind == "HostSystem":
                hosts[moref] = _value_text(p.get("name"))
            elif kind == "Datastore":
                datastores[moref] = _value_text(p.get("name"))
            elif kind == "VirtualMachine" and p.get("name") is not None:
                # host and datastores by moref for now: they may come on a later page
                devices = p.get("config.hardware.device")
                disks = disks_from_device_xml(devices, None)
                vms.append(
                    VirtualMachine(
                        moref=moref,
                        name=p["name"].text or "",
                        host=_value_text(p.get("runtime.host")),
                        power_state=_value_text(p.get("runtime.powerState")),
                        uuid=_value_text(p.get("config.uuid")),
                        instance_uuid=_value_text(p.get("config.instanceUuid")),
                        disks=disks,
                        unread_disks=_disk_devices(devices) - len(disks),
                        hostname=_value_text(p.get("guest.hostName")),
                        guest_disks=guest_disks_from_xml(p.get("guest.disk")),
                    )
                )
    out = [
        dataclasses.replace(
            vm,
            host=hosts.get(vm.host, ""),
            disks=tuple(dataclasses.replace(d, datastore=datastores.get(d.datastore, "")) for d in vm.disks),
        )
        for vm in vms
    ]
    out.sort(key=lambda v: (v.name, v.moref))
    return out


def collect_inventory_soap(si: Any, pause: Callable[[], None] = _no_pause) -> list[VirtualMachine]:
    """All VMs with their disks, hosts and datastores resolved, in one paged PropertyCollector
    pass over a ContainerView of the whole inventory. ``pause`` is called before each page is
    asked for and every PAUSE_EVERY objects read: a background refresh waits there while a
    collection runs, so the two do not share the cores (and the vCenter) at once."""
    content = si.content
    view = content.viewManager.CreateContainerView(
        content.rootFolder, [vim.VirtualMachine, vim.HostSystem, vim.Datastore], True
    )
    try:
        return inventory_from_pages(_pages(si, content.propertyCollector._moId, view._moId, pause), pause)
    finally:
        try:
            view.Destroy()
        except Exception:  # the view dies with the session anyway
            pass
