"""One Prism target: its client (session), the counters of its virtual disks, and the reads that
probes and the sample keeper share.

A *read* is the ``virtual_disks`` call (all pages) and, when due, the VM list. It is dated by
Prism's ``Date`` header: an answer dated at least ``v2_sample_delay`` after a 30 s boundary holds
the sample that ended at that boundary (:func:`.parse.sample_end`), and each disk integrates a
sample only if it is newer than the last one it integrated, so overlapping reads, fast scrapes
and the keeper never count a sample twice.

Probes start a read (or join the one running) and wait for it until their deadline; a read that
outlives the deadline finishes in the background and is integrated (the probe answers
``prism_up 0`` with ``kind="timeout"``). The *sample keeper* thread, started at the first probe,
makes sure each 30 s sample is read once even when no probe comes in its safe window (scrape
intervals above 30 s): see docs/prism.md.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from ioparallax.exporters.common import prismlist as paging
from ioparallax.exporters.common.prismclient import TargetError
from ioparallax.exporters.prism import parse
from ioparallax.exporters.prism.client import client_for
from ioparallax.exporters.prism.config import SAMPLE_SECONDS, TargetConfig

log = logging.getLogger(__name__)

V2 = "/PrismGateway/services/rest/v2.0"
V4_STATS = "/api/vmm/v4.0/ahv/stats/vms"
#: The keeper never sleeps less than this (local seconds), nor more than this, between checks.
KEEPER_MIN_SLEEP, KEEPER_MAX_SLEEP = 0.05, 30.0
#: Most bytes the pages of one list may add up to (each answer is also capped: prismclient.MAX_BODY_BYTES).
MAX_READ_BYTES = 256 * 1024 * 1024


@dataclass
class ViewCounters:
    read_ops: float = 0.0
    write_ops: float = 0.0
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    read_latency: float = 0.0  # seconds: sum over ops of their latency
    write_latency: float = 0.0

    def add(self, a: parse.Amounts) -> None:
        self.read_ops += a.read_ops or 0.0
        self.write_ops += a.write_ops or 0.0
        self.read_bytes += a.read_bytes or 0.0
        self.write_bytes += a.write_bytes or 0.0
        self.read_latency += a.read_latency or 0.0
        self.write_latency += a.write_latency or 0.0


@dataclass
class DiskState:
    disk: parse.VirtualDisk  # identity as last read
    hypervisor: ViewCounters = field(default_factory=ViewCounters)
    controller: ViewCounters = field(default_factory=ViewCounters)
    samples: int = 0  # samples with VM-view values
    last_end: int | None = None  # end of the newest sample integrated (Prism's clock)
    latest: parse.LatestSample | None = None
    latest_end: int | None = None  # end of the sample `latest` came from
    controller_end: int | None = None  # controller_api v4: end of the newest v4 sample integrated
    last_hash: int = 0  # stats_hash of the answer integrated as last_end


@dataclass
class Snapshot:
    """What a probe shows; copied under the target's lock."""

    up: bool
    kind: str = ""
    cause: str = ""
    disks: list[DiskState] = field(default_factory=list)
    vms: list[parse.Vm] = field(default_factory=list)
    hosts: dict[str, str] = field(default_factory=dict)
    host_records: list[parse.Host] = field(default_factory=list)  # with their CPU (cpu: true)
    cpu: bool = True  # the target's cpu setting: the CPU families are shown
    newest_end: int | None = None  # newest sample integrated by any disk
    prism_now: float | None = None
    logins: int = 0
    requests: int = 0  # HTTP requests of the read this probe waited for
    new_samples: int = 0  # disk samples integrated since the previous probe
    missed: int = 0
    late: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    unknown_keys: dict[str, int] = field(default_factory=dict)  # stats key -> entities (at most MAX_UNKNOWN_KEYS)
    unknown_count: int = 0  # distinct unknown stats keys, all of them


@dataclass
class ReadResult:
    ok: bool
    kind: str = ""
    cause: str = ""
    requests: int = 0


#: Unknown stats keys named per target (prism_parse_unknown_field_entities); more are counted in
#: prism_parse_unknown_fields only.
MAX_UNKNOWN_KEYS = 50


class Target:
    def __init__(
        self,
        name: str,
        cfg: TargetConfig,
        time_scale: float = 1.0,
        vm_info: bool = True,
        client_factory: Callable[[str, TargetConfig], Any] = client_for,
    ):
        self.name = name
        self.cfg = cfg
        # PrismClient, or (--replay, capture.replay) a stand-in answering from a capture.
        self.client = client_factory(name, cfg)
        self.time_scale = time_scale
        self.vm_info = vm_info
        self._lock = threading.Lock()  # state below
        self._read_lock = threading.Lock()  # one read at a time
        self._inflight: Future | None = None
        self.disks: dict[str, DiskState] = {}
        self.vms: list[parse.Vm] = []
        self.hosts: dict[str, str] = {}
        self.host_records: list[parse.Host] = []
        self.inventory_at: float | None = None  # time.monotonic() of the last VM list
        self.vm_signature: frozenset | None = None  # (VM uuid, has no VM view) of its disks then
        self.newest_end: int | None = None
        self.clock: tuple[float, float] | None = None  # (Prism's Date, time.monotonic()) of the last answer
        self.new_samples = 0
        self.missed = 0
        self.late = 0  # samples that changed after they were integrated (v2_sample_delay too short)
        self.late_end: int | None = None
        self.errors: dict[str, int] = {}
        self.no_date_logged = False
        self.unknown_keys: dict[str, int] = {}  # stats key -> entities holding it, in the last read
        self.unknown_logged: set[str] = set()
        self._closed = threading.Event()
        self._keeper: threading.Thread | None = None

    # -- probes ---------------------------------------------------------------------------
    def probe(self, timeout: float) -> Snapshot:
        fut = self._start_read()
        try:
            result = fut.result(timeout=max(0.0, timeout))
        except FutureTimeout:
            result = ReadResult(
                False,
                "timeout",
                f"Prism did not answer within the scrape timeout ({timeout:.1f}s); the read continues in the background",
            )
        self._start_keeper()
        with self._lock:
            if not result.ok:
                self.errors[result.kind] = self.errors.get(result.kind, 0) + 1
                return Snapshot(
                    up=False,
                    kind=result.kind,
                    cause=result.cause,
                    logins=self.client.logins,
                    errors=dict(self.errors),
                    missed=self.missed,
                )
            snap = Snapshot(
                up=True,
                disks=[_copy(d) for d in self.disks.values()],
                vms=list(self.vms),
                hosts=dict(self.hosts),
                host_records=list(self.host_records),
                cpu=self.cfg.cpu,
                newest_end=self.newest_end,
                prism_now=self.prism_now(),
                logins=self.client.logins,
                requests=result.requests,
                new_samples=self.new_samples,
                missed=self.missed,
                late=self.late,
                errors=dict(self.errors),
                unknown_keys=dict(sorted(self.unknown_keys.items())[:MAX_UNKNOWN_KEYS]),
                unknown_count=len(self.unknown_keys),
            )
            self.new_samples = 0
            return snap

    def prism_now(self) -> float | None:
        """Prism's clock now, from its last Date header (advanced by our monotonic clock)."""
        if self.clock is None:
            return None
        date, at = self.clock
        return date + (time.monotonic() - at) * self.time_scale

    def busy(self) -> bool:
        with self._lock:
            return self._inflight is not None

    def _start_read(self) -> Future:
        with self._lock:
            fut = self._inflight
            if fut is None:
                fut = self._inflight = Future()
                threading.Thread(target=self._run, args=(fut,), name=f"read {self.name}", daemon=True).start()
            return fut

    def _run(self, fut: Future) -> None:
        try:
            with self._read_lock:
                result = self._read()
        except TargetError as exc:
            result = ReadResult(False, exc.kind, exc.cause)
        except parse.ParseError as exc:
            result = ReadResult(False, "protocol", str(exc))
        except Exception as exc:  # a bug must not kill the target: report it as this read's cause
            log.exception("unexpected error reading %s", self.name)
            result = ReadResult(False, "error", f"internal error: {exc.__class__.__name__}: {exc}")
        with self._lock:
            self._inflight = None
        fut.set_result(result)

    # -- the read -------------------------------------------------------------------------
    def _list(self, path: str, what: str, params: dict | None = None) -> tuple[list[dict], list[float | None], int]:
        """All pages of a v2.0 list: (entities, the Date of each page, requests made); at most
        MAX_READ_BYTES over its pages (a ParseError past it)."""
        nbytes = [0]
        lock = threading.Lock()

        def get(p: dict[str, Any]) -> tuple[Any, float | None]:
            ans = self.client.get(path, p)
            with lock:
                nbytes[0] += ans.nbytes
                if nbytes[0] > MAX_READ_BYTES:
                    raise parse.ParseError(f"the {what} pages add up to more than {MAX_READ_BYTES} bytes")
            return ans.doc, ans.date

        return paging.list_all(get, what, self.cfg.page_size, params, name=self.name)

    def _vm_list(self) -> tuple[list[parse.Vm], dict[str, str], list[parse.Host], int]:
        vm_ents, _, n = self._list(f"{V2}/vms/", "vms", {"include_vm_disk_config": "true"})
        host_ents, _, m = self._list(f"{V2}/hosts/", "hosts")
        return parse.vms(vm_ents), parse.hosts(host_ents), parse.host_records(host_ents), n + m

    def _read(self) -> ReadResult:
        start = time.monotonic()
        # A VM list due by age is read beside the disks (one round trip less on a cold start).
        # With cpu (the default) the VM and host lists are read every time: their stats are the CPU.
        due = self.vm_info and (
            self.cfg.cpu or self.inventory_at is None or start - self.inventory_at >= self.cfg.inventory_refresh
        )
        with ThreadPoolExecutor(1, thread_name_prefix=f"vm list {self.name}") as pool:
            vm_list = pool.submit(self._vm_list) if due else None
            ents, dates, requests = self._list(f"{V2}/virtual_disks/", "virtual_disks")
            records = [r for r in (parse.virtual_disk(e) for e in ents) if r is not None]
            unknown = parse.unknown_stats_keys(ents)
            listed = vm_list.result() if vm_list is not None else None
        # ... and at once when the disks say a VM changed: one appeared or went (deleted), or
        # its VM view came or went (powered on or off).
        signature = frozenset((r.vm_id, r.hypervisor.empty) for r in records)
        changed = self.vm_signature is not None and signature != self.vm_signature
        if listed is None and self.vm_info and changed:
            listed = self._vm_list()
        vms, hosts, host_records = None, None, None
        if listed is not None:
            vms, hosts, host_records, n = listed
            requests += n
        now_mono = start
        # The sample the answer holds: every page must date the same safe sample.
        ends = {parse.sample_end(d, self.cfg.v2_sample_delay) if d is not None else None for d in dates}
        end = ends.pop() if len(ends) == 1 else None
        if dates and dates[0] is None and not self.no_date_logged:
            self.no_date_logged = True
            log.warning(
                "target=%s: Prism's answers carry no usable Date header (missing, unreadable, or not in years 1971-9000); "
                "samples cannot be dated and are not integrated",
                self.name,
            )
        with self._lock:
            if dates and dates[-1] is not None:
                self.clock = (dates[-1], time.monotonic())
            if vms is not None and hosts is not None:
                self.vms, self.hosts, self.inventory_at = vms, hosts, now_mono
                self.host_records = host_records or []
                self.vm_signature = signature
            elif not self.vm_info:
                self.vm_signature = signature
            self._apply(records, end)
            self.unknown_keys = unknown
            new_keys = sorted(set(unknown) - self.unknown_logged)
            v4_work = list(self.disks.values()) if self.cfg.controller_api == "v4" else []
            prism_now = self.prism_now()
        if new_keys:
            self._log_unknown(new_keys, unknown)
        if v4_work:
            requests += self._read_v4(v4_work, end, prism_now)
        return ReadResult(True, requests=requests)

    def _log_unknown(self, keys: list[str], unknown: dict[str, int]) -> None:
        """One line per unknown stats key and target, for as long as the exporter runs (the first
        MAX_UNKNOWN_KEYS keys; then one line saying how many more)."""
        room = MAX_UNKNOWN_KEYS - len(self.unknown_logged)
        for key in keys[: max(0, room)]:
            self.unknown_logged.add(key)
            log.info(
                "target=%s: virtual_disks stats key %r is not read by ioparallax (%d disks hold it); "
                "if it matters, capture the answer and report it (prism-exporter capture, docs/prism.md)",
                self.name,
                key,
                unknown[key],
            )
        if len(keys) > room and "" not in self.unknown_logged:
            self.unknown_logged.add("")  # said once
            log.info(
                "target=%s: more stats keys not read by ioparallax than the %d named (%d in this answer)",
                self.name,
                MAX_UNKNOWN_KEYS,
                len(unknown),
            )

    def _read_v4(self, disks: list[DiskState], end: int | None, prism_now: float | None) -> int:
        """controller_api v4: each disk's storage-view samples since the last one integrated, from
        the v4 time series (dated by their own timestamps: none lost while Prism keeps them);
        returns the requests made."""
        if prism_now is None:
            return 0
        stop = parse.iso_time(prism_now)
        # A disk seen for the first time starts with the current sample (no history before it).
        current = end if end is not None else int(prism_now // SAMPLE_SECONDS) * SAMPLE_SECONDS - SAMPLE_SECONDS
        floor = current - SAMPLE_SECONDS

        def fetch(st: DiskState) -> tuple[DiskState, list[tuple[int, parse.Amounts]]]:
            since = st.controller_end if st.controller_end is not None else floor
            path = f"{V4_STATS}/{st.disk.vm_id}/disks/{st.disk.uuid}"
            params = {
                "$startTime": parse.iso_time(since),
                "$endTime": stop,
                "$samplingInterval": SAMPLE_SECONDS,
                "$statType": "AVG",
            }
            return st, parse.v4_disk_series(self.client.get(path, params).doc)

        with ThreadPoolExecutor(self.cfg.v4_concurrency, thread_name_prefix=f"v4 {self.name}") as pool:
            results = list(pool.map(fetch, disks))
        with self._lock:
            for st, series in results:
                for sample_end, amounts in series:
                    if sample_end > prism_now + SAMPLE_SECONDS:
                        # not ended yet by Prism's own clock (a timestamp in year 9999): taken, it
                        # would hide every real sample after it for good
                        continue
                    if sample_end > (st.controller_end if st.controller_end is not None else floor):
                        st.controller.add(amounts)
                        st.controller_end = sample_end
        return len(disks)

    def _apply(self, records: list[parse.VirtualDisk], end: int | None) -> None:
        """Under self._lock: the disks of this answer replace the known ones (a deleted disk's
        counters go with it), and sample ``end`` is integrated where it is new."""
        old = self.disks
        new: dict[str, DiskState] = {}
        changed = 0  # disks whose sample `end` reads differently from when it was integrated
        for r in records:
            key = f"{r.vm_id}/{r.uuid}"
            st = old.get(key)
            if st is None:
                st = DiskState(r)
            st.disk = r
            new[key] = st
            if end is not None and end == st.last_end and r.stats_hash != st.last_hash:
                changed += 1
            if end is None or (st.last_end is not None and end <= st.last_end):
                continue
            st.last_end, st.last_hash = end, r.stats_hash
            if self.cfg.controller_api == "v2":
                st.controller.add(r.controller)
            if not r.hypervisor.empty:
                st.hypervisor.add(r.hypervisor)
                st.samples += 1
                self.new_samples += 1
            st.latest, st.latest_end = r.latest, end
        self.disks = new
        if changed and end != self.late_end:
            # An earlier answer dated this sample held another one: Prism published it later
            # than v2_sample_delay after the boundary (that earlier answer was its previous sample).
            self.late_end = end
            self.late += 1
            log.warning(
                "target=%s: the sample ending at %d changed after it was integrated (%d disks): Prism publishes "
                "later than v2_sample_delay=%gs after a 30 s boundary; raise v2_sample_delay",
                self.name,
                end,
                changed,
                self.cfg.v2_sample_delay,
            )
        if end is not None and (self.newest_end is None or end > self.newest_end):
            if self.newest_end is not None and end - self.newest_end > SAMPLE_SECONDS:
                gap = int((end - self.newest_end) // SAMPLE_SECONDS) - 1
                self.missed += gap
                log.warning(
                    "target=%s: %d 30 s samples between %d and %d were not read (Prism unreachable?)",
                    self.name,
                    gap,
                    self.newest_end,
                    end,
                )
            self.newest_end = end

    # -- the sample keeper ----------------------------------------------------------------
    def _start_keeper(self) -> None:
        if not self.cfg.v2_sample_keeper:
            return
        with self._lock:
            if self._keeper is None and not self._closed.is_set():
                self._keeper = threading.Thread(target=self._keep, name=f"sample keeper {self.name}", daemon=True)
                self._keeper.start()

    def _keeper_wait(self) -> float:
        """Prism seconds until the keeper should check again (0: read now)."""
        with self._lock:
            now = self.prism_now()
            newest = self.newest_end
        if now is None:
            return 5.0
        boundary = math.floor(now / SAMPLE_SECONDS) * SAMPLE_SECONDS
        due = boundary + self.cfg.v2_sample_delay + 1.0
        if newest is not None and newest >= boundary:
            return boundary + SAMPLE_SECONDS + self.cfg.v2_sample_delay + 1.0 - now
        if now < due:
            return due - now
        if now - boundary > SAMPLE_SECONDS - 1.0:  # too late for this one: wait for the next
            return boundary + SAMPLE_SECONDS + self.cfg.v2_sample_delay + 1.0 - now
        return 0.0

    def _keep(self) -> None:
        while not self._closed.is_set():
            wait = self._keeper_wait()
            if wait <= 0:
                result = self._start_read().result()
                if not result.ok:
                    log.debug(
                        "sample keeper of target=%s: read failed kind=%s cause=%s", self.name, result.kind, result.cause
                    )
                wait = 5.0 if not result.ok else 1.0  # never a tight loop, whatever the dates say
            local = min(KEEPER_MAX_SLEEP, max(KEEPER_MIN_SLEEP, wait / self.time_scale))
            self._closed.wait(local)

    def close(self) -> None:
        self._closed.set()
        self.client.close()


def _copy(d: DiskState) -> DiskState:
    """A copy the exposition can read while the next read updates the original."""
    return dataclasses.replace(
        d, hypervisor=dataclasses.replace(d.hypervisor), controller=dataclasses.replace(d.controller)
    )
