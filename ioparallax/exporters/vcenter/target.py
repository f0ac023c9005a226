"""One vCenter target: its session, cached inventory, counter state, and the collection that
overlapping probes share.

A probe asks :meth:`Target.probe` for a snapshot. If a collection of that target is already
running (another Prometheus, a slow vCenter), the probe waits for the same one instead of
starting another; if the collection does not finish before the probe's deadline, the probe
answers ``vcenter_up 0`` with the cause, and the collection goes on in the background so that
its samples are integrated and shown by the next probe (no sample is lost).

The inventory (``inventory_mode: background``, the default) is built and refreshed off the
probe path by a thread per target, started at the first probe: collections use the last
complete inventory, so a refresh never makes a probe slow. Before the first inventory is
complete, a probe waits for it until its deadline and then answers ``vcenter_up 0`` with
``kind="warming_up"``; a failed first build (wrong password, vCenter down) is reported with its
own kind, and a probe that finds the last build failed asks for a new attempt at once. The
thread stops when the target is closed (idle-session logout). ``inventory_mode: sync`` is the
previous behaviour, kept as the benchmark's baseline: the collection reads the inventory itself,
through pyvmomi, when it is due.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ioparallax.exporters.vcenter.client import (
    EntityRequest,
    TargetError,
    VCenterClient,
    batch_requests,
    post,
    query_perf_body,
    read_max_query_metrics,
)
from ioparallax.exporters.vcenter.config import TargetConfig
from ioparallax.exporters.vcenter.integrate import CpuCounters, DiskCounters, integrate, integrate_cpu
from ioparallax.exporters.vcenter.inventory import collect_inventory
from ioparallax.exporters.vcenter.inventory_watch import InventoryWatch
from ioparallax.exporters.vcenter.parse import (
    CPU_COUNTERS,
    VIRTUAL_DISK_COUNTERS,
    ParseResult,
    VirtualMachine,
    counter_keys,
    is_cvm,
    parse_query_perf,
    unmapped_counters,
)

log = logging.getLogger(__name__)

#: QueryPerf calls of one target in flight at once (one session; pyvmomi's pool has 5 connections).
PERF_CONCURRENCY = 2
#: Seconds before a failed background inventory build is tried again (unless a probe asks sooner).
INVENTORY_RETRY = 30.0
#: Longest a background refresh waits, at one of its pauses, for a running collection to end (so
#: that probes back to back cannot hold a refresh off for ever).
REFRESH_YIELD_MAX = 30.0


@dataclass
class DiskRow:
    vm: VirtualMachine
    disk_index: int
    counters: DiskCounters
    fresh: bool = True  # the latest sample is recent enough to be shown as the current one


@dataclass(frozen=True)
class HostRow:
    """A host as its VMs' inventory records name it, with its CPU counters (None: no sample yet)."""

    host_id: str
    name: str
    cpu_mhz: int  # per core (summary.hardware.cpuMhz); 0: not read
    cores: int
    cpu: CpuCounters | None


@dataclass
class Snapshot:
    """What one collection found; immutable once published to probes."""

    up: bool
    cause: str = ""
    kind: str = ""
    duration: float = 0.0
    finished: float = 0.0  # time.monotonic() at the end
    vms: list[VirtualMachine] = field(default_factory=list)
    disks: list[DiskRow] = field(default_factory=list)
    inventory_age: float = 0.0
    inventory_build_seconds: float = 0.0  # wall time of the last complete inventory build
    queries: int = 0
    new_samples: int = 0
    misaligned_series: int = 0
    empty_series: int = 0
    missing_counters: tuple[str, ...] = ()
    unmapped_counters: tuple[str, ...] = ()  # virtualDisk counters offered and not read
    unread_series: int = 0  # answer series not read: a counter not asked for, an unknown disk
    unread_disks: int = 0  # inventory disks left out (no controller address read)
    star_expanded_by_server: bool = True
    logins: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    # CPU (cpu.usagemhz, cpu.ready): per running VM and per host; the CVMs and why they are ones.
    cpu_counters: tuple[str, ...] = ()  # the CPU counters this vCenter offers (and were asked for)
    vm_cpu: list[tuple[VirtualMachine, CpuCounters]] = field(default_factory=list)
    hosts: list[HostRow] = field(default_factory=list)
    cvms: list[tuple[VirtualMachine, str]] = field(default_factory=list)  # (VM, "name" | "vmx_path")
    new_cpu_samples: int = 0
    cpu_queries: int = 0  # QueryPerf calls for the CPU (beside `queries`, the disks')
    cpu_error: str = ""  # why this probe's CPU query failed ("" when it did not); the disks still come
    # Exposition pieces that depend on the inventory only (label blocks, the _info families),
    # kept by the target until the inventory is refreshed; see collector.render_probe.
    render_cache: dict = field(default_factory=dict)


class Target:
    def __init__(
        self, name: str, cfg: TargetConfig, client_factory: Callable[[str, TargetConfig], VCenterClient] = VCenterClient
    ):
        self.name = name
        self.cfg = cfg
        self.client = client_factory(name, cfg)
        self._lock = threading.Lock()
        self._inflight: Future | None = None
        self.inventory: list[VirtualMachine] | None = None
        self.inventory_at = 0.0
        self.keys: dict[str, int] | None = None
        self.unmapped: tuple[str, ...] = ()
        # Answer instances not in the inventory, and VMs with disks left out: logged once each.
        self._unread_logged: set[str] = set()
        self.perf_manager: str | None = None  # the PerformanceManager's moref (for plain SOAP)
        self.max_metrics: int | None = cfg.max_query_metrics
        self.star_ok = True  # False once the server echoes "*" back instead of expanding it
        self.states: dict[tuple[str, str], DiskCounters] = {}
        self.cpu_keys: dict[str, int] = {}  # CPU counter name -> key (empty: none offered, or cpu off)
        self.cpu_states: dict[str, CpuCounters] = {}  # VM or host moref -> its CPU counters
        self._cpu_error_logged = False
        self.render_cache: dict = {}
        self._pool: ThreadPoolExecutor | None = None  # QueryPerf calls in flight (see _query_all)
        self.errors: dict[str, int] = {}  # failed probes by kind
        self.collections = 0
        # Each ESXi host's clock as its samples show it (realtime samples are stamped by the
        # host): host -> (newest sample end seen, time.monotonic() when first seen).
        self.host_clocks: dict[str, tuple[float, float]] = {}
        # Background inventory (see the module's docstring); guarded by _inv.
        self._inv = threading.Condition()
        self._refresher: threading.Thread | None = None
        self._closed = False
        self._refresh_asked = False
        self._building = False
        self.inventory_error: TargetError | None = None  # the last build's failure, None after a success
        self.inventory_failures = 0
        self.inventory_generation = 0
        self.inventory_build_seconds = 0.0  # wall time of the last full read
        self.inventory_update_seconds = 0.0  # wall time of the last refresh (full or updates)
        self.inventory_first_asked: float | None = None
        self._applied: list[VirtualMachine] | None = None  # the inventory states/render cache follow
        self._applied_at = 0.0
        # Set while no collection runs: a background refresh pauses until it is (see _yield).
        self._no_collection = threading.Event()
        self._no_collection.set()
        self._waiting_for_inventory = 0  # collections waiting for a (new) inventory: no pause then
        self.refresh_paused_seconds = 0.0  # of the refresh running or last finished
        self.collected_once = False  # a collection has finished since start (up or not)
        self._watch = InventoryWatch(name)  # the inventory thread's PropertyCollector (WaitForUpdatesEx)

    def watch_inventory_updates(self, on: bool) -> None:
        """Off: every inventory refresh is a full paged RetrievePropertiesEx (captures, replays)."""
        self._watch.updates = on

    def busy(self) -> bool:
        """True while a collection is running (it still uses the session)."""
        with self._lock:
            return self._inflight is not None

    # -- probes ---------------------------------------------------------------------------
    def probe(self, timeout: float) -> tuple[Snapshot, bool]:
        """The snapshot of a collection (a running one if any); (snapshot, shared)."""
        with self._lock:
            fut = self._inflight
            shared = fut is not None
            if fut is None:
                fut = self._inflight = Future()
                self._no_collection.clear()
                threading.Thread(target=self._run, args=(fut,), name=f"collect {self.name}", daemon=True).start()
        try:
            snap = fut.result(timeout=max(0.0, timeout))
        except FutureTimeout:
            snap = self._late_snapshot(timeout)
        with self._lock:
            if not snap.up:
                self.errors[snap.kind] = self.errors.get(snap.kind, 0) + 1
            errors = dict(self.errors)
        return dataclasses.replace(snap, errors=errors), shared

    def _late_snapshot(self, timeout: float) -> Snapshot:
        """What a probe whose collection did not finish in time answers: warming_up while the
        first inventory is read, and until the first collection ends when that inventory's read
        took more than half of a probe's time (at 5,000 VMs the inventory took 7 s of a 10 s
        scrape, and the first collection, which reads every VM's samples from nothing, could not
        end in the rest); otherwise timeout (a first collection that overruns although
        the inventory was read quickly is a slow vCenter)."""
        with self._inv:
            background = self.cfg.inventory_mode == "background" and self.inventory_first_asked is not None
            inventory = self.inventory
            since = time.monotonic() - (self.inventory_first_asked or time.monotonic())
            failures = self.inventory_failures
            build = self.inventory_build_seconds
        if background and inventory is None:
            return Snapshot(
                up=False,
                kind="warming_up",
                cause=f"the first inventory of this vCenter is still being read (for {since:.0f}s"
                + (f", {failures} failed attempts before" if failures else "")
                + "); probes answer once it is complete",
            )
        if background and inventory is not None and not self.collected_once and build > timeout / 2:
            # The first collection reads every VM's samples of the last hour's realtime window
            # from nothing: it may take longer than one scrape (at 5,000 VMs, several seconds
            # after an inventory read of as many). It goes on, and the next probe answers.
            return Snapshot(
                up=False,
                kind="warming_up",
                cause=f"the first inventory ({len(inventory)} VM{'s' if len(inventory) != 1 else ''}) was read "
                f"in {build:.1f}s and the first "
                f"collection of their samples is still running (for {since:.0f}s since the first probe); "
                "probes answer once it is complete",
            )
        return Snapshot(
            up=False,
            kind="timeout",
            cause=f"vCenter did not answer within the scrape timeout ({timeout:.1f}s); "
            "the collection continues in the background",
        )

    # -- background inventory -------------------------------------------------------------
    def _start_refresher(self) -> None:
        """Under self._inv: start the inventory thread once (not after close)."""
        if self._refresher is None and not self._closed:
            self.inventory_first_asked = time.monotonic()
            self._refresher = threading.Thread(target=self._refresh_loop, name=f"inventory {self.name}", daemon=True)
            self._refresher.start()

    def _refresh_loop(self) -> None:
        while True:
            with self._inv:
                if self._closed:
                    return
                self._building, self._refresh_asked = True, False
            start, cpu = time.monotonic(), time.thread_time()
            inv: list[VirtualMachine] | None = None
            read = None
            error: TargetError | None = None
            self.refresh_paused_seconds = 0.0
            try:
                read = self.client.call(lambda si: self._watch.read(si, pause=self._yield))
                inv = read.inventory if read.inventory is not None else self.inventory  # None: unchanged
            except TargetError as exc:
                error = exc
            except Exception as exc:  # a bug must not kill the thread: report it as the cause
                log.exception("unexpected error reading the inventory of %s", self.name)
                error = TargetError(f"internal error reading the inventory: {exc.__class__.__name__}: {exc}", "error")
            wall, cpu = time.monotonic() - start, time.thread_time() - cpu
            with self._inv:
                self._building = False
                if self._closed:
                    return
                if inv is not None:
                    self.inventory, self.inventory_at = inv, time.monotonic()
                    self.inventory_error = None
                    self.inventory_generation += 1
                    if read is not None and read.full:
                        self.inventory_build_seconds = wall
                    self.inventory_update_seconds = wall
                else:
                    self.inventory_error = error
                    self.inventory_failures += 1
                self._inv.notify_all()
                delay = (
                    self.cfg.inventory_refresh if inv is not None else min(self.cfg.inventory_refresh, INVENTORY_RETRY)
                )
            if inv is not None and read is not None:
                timing = f"in {wall:.2f}s ({cpu:.2f}s CPU, {self.refresh_paused_seconds:.2f}s paused for collections)"
                disks = sum(len(vm.disks) for vm in inv)
                if read.full:
                    log.info(
                        "inventory of target=%s read: %d VMs, %d disks %s via %s",
                        self.name,
                        len(inv),
                        disks,
                        timing,
                        read.how,
                    )
                else:
                    log.log(
                        logging.INFO if read.counts.total else logging.DEBUG,
                        "inventory of target=%s updated: %d changes (%s), %d VMs, %d disks %s",
                        self.name,
                        read.counts.total,
                        read.counts,
                        len(inv),
                        disks,
                        timing,
                    )
            else:
                assert error is not None
                if self.inventory is not None:
                    log.warning(
                        "inventory of target=%s failed kind=%s cause=%s; the last complete inventory stays in use",
                        self.name,
                        error.kind,
                        error.cause,
                    )
                else:  # the waiting probes report it (one line per failed probe)
                    log.debug(
                        "first inventory of target=%s failed kind=%s cause=%s", self.name, error.kind, error.cause
                    )
            with self._inv:
                self._inv.wait_for(lambda: self._closed or self._refresh_asked, timeout=delay)

    def _yield(self) -> None:
        """Called by a refresh between pages and every few VMs it reads: while a collection runs
        (and none waits for this refresh), wait for it to end, at most REFRESH_YIELD_MAX in all
        per pause. A refresh and a collection at once share the process' one interpreter lock (and
        the vCenter): a probe met by a refresh took about twice as long at 5,000 VMs;
        now it meets at most the piece read since the last pause."""
        if self._no_collection.is_set() or self.inventory is None:
            return  # the first build: the first collection waits for it
        start = time.monotonic()
        while not self._no_collection.wait(0.1):
            if self._closed or self._waiting_for_inventory or time.monotonic() - start > REFRESH_YIELD_MAX:
                break
        self.refresh_paused_seconds += time.monotonic() - start

    def _background_inventory(self, newer_than: int | None = None) -> list[VirtualMachine]:
        """The last complete inventory (or, with ``newer_than``, one of a later generation),
        waiting for the background thread when there is none yet; the last build's error when
        it failed."""
        with self._inv:
            self._start_refresher()
            if newer_than is None and self.inventory is not None:
                return self.inventory
            if newer_than is not None or (self.inventory_error is not None and not self._building):
                self._refresh_asked = True  # a probe is waiting: no need to wait for the retry delay
                self._inv.notify_all()
            failures = self.inventory_failures
            self._waiting_for_inventory += 1
            try:
                while True:
                    if self._closed:
                        raise TargetError("the target was closed (idle session logged out)", "error")
                    if self.inventory is not None and (newer_than is None or self.inventory_generation > newer_than):
                        return self.inventory
                    if self.inventory_failures != failures and self.inventory_error is not None:
                        raise self.inventory_error
                    self._inv.wait()
            finally:
                self._waiting_for_inventory -= 1

    def _run(self, fut: Future) -> None:
        start = time.monotonic()
        try:
            snap = self._collect()
        except TargetError as exc:
            snap = Snapshot(up=False, cause=exc.cause, kind=exc.kind)
        except Exception as exc:  # a bug must not kill the target: report it as this probe's cause
            log.exception("unexpected error collecting %s", self.name)
            snap = Snapshot(up=False, cause=f"internal error: {exc.__class__.__name__}: {exc}", kind="error")
        snap.duration = time.monotonic() - start
        snap.finished = time.monotonic()
        snap.logins = self.client.logins
        with self._lock:
            self._inflight = None
            self.collected_once = True
            self._no_collection.set()
        fut.set_result(snap)

    # -- collection -----------------------------------------------------------------------
    def _refresh_inventory(self, force: bool = False) -> None:
        """Make self.inventory current for this collection: the background thread's last one,
        or (inventory_mode: sync) read here when due."""
        if self.cfg.inventory_mode == "background":
            if force:
                with self._inv:
                    generation = self.inventory_generation
                self._background_inventory(newer_than=generation)
            else:
                self._background_inventory()
        else:
            now = time.monotonic()
            if force or self.inventory is None or now - self.inventory_at >= self.cfg.inventory_refresh:
                start = time.monotonic()
                self.inventory = self.client.call(collect_inventory)
                self.inventory_at = time.monotonic()
                self.inventory_build_seconds = self.inventory_at - start
        with self._inv:
            inv, inv_at = self.inventory, self.inventory_at
        if inv is not None and inv is self._applied:
            self._applied_at = inv_at  # a refresh found nothing changed: known current since then
        elif inv is not None:  # None only before the first inventory
            self._applied, self._applied_at = inv, inv_at
            self.render_cache = {}
            alive = {(vm.moref, d.instance) for vm in inv for d in vm.disks}
            for key in list(self.states):
                if key not in alive:  # deleted VMs and disks: forget their counters
                    del self.states[key]
            entities = {vm.moref for vm in inv} | {vm.host_id for vm in inv}
            for moref in list(self.cpu_states):
                if moref not in entities:
                    del self.cpu_states[moref]

    def _collect(self) -> Snapshot:
        self.collections += 1
        try:
            return self._collect_once()
        except TargetError as exc:
            if "ManagedObjectNotFound" not in exc.cause:
                raise
        # A VM of the cached inventory went away (deleted, unregistered): read the inventory
        # again and collect once more, instead of failing the probe until the next refresh.
        log.info("%s: a VM of the cached inventory is gone; reading the inventory again", self.name)
        self._refresh_inventory(force=True)
        return self._collect_once()

    def _collect_once(self) -> Snapshot:
        self._refresh_inventory()
        if self.keys is None:
            counters = self.client.call(lambda si: list(si.content.perfManager.perfCounter))
            self.keys = counter_keys(counters)
            if not self.keys:
                raise TargetError("vCenter has none of the virtualDisk performance counters", "protocol")
            self.cpu_keys = counter_keys(counters, CPU_COUNTERS) if self.cfg.cpu else {}
            if self.cfg.cpu and len(self.cpu_keys) < len(CPU_COUNTERS):
                log.info(
                    "vcenter target %s does not offer %s: no CPU for them (the disks are collected as usual)",
                    self.name,
                    ", ".join(sorted(set(CPU_COUNTERS) - set(self.cpu_keys))),
                )
            self.unmapped = tuple(unmapped_counters(counters))
            if self.unmapped:
                log.info(
                    "vcenter target %s offers %d virtualDisk counters ioparallax does not read "
                    "(vcenter_unmapped_counters): %s",
                    self.name,
                    len(self.unmapped),
                    ", ".join(self.unmapped),
                )
        if self.perf_manager is None:
            self.perf_manager = self.client.call(lambda si: si.content.perfManager._moId)
        if self.max_metrics is None:
            self.max_metrics = self.client.call(read_max_query_metrics)
        key_names = {k: n for n, k in self.keys.items()}
        key_list = sorted(self.keys.values())

        snap = Snapshot(up=True)
        inventory = self._applied  # the background thread may publish a newer one meanwhile
        assert inventory is not None
        by_moref = {vm.moref: vm for vm in inventory}
        requests = []
        for vm in inventory:
            if vm.power_state != "poweredOn" or not vm.disks:
                continue  # no realtime statistics for VMs that are not running
            seen = [
                self.states[(vm.moref, d.instance)].last_timestamp
                for d in vm.disks
                if (vm.moref, d.instance) in self.states
            ]
            since = min((t for t in seen if t is not None), default=None)
            instances = ("*",) if self.star_ok else tuple(d.instance for d in vm.disks)
            requests.append(EntityRequest(vm.moref, instances, since))

        fmt = self.cfg.perf_format
        perf_manager = self.perf_manager

        def run(batch: list[EntityRequest]) -> ParseResult:
            return self.client.call(lambda si: query_perf(si, perf_manager, batch, key_list, key_names, fmt))

        pending = requests
        while pending:
            retry: list[EntityRequest] = []
            batches = list(batch_requests(pending, len(key_list), self.max_metrics))
            try:
                for batch, parsed in self._query_all(run, batches):
                    snap.queries += 1
                    snap.misaligned_series += parsed.misaligned
                    snap.empty_series += parsed.empty
                    snap.unread_series += parsed.unread + self._unknown_instances(parsed, by_moref)
                    if parsed.star_echoed:
                        # The server did not expand "*" (stock vcsim): ask again, instance by instance.
                        if self.star_ok:
                            log.info("%s does not expand instance '*'; querying disk instances explicitly", self.name)
                            self.star_ok = False
                        retry.extend(
                            EntityRequest(r.moref, tuple(d.instance for d in by_moref[r.moref].disks), r.since)
                            for r in batch
                            if r.moref in parsed.star_echoed
                        )
                    for moref, per_instance in parsed.samples.items():
                        for instance, samples in per_instance.items():
                            state = self.states.get((moref, instance))
                            if state is None:
                                state = self.states[(moref, instance)] = DiskCounters()
                            snap.new_samples += integrate(state, samples)
            except TargetError as exc:
                if "ManagedObjectNotFound" in exc.cause and self.cfg.inventory_mode == "sync":
                    self.inventory_at = 0.0  # a VM went away: refresh the inventory next time
                raise
            pending = retry

        if self.cpu_keys:
            self._collect_cpu(snap, inventory, perf_manager, fmt)
        pattern = self.cfg.cvm_name_pattern
        snap.cvms = [(vm, why) for vm in inventory if (why := is_cvm(vm.name, vm.vmx_path, pattern))]
        snap.star_expanded_by_server = self.star_ok
        snap.missing_counters = tuple(sorted(set(_wanted()) - set(self.keys)))
        snap.unmapped_counters = self.unmapped
        snap.unread_disks = sum(vm.unread_disks for vm in inventory)
        unread = [vm for vm in inventory if vm.unread_disks and vm.moref not in self._unread_logged]
        if unread and len(self._unread_logged) < 1000:
            self._unread_logged.update(vm.moref for vm in unread)
            log.info(
                "vcenter target %s: %d virtual disks of %d VMs have no controller address the exporter reads "
                "and are not shown (vcenter_inventory_unread_disks): %s",
                self.name,
                sum(vm.unread_disks for vm in unread),
                len(unread),
                ", ".join(f"{vm.name} ({vm.moref})" for vm in unread[:5]) + (", ..." if len(unread) > 5 else ""),
            )
        snap.vms = inventory
        snap.render_cache = self.render_cache
        snap.inventory_age = time.monotonic() - self._applied_at
        snap.inventory_build_seconds = self.inventory_build_seconds
        queried = {r.moref for r in requests}
        oldest_fresh = self._oldest_fresh_samples(inventory)
        for vm in inventory:
            for i, d in enumerate(vm.disks):
                state = self.states.get((vm.moref, d.instance))
                if state is not None and state.samples:
                    # Counters stay while the disk exists (rates fall to 0); the latest sample is
                    # shown only for a running VM whose samples keep up with its host's newest.
                    fresh = (
                        vm.moref in queried
                        and state.last_timestamp is not None
                        and state.last_timestamp >= oldest_fresh.get(vm.host, float("inf"))
                    )
                    snap.disks.append(DiskRow(vm, i, _frozen(state), fresh))
        return snap

    def _collect_cpu(self, snap: Snapshot, inventory: list[VirtualMachine], perf_manager: str, fmt: str) -> None:
        """The CPU counters (instance "": the entity's aggregate) of every running VM and of every
        host that runs one, integrated like the disks' samples. A failing CPU query leaves the
        CPU out of this probe (snap.cpu_error, logged once), never the disks."""
        names = {k: n for n, k in self.cpu_keys.items()}
        keys = sorted(self.cpu_keys.values())
        hosts: dict[str, VirtualMachine] = {}
        requests = []
        # In moref order, not by name: a capture's replay asks the same (anonymized names sort otherwise).
        for vm in sorted(inventory, key=lambda v: v.moref):
            if vm.host_id:
                hosts.setdefault(vm.host_id, vm)
            if vm.power_state == "poweredOn":
                state = self.cpu_states.get(vm.moref)
                requests.append(EntityRequest(vm.moref, ("",), state.last_timestamp if state else None))
        for host_id in sorted(hosts):
            state = self.cpu_states.get(host_id)
            requests.append(EntityRequest(host_id, ("",), state.last_timestamp if state else None, "HostSystem"))

        def run(batch: list[EntityRequest]) -> ParseResult:
            return self.client.call(lambda si: query_perf(si, perf_manager, batch, keys, names, fmt))

        try:
            for _, parsed in self._query_all(run, list(batch_requests(requests, len(keys), self.max_metrics or 256))):
                snap.cpu_queries += 1
                for moref, per_instance in parsed.samples.items():
                    samples = per_instance.get("")
                    if samples:
                        state = self.cpu_states.setdefault(moref, CpuCounters())
                        snap.new_cpu_samples += integrate_cpu(state, samples)
        except TargetError as exc:
            if exc.kind not in ("protocol", "error"):
                raise  # the session or the connection: the probe fails as a disk query would
            snap.cpu_error = exc.cause
            if not self._cpu_error_logged:
                self._cpu_error_logged = True
                log.warning(
                    "vcenter target %s: the CPU query failed (%s); disks collected without CPU", self.name, exc.cause
                )
        snap.cpu_counters = tuple(sorted(self.cpu_keys))
        for vm in inventory:
            state = self.cpu_states.get(vm.moref)
            if state is not None and state.samples:
                snap.vm_cpu.append((vm, dataclasses.replace(state)))
        for host_id, vm in sorted(hosts.items(), key=lambda kv: (kv[1].host, kv[0])):
            state = self.cpu_states.get(host_id)
            snap.hosts.append(
                HostRow(
                    host_id,
                    vm.host,
                    vm.host_cpu_mhz,
                    vm.host_cores,
                    dataclasses.replace(state) if state is not None and state.samples else None,
                )
            )

    def _unknown_instances(self, parsed: ParseResult, by_moref: dict[str, VirtualMachine]) -> int:
        """Answer series of a disk instance the VM's inventory does not list (a disk added since
        the inventory was read, or an instance kind the inventory does not read): counted, and
        logged once per instance name."""
        n = 0
        for moref, per_instance in parsed.samples.items():
            vm = by_moref.get(moref)
            disks = {d.instance for d in vm.disks} if vm is not None else set()
            for instance in per_instance:
                if instance not in disks:
                    n += 1
                    if instance not in self._unread_logged and len(self._unread_logged) < 1000:
                        self._unread_logged.add(instance)
                        log.info(
                            "vcenter target %s: QueryPerf answered instance %r of %s, which no disk of its "
                            "inventory has; not shown (vcenter_perf_unread_series)",
                            self.name,
                            instance,
                            moref,
                        )
        return n

    def _oldest_fresh_samples(self, inventory: list[VirtualMachine]) -> dict[str, float]:
        """Per ESXi host, the oldest sample end still shown as the latest sample: sample_max_age
        before the host's present, estimated as the newest sample end of its VMs plus the time
        since that was first seen. The host's own clock, advanced by ours only while no newer
        sample appears, so neither the exporter's nor other hosts' clocks need agree with it. A
        VM whose samples stop (powered off, vanished) falls behind the other VMs of its host;
        when all of them stop (host down), time still moves on."""
        now = time.monotonic()
        newest: dict[str, float] = {}
        for vm in inventory:
            for d in vm.disks:
                state = self.states.get((vm.moref, d.instance))
                if state is not None and state.last_timestamp is not None:
                    if state.last_timestamp > newest.get(vm.host, float("-inf")):
                        newest[vm.host] = state.last_timestamp
        clocks = {}
        for host, ts in newest.items():
            seen = self.host_clocks.get(host)
            clocks[host] = (ts, now) if seen is None or ts > seen[0] else seen
        self.host_clocks = clocks  # hosts without VM samples any more are forgotten
        max_age = self.cfg.sample_max_age
        return {host: ts + (now - at) - max_age for host, (ts, at) in clocks.items()}

    def _query_all(
        self, run: Callable[[list[EntityRequest]], ParseResult], batches: list[list[EntityRequest]]
    ) -> Iterator[tuple[list[EntityRequest], ParseResult]]:
        """(batch, answer) in batch order, with up to PERF_CONCURRENCY QueryPerf calls in flight:
        vCenter computes the next answers while this thread integrates the last one. On the
        first failure the queued calls are cancelled (nothing of them is integrated, so the
        next probe asks for the same samples again)."""
        if len(batches) <= 1 or PERF_CONCURRENCY <= 1:
            for batch in batches:
                yield batch, run(batch)
            return
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(PERF_CONCURRENCY, thread_name_prefix=f"queryperf {self.name}")
            pool = self._pool
        futures = [pool.submit(run, batch) for batch in batches]
        try:
            for batch, fut in zip(batches, futures):
                yield batch, fut.result()
        finally:
            for fut in futures:
                fut.cancel()

    def close(self) -> None:
        with self._inv:
            self._closed = True  # the inventory thread stops (and logs in no more)
            self._inv.notify_all()
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()


def _wanted() -> tuple[str, ...]:
    return VIRTUAL_DISK_COUNTERS


def query_perf(
    si: Any, perf_manager: str, requests: list[EntityRequest], keys: list[int], key_names: dict[int, str], fmt: str
) -> ParseResult:
    """One QueryPerf round trip for ``requests``, parsed."""
    status, data = post(si, query_perf_body(perf_manager, requests, keys, fmt))
    return parse_query_perf(data, key_names, status)


def _frozen(state: DiskCounters) -> DiskCounters:
    """A copy the exposition can read while the next collection updates the original."""
    c = copy.copy(state)
    c.seeks = dict(state.seeks)
    return c
