"""Pure functions from what vCenter answers to plain records (tested on recorded answers): the
inventory's records and readers (pyvmomi's objects, or the SOAP pages of RetrievePropertiesEx and
WaitForUpdatesEx read with lxml), QueryPerf's answer into samples, and SOAP faults into the pyvmomi
fault they name.

pyvmomi builds a Python object for every element of an answer (a 17-VM CSV QueryPerf answer has
~6,000; a VM's ``config.hardware.device`` every field of every device) and serializes every
MetricId through its type system; at 1,000 VMs that was ~80 % of a probe's CPU, and at 5,000 VMs on
stock vcsim 10-14 s of CPU per inventory against 1.2-1.8 s here (bench/vcenter_scrape.py
--inventory). Here each answer is walked once in C (lxml) and only the fields used are read. The
pyvmomi readers (:func:`disks_from_devices`, :func:`inventory_from_objects`) are kept as the
``inventory_mode: sync`` baseline; a test checks that both give the same inventory.

A SOAP fault becomes the pyvmomi fault class it names (``NotAuthenticated``,
``ManagedObjectNotFound``, ``InvalidArgument``...) carrying the fault string; anything that is not
a SOAP envelope is a :class:`~ioparallax.exporters.vcenter.client.TargetError` of kind
``protocol`` quoting the start of it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from lxml import etree
from pyVmomi import VmomiSupport, vim

from ioparallax.exporters.vcenter.client import SOAPENV, VIM, XSI_TYPE, TargetError, snippet

# ---- The inventory's records, and pyvmomi's objects read into them (inventory_mode: sync)

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
    vmx_path: str = ""  # config.files.vmPathName ("[datastore] dir/vm.vmx")
    host_id: str = ""  # the host's managed object id (host-12)
    #: The host's CPU (summary.hardware): MHz per core and cores; 0 when not read. Kept on each
    #: VM record: the exporter knows the hosts through their VMs (every Nutanix host runs a CVM).
    host_cpu_mhz: int = 0
    host_cores: int = 0

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
    hardware = {
        moref: (_int(p.get("summary.hardware.cpuMhz")), _int(p.get("summary.hardware.numCpuCores")))
        for kind, moref, p in objects
        if kind == "HostSystem"
    }
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
                vmx_path=str(p.get("config.files.vmPathName") or ""),
                host_id=_moid(p.get("runtime.host")),
                host_cpu_mhz=hardware.get(_moid(p.get("runtime.host")), (0, 0))[0],
                host_cores=hardware.get(_moid(p.get("runtime.host")), (0, 0))[1],
            )
        )
    vms.sort(key=lambda v: (v.name, v.moref))
    return vms


def _int(value: Any) -> int:
    """An integer property (pyvmomi's int, or an XML value element's text); 0 when unreadable."""
    if value is not None and not isinstance(value, (int, str)):
        value = getattr(value, "text", None)
    try:
        return max(0, int(str(value).strip())) if value is not None else 0
    except ValueError:
        return 0


#: The CPU counters read per VM and per host (instance "": the entity's aggregate).
CPU_COUNTERS = (
    "cpu.usagemhz.average",  # MHz, mean over the interval
    "cpu.ready.summation",  # ms the vCPUs were ready but not scheduled, summed over the interval and vCPUs
)


def is_cvm(name: str, vmx_path: str, pattern: re.Pattern[str]) -> str:
    """Why a VM is a Nutanix Controller VM: ``name`` (the installer's NTNX-<block>-<position>-CVM,
    or the configured pattern), ``vmx_path`` (its .vmx lies in a ServiceVM folder, how X-Ray
    recognises it), or "" for any other VM."""
    if pattern.search(name):
        return "name"
    if "servicevm" in vmx_path.lower():
        return "vmx_path"
    return ""


# ---- QueryPerf

#: The per-virtual-disk counters collected (group.name.rollup), see docs/vcenter.md.
VIRTUAL_DISK_COUNTERS = (
    "virtualDisk.read.average",  # KBps
    "virtualDisk.write.average",
    "virtualDisk.numberReadAveraged.average",  # IO/s
    "virtualDisk.numberWriteAveraged.average",
    "virtualDisk.totalReadLatency.average",  # ms (integer)
    "virtualDisk.totalWriteLatency.average",
    "virtualDisk.readLatencyUS.latest",  # us
    "virtualDisk.writeLatencyUS.latest",
    "virtualDisk.readOIO.latest",  # outstanding I/Os
    "virtualDisk.writeOIO.latest",
    "virtualDisk.readIOSize.latest",  # bytes
    "virtualDisk.writeIOSize.latest",
    "virtualDisk.smallSeeks.latest",  # seeks in the interval
    "virtualDisk.mediumSeeks.latest",
    "virtualDisk.largeSeeks.latest",
)


def counter_name(info: Any) -> str:
    return f"{info.groupInfo.key}.{info.nameInfo.key}.{info.rollupType}"


def counter_keys(perf_counters: Iterable[Any], wanted: Iterable[str] = VIRTUAL_DISK_COUNTERS) -> dict[str, int]:
    """name -> key for the wanted counters this vCenter has (keys differ between builds)."""
    by_name = {counter_name(c): c.key for c in perf_counters}
    return {name: by_name[name] for name in wanted if name in by_name}


#: Counter groups whose counters the exporter would read if it mapped them: per virtual disk.
MAPPED_GROUPS = ("virtualDisk.",)


def unmapped_counters(perf_counters: Iterable[Any], mapped: Iterable[str] = VIRTUAL_DISK_COUNTERS) -> list[str]:
    """The counters of MAPPED_GROUPS this vCenter offers that the exporter does not read (sorted
    names): another build may offer a counter worth mapping (docs/vcenter.md, Coverage)."""
    known = set(mapped)
    names = {counter_name(c) for c in perf_counters}
    return sorted(n for n in names if n.startswith(MAPPED_GROUPS) and n not in known)


@dataclass
class Sample:
    timestamp: float  # end of the interval, epoch seconds
    interval: int
    values: dict[str, int] = field(default_factory=dict)  # counter name -> raw value


@dataclass
class ParseResult:
    # moref -> instance -> samples (ascending by timestamp)
    samples: dict[str, dict[str, list[Sample]]] = field(default_factory=dict)
    star_echoed: set[str] = field(default_factory=set)  # VMs whose answer had instance "*"
    misaligned: int = 0  # series whose value count differs from the sample count (dropped)
    unread: int = 0  # series of a counter that was not asked for (never read)
    empty: int = 0  # series with no value at all


_TS_CACHE: dict[str, float] = {}


def parse_timestamp(text: str) -> float:
    ts = _TS_CACHE.get(text)
    if ts is None:
        ts = dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        if len(_TS_CACHE) > 10000:
            _TS_CACHE.clear()
        _TS_CACHE[text] = ts
    return ts


#: No DTDs, no entities, no network: an answer is data, never instructions to the parser.
_PARSER = etree.XMLParser(
    resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True, remove_comments=True, remove_pis=True
)

_T_BODY = f"{{{SOAPENV}}}Body"
_T_FAULT = f"{{{SOAPENV}}}Fault"
_T_ENTITY = f"{{{VIM}}}entity"
_T_SAMPLE_CSV = f"{{{VIM}}}sampleInfoCSV"
_T_SAMPLE_INFO = f"{{{VIM}}}sampleInfo"
_T_TIMESTAMP = f"{{{VIM}}}timestamp"
_T_INTERVAL = f"{{{VIM}}}interval"
_T_VALUE = f"{{{VIM}}}value"
_T_ID = f"{{{VIM}}}id"
_T_COUNTER = f"{{{VIM}}}counterId"
_T_INSTANCE = f"{{{VIM}}}instance"


def fault_from(fault: Any) -> Exception:
    """A ``soapenv:Fault`` element -> the pyvmomi fault it names (raised by the caller), or a
    protocol TargetError when it names none that pyvmomi knows."""
    faultstring = (fault.findtext("faultstring") or "").strip()
    detail = fault.find("detail")
    name = ""
    if detail is not None and len(detail):
        first = detail[0]
        name = first.get(XSI_TYPE) or ""
        if ":" in name:
            name = name.split(":", 1)[1]
        if not name and isinstance(first.tag, str):
            name = etree.QName(first).localname.removesuffix("Fault")
    if name:
        try:
            cls = VmomiSupport.GetWsdlType(VIM, name)
        except KeyError:
            cls = None
        if cls is not None and isinstance(cls, type) and issubclass(cls, Exception):
            return cls(msg=faultstring)  # type: ignore[call-arg]  # pyVmomi's faults take msg=
    code = (fault.findtext("faultcode") or "").strip() or "no faultcode"
    what = f"{name}: " if name else ""
    return TargetError(f"QueryPerf SOAP fault ({code}) {what}{faultstring or 'no faultstring'}".rstrip(), "protocol")


def soap_response(body: bytes, status: int, method: str) -> Any:
    """The response element of a SOAP answer to ``method`` (named in the errors): a SOAP fault is
    raised as the pyvmomi fault it names; anything else malformed as TargetError("protocol")."""
    try:
        root = etree.fromstring(body, _PARSER)
    except etree.XMLSyntaxError as exc:
        raise TargetError(
            f"{method} answer (HTTP {status}) is not XML ({exc.msg}): {snippet(body)!r}", "protocol"
        ) from None
    soap_body = root.find(_T_BODY)
    if soap_body is None or not len(soap_body):
        raise TargetError(f"{method} answer (HTTP {status}) is not a SOAP envelope: {snippet(body)!r}", "protocol")
    response = soap_body[0]
    if response.tag == _T_FAULT:
        raise fault_from(response)
    if status != 200:
        raise TargetError(f"{method} answer has HTTP status {status} without a SOAP fault", "protocol")
    return response


def parse_query_perf(body: bytes, key_names: dict[int, str], status: int = 200) -> ParseResult:
    """QueryPerf's answer (CSV or normal format) -> samples per VM and instance, ascending.

    The same rules as before: newest-first answers reordered, values below 0 (vCenter's "no
    data") left out, a series whose value count differs from the sample count left out and
    counted (stock vcsim drops zeros on the wire), ``*`` echoed back recorded. A SOAP fault is
    raised as the pyvmomi fault it names; anything else malformed as TargetError("protocol").
    """
    response = soap_response(body, status, "QueryPerf")

    out = ParseResult()
    samples_out = out.samples
    for metric in response:
        moref = None
        csv = None
        infos_normal: list[tuple[str | None, str | None]] = []
        series_list = []
        # One pass over the result's children (lxml's find() goes through ElementPath in
        # Python and cost ~10x more than the whole parse).
        for child in metric:
            tag = child.tag
            if tag == _T_VALUE:
                series_list.append(child)
            elif tag == _T_ENTITY:
                moref = (child.text or "").strip()
            elif tag == _T_SAMPLE_CSV:
                csv = child.text or ""
            elif tag == _T_SAMPLE_INFO:
                ts = iv = None
                for part in child:
                    if part.tag == _T_TIMESTAMP:
                        ts = part.text
                    elif part.tag == _T_INTERVAL:
                        iv = part.text
                infos_normal.append((ts, iv))
        if not moref:
            raise TargetError("QueryPerf answer has a result without an entity", "protocol")
        try:
            if csv is not None:
                is_csv = True
                parts = csv.split(",") if csv else []
                infos = [(parse_timestamp(parts[i + 1]), int(parts[i])) for i in range(0, len(parts) - 1, 2)]
            else:
                is_csv = False
                infos = [(parse_timestamp(ts), int(iv)) for ts, iv in infos_normal]  # type: ignore[arg-type]
        except (TypeError, ValueError, IndexError, AttributeError) as exc:
            raise TargetError(f"QueryPerf answer for {moref} has unreadable sample info ({exc})", "protocol") from None
        n = len(infos)
        order = sorted(range(n), key=lambda i: infos[i][0])
        ascending = order == list(range(n))
        per_instance = samples_out.setdefault(moref, {})
        for series in series_list:
            counter = instance = None
            texts = []
            for part in series:
                tag = part.tag
                if tag == _T_VALUE:
                    texts.append(part.text)
                elif tag == _T_ID:
                    for field in part:
                        if field.tag == _T_COUNTER:
                            counter = field.text
                        elif field.tag == _T_INSTANCE:
                            instance = field.text
            try:
                name = key_names.get(int(counter))  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
            if name is None:
                out.unread += 1  # a counter not asked for: counted, never read
                continue
            instance = instance or ""
            if instance == "*":
                out.star_echoed.add(moref)
                continue
            try:
                if is_csv:
                    text = texts[0] if texts else None
                    values = [int(v) for v in text.split(",")] if text else []
                else:
                    values = [int(v) for v in texts]
            except (TypeError, ValueError) as exc:
                raise TargetError(
                    f"QueryPerf answer for {moref} {instance} has a non-integer value ({exc})", "protocol"
                ) from None
            if not values:
                out.empty += 1
                continue
            if len(values) != n:
                # Zeros dropped on the wire (stock vcsim): positions are unknowable. Reporting
                # shifted values would be wrong, so the series is left out and counted.
                out.misaligned += 1
                continue
            samples = per_instance.get(instance)
            if samples is None:
                samples = per_instance[instance] = [Sample(infos[i][0], infos[i][1]) for i in order]
            if ascending:
                for s, v in zip(samples, values):
                    if v >= 0:
                        s.values[name] = v
            else:
                for s, i in zip(samples, order):
                    v = values[i]
                    if v >= 0:
                        s.values[name] = v
    return out


# ---- The inventory's SOAP pages (RetrievePropertiesEx, WaitForUpdatesEx)

#: Objects turned into records between two calls of the ``pause`` callable (see
#: :func:`collect_inventory_soap`): at 5,000 VMs a page of 1,000 takes ~0.3 s of CPU, 100 ~30 ms.
PAUSE_EVERY = 100


def _no_pause() -> None:
    pass


def _q(tag: str) -> str:
    return f"{{{VIM}}}{tag}"


_T_RETURNVAL, _T_TOKEN, _T_OBJECTS, _T_OBJ = _q("returnval"), _q("token"), _q("objects"), _q("obj")
_T_PROPSET, _T_NAME, _T_VAL, _T_KEY = _q("propSet"), _q("name"), _q("val"), _q("key")
_T_BUS, _T_CTRL_KEY, _T_UNIT = _q("busNumber"), _q("controllerKey"), _q("unitNumber")
_T_DEVICE_INFO, _T_LABEL, _T_BACKING = _q("deviceInfo"), _q("label"), _q("backing")
_T_FILE, _T_UUID, _T_DATASTORE = _q("fileName"), _q("uuid"), _q("datastore")
_T_CAP_BYTES, _T_CAP_KB = _q("capacityInBytes"), _q("capacityInKB")
_T_DISK_PATH, _T_MAPPINGS = _q("diskPath"), _q("mappings")


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
    hardware: dict[str, tuple[int, int]] = {}
    datastores: dict[str, str] = {}
    vms: list[VirtualMachine] = []
    for objects in pages:
        for i, (kind, moref, p) in enumerate(objects):
            if i and not i % PAUSE_EVERY:
                pause()
            if kind == "HostSystem":
                hosts[moref] = _value_text(p.get("name"))
                hardware[moref] = (_int(p.get("summary.hardware.cpuMhz")), _int(p.get("summary.hardware.numCpuCores")))
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
                        vmx_path=_value_text(p.get("config.files.vmPathName")),
                    )
                )
    out = [
        dataclasses.replace(
            vm,
            host=hosts.get(vm.host, ""),
            host_id=vm.host,
            host_cpu_mhz=hardware.get(vm.host, (0, 0))[0],
            host_cores=hardware.get(vm.host, (0, 0))[1],
            disks=tuple(dataclasses.replace(d, datastore=datastores.get(d.datastore, "")) for d in vm.disks),
        )
        for vm in vms
    ]
    out.sort(key=lambda v: (v.name, v.moref))
    return out


_T_VERSION, _T_FILTER_SET, _T_TRUNCATED = _q("version"), _q("filterSet"), _q("truncated")
_T_OBJECT_SET, _T_KIND, _T_CHANGE_SET, _T_OP = _q("objectSet"), _q("kind"), _q("changeSet"), _q("op")


def moref_answer(body: bytes, status: int, method: str) -> str:
    value = (soap_response(body, status, method).findtext(_T_RETURNVAL) or "").strip()
    if not value:
        raise TargetError(f"{method} answer has no returnval", "protocol")
    return value


@dataclass
class Change:
    name: str
    op: str  # assign, add, remove, indirectRemove
    val: Any  # the val element (None when absent)


@dataclass
class ObjectUpdate:
    kind: str  # enter, modify, leave
    type: str  # VirtualMachine, HostSystem, Datastore
    moref: str
    changes: list[Change] = field(default_factory=list)


@dataclass
class UpdateSet:
    version: str | None  # None: nothing changed (no returnval)
    objects: list[ObjectUpdate]
    truncated: bool = False


def parse_update_set(body: bytes, status: int = 200) -> UpdateSet:
    """A WaitForUpdatesEx answer -> its version, object updates (of every filter) and truncated flag."""
    response = soap_response(body, status, "WaitForUpdatesEx")
    returnval = response.find(_T_RETURNVAL)
    if returnval is None:
        return UpdateSet(None, [])
    version = returnval.findtext(_T_VERSION)
    if version is None:
        raise TargetError("WaitForUpdatesEx answer has an update set without a version", "protocol")
    objects = []
    for filter_set in returnval.iterchildren(_T_FILTER_SET):
        for obj_set in filter_set.iterchildren(_T_OBJECT_SET):
            obj = obj_set.find(_T_OBJ)
            kind = (obj_set.findtext(_T_KIND) or "").strip()
            if obj is None or kind not in ("enter", "modify", "leave"):
                raise TargetError(
                    f"WaitForUpdatesEx answer has an object update without obj or kind ({kind!r})", "protocol"
                )
            changes = [
                Change((_text(c, _T_NAME) or "").strip(), (_text(c, _T_OP) or "").strip(), c.find(_T_VAL))
                for c in obj_set.iterchildren(_T_CHANGE_SET)
            ]
            objects.append(ObjectUpdate(kind, _local(obj.get("type")), (obj.text or "").strip(), changes))
    truncated = (returnval.findtext(_T_TRUNCATED) or "").strip() == "true"
    return UpdateSet(version.strip(), objects, truncated)
