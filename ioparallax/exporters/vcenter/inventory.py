"""The inventory's reads: VMs and their virtual disks (controller address, backing file, disk UUID,
datastore, host), collected in one paged PropertyCollector pass over a ContainerView and cached by
the caller (it changes slowly and is the expensive part of talking to vCenter).

Two ways, the same records (:mod:`.parse`): :func:`collect_inventory_soap`, plain SOAP
(``RetrievePropertiesEx`` paged with ``ContinueRetrievePropertiesEx``, written as text by
:mod:`.client`, answers read with lxml), the default; and :func:`collect_inventory` through
pyvmomi's objects, the ``inventory_mode: sync`` baseline. The PropertyCollector cannot select
fields inside an array, so ``config.hardware.device`` comes whole; see :mod:`.parse` for its cost.
:mod:`.inventory_watch` keeps the inventory current with ``WaitForUpdatesEx`` after a first read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from pyVmomi import vim, vmodl

from ioparallax.exporters.vcenter.client import HOST_PROPERTIES, VM_PROPERTIES, continue_body, post, retrieve_body
from ioparallax.exporters.vcenter.parse import (
    VirtualMachine,
    _no_pause,
    inventory_from_objects,
    inventory_from_pages,
    parse_page,
)


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
                vmodl.query.PropertyCollector.PropertySpec(type=vim.HostSystem, pathSet=HOST_PROPERTIES),
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
