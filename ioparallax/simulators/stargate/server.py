"""One HTTP server per CVM of a scenario, serving the Stargate port-2009 pages.

In-process API (tests, benchmarks)::

    with StargateCluster("zero-heavy", clock=lambda: 1_700_000_000.0) as sim:
        sim.urls            # {"cvm-1": "http://127.0.0.1:40123", ...}
        sim.set_fault("cvm-2", "slow", delay=3)
        sim.clear_faults()

Each CVM shows only the vdisks it hosts at the current period second (``Disk.cvm_at``). Fault
injection (``slow``, ``http_500``, ``truncated``, ``garbage``, ``refused``) works per CVM,
optionally only for one kind of page or one vdisk's detail page, in-process or over HTTP
(``POST /-/sim/fault?cvm=cvm-2&mode=slow&delay=3``; the ``/-/sim/`` endpoints are never faulted
and any CVM's server controls every CVM). See ``docs/stargate-simulator.md``.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ioparallax.simulators import faultserver
from ioparallax.simulators.faultserver import (
    OK,
    Answer,
    SimHandler,
    SimServer,
    answer_fault,
    control,
    send_truncated,
    state_answer,
)
from ioparallax.simulators.prism.model import PrismModel
from ioparallax.simulators.scenario.model import Disk, Scenario, load_scenario
from ioparallax.simulators.scenario.storage import StorageModel, VDiskStorageView
from ioparallax.simulators.scenario.trace import Trace, compile_scenario

from . import pages
from .synthetic import synthetic_scenario

log = logging.getLogger("stargate_simulator")

FAULT_SCOPES = ("all", "main", "detail", "vars", "prism")
PRISM_VIRTUAL_DISKS = "/PrismGateway/services/rest/v2.0/virtual_disks"


@dataclass
class Fault(faultserver.Fault):
    """A fault on one CVM. ``only`` limits it to one kind of page (``main``, ``detail``, ``vars``,
    ``prism``); ``vdisk`` to one vdisk's detail page; ``until`` (epoch, real time) ends it."""

    vdisk: int | None = None
    abort: bool = False  # truncated: announce the full length, then drop the connection

    def applies(self, scope: str, vdisk: int | None) -> bool:
        if self.expired:
            return False
        if self.mode == "refused":
            return True
        if self.vdisk is not None:
            return scope == "detail" and vdisk == self.vdisk
        return self.only in ("all", scope)


def resolve_scenario(
    scenario_or_name: Scenario | str | os.PathLike[str] | None, vdisk_count: int | None, cvm_count: int | None = None
) -> Scenario:
    """A scenario object, a library name or YAML path; or, with ``vdisk_count``, a synthetic
    scenario of that many vdisks on the first CVM (keeping the given scenario's CVMs and build),
    or, with ``cvm_count`` too, dealt over that many generated CVMs."""
    base: Scenario | None
    if scenario_or_name is None:
        base = None
    elif isinstance(scenario_or_name, Scenario):
        base = scenario_or_name
    else:
        base = load_scenario(scenario_or_name)
    if vdisk_count is None:
        if base is None:
            raise ValueError("need a scenario or a vdisk_count")
        return base
    if base is None:
        return synthetic_scenario(vdisk_count, cvm_count=cvm_count)
    return synthetic_scenario(
        vdisk_count,
        cvms=base.cluster.cvms,
        page_build=base.cluster.page_build,
        hybrid=base.cluster.hybrid,
        cvm_count=cvm_count,
    )


class _Handler(SimHandler):
    server_version = "StargateSim/1.0"


class CvmServer:
    """The Stargate of one CVM: its identity and its HTTP server."""

    def __init__(self, cluster: StargateCluster, name: str, index: int, host: str, port: int):
        self.cluster = cluster
        self.name = name
        self.index = index
        self.host = host
        self.port = port
        self.svm_id = index + 2
        self.httpd: SimServer | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()

    def dispatch(self, h: SimHandler, method: str) -> None:
        self.cluster._dispatch(self, h, method)

    @property
    def handle(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def listening(self) -> bool:
        return self.httpd is not None

    def listen(self) -> None:
        with self.lock:
            if self.httpd is not None:
                return
            httpd = SimServer((self.host, self.port), self.dispatch, log, f"cvm={self.name}", _Handler, owner=self)
            self.port = httpd.server_address[1]
            self.httpd = httpd
            self.thread = threading.Thread(
                target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, name=f"stargate-sim-{self.name}", daemon=True
            )
            self.thread.start()
            log.info("cvm=%s listening on %s", self.name, self.url)

    def close(self) -> None:
        with self.lock:
            httpd, self.httpd = self.httpd, None
            thread, self.thread = self.thread, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        httpd.drop_connections()
        if thread is not None:
            thread.join(5)
        log.info("cvm=%s stopped listening on %s", self.name, self.url)


class StargateCluster:
    """Stargate pages of every CVM of a scenario, computed from its trace at ``clock()``.

    ``ports``: a list (in CVM order) or a mapping CVM -> port; 0 or missing picks a free port.
    ``history_start``: epoch when the simulated Stargates started (default: ``clock()`` now);
    the 1 hr working set reads 0 until an hour after it.
    ``vdisk_count``: serve a synthetic scenario with that many vdisks on the first CVM, or, with
    ``cvm_count``, dealt round-robin over that many generated CVMs (``cvm-1`` ..).
    ``prism_auth``: (user, password) that the Prism endpoint requires as HTTP basic auth (401
    otherwise), as real Prism does; None serves it without authentication.
    """

    def __init__(
        self,
        scenario_or_name: Scenario | str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        ports: Sequence[int] | Mapping[str, int] | None = None,
        clock: Callable[[], float] = time.time,
        vdisk_count: int | None = None,
        history_start: float | None = None,
        prism_auth: tuple[str, str] | None = None,
        cvm_count: int | None = None,
    ):
        self.scenario = resolve_scenario(scenario_or_name, vdisk_count, cvm_count)
        self.prism_auth = prism_auth
        self.trace: Trace = compile_scenario(self.scenario)
        self.clock = clock
        self.start_time = clock() if history_start is None else history_start
        self.model = StorageModel(self.trace, self.start_time)
        self.build = self.scenario.cluster.page_build
        cvms = self.scenario.cluster.cvms
        if ports is None:
            port_of = dict.fromkeys(cvms, 0)
        elif isinstance(ports, Mapping):
            unknown = set(ports) - set(cvms)
            if unknown:
                raise ValueError(f"ports given for unknown CVMs: {', '.join(sorted(unknown))}")
            port_of = {c: int(ports.get(c, 0)) for c in cvms}
        else:
            if len(ports) != len(cvms):
                raise ValueError(f"{len(ports)} ports for {len(cvms)} CVMs")
            port_of = dict(zip(cvms, map(int, ports)))
        self.cvms: dict[str, CvmServer] = {c: CvmServer(self, c, i, host, port_of[c]) for i, c in enumerate(cvms)}
        self._hosting: dict[int, dict[str, list[Disk]]] = {}
        self._page_cache: dict[tuple, tuple[int, bytes, str]] = {}
        self._page_cache_second: int | None = None
        self.faults: dict[str, Fault] = {}
        self._faults_lock = threading.Lock()
        self.request_counts: dict[tuple[str, str], int] = {}
        self._counts_lock = threading.Lock()
        self.prism = PrismModel(self.scenario, self.trace)
        self.vm_uuids = self.prism.vm_uuids
        self.cluster_uuid = self.prism.cluster_uuid
        self.cluster_id = self.prism.cluster_id
        self.container_uuid = self.prism.container_uuid

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> StargateCluster:
        for c in self.cvms.values():
            c.listen()
        return self

    def stop(self) -> None:
        for c in self.cvms.values():
            c.close()

    def __enter__(self) -> StargateCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def urls(self) -> dict[str, str]:
        return {name: c.url for name, c in self.cvms.items()}

    # -- state ------------------------------------------------------------------------------
    def now(self) -> float:
        return float(self.clock())

    def period_second(self, now: float | None = None) -> int:
        return self.trace.now(self.now() if now is None else now)

    def hosted(self, cvm: str, now: float | None = None) -> list[Disk]:
        """The disks whose vdisk ``cvm`` hosts at ``now`` (in scenario order)."""
        t = self.period_second(now)
        by_cvm = self._hosting.get(t)
        if by_cvm is None:
            by_cvm = {c: [] for c in self.cvms}
            for d in self.trace.disks:
                by_cvm[d.cvm_at(t)].append(d)
            self._hosting[t] = by_cvm
        return list(by_cvm[cvm])

    def view(self, disk: Disk | int, now: float | None = None) -> VDiskStorageView:
        d = self.trace.disk_by_vdisk(disk) if isinstance(disk, int) else disk
        return self.model.view(d, self.now() if now is None else now)

    # -- faults -----------------------------------------------------------------------------
    def set_fault(
        self,
        cvm: str,
        mode: str,
        *,
        delay: float = 0.0,
        only: str = "all",
        vdisk: int | None = None,
        abort: bool = False,
        duration: float | None = None,
    ) -> None:
        """Inject a fault on ``cvm``. ``refused`` closes the listening socket and open connections
        (the port refuses connections) until the fault is cleared."""
        if cvm not in self.cvms:
            raise ValueError(f"unknown CVM {cvm!r} (have {', '.join(self.cvms)})")
        faultserver.check_mode(mode)
        if only not in FAULT_SCOPES:
            raise ValueError(f"unknown scope {only!r} (one of {', '.join(FAULT_SCOPES)})")
        if mode == "slow" and delay <= 0:
            raise ValueError("slow needs a delay above 0 seconds")
        until = None if duration is None else time.time() + float(duration)
        fault = Fault(mode, float(delay), only, until, vdisk=vdisk, abort=bool(abort))
        with self._faults_lock:
            self.faults[cvm] = fault
        log.info("cvm=%s fault=%s %s", cvm, mode, {k: v for k, v in asdict(fault).items() if k != "mode"})
        server = self.cvms[cvm]
        if mode == "refused":
            server.close()
            if duration is not None:
                timer = threading.Timer(float(duration), self.clear_faults, args=(cvm,))
                timer.daemon = True
                timer.start()
        else:
            server.listen()  # a former `refused` fault is replaced

    def clear_faults(self, cvm: str | None = None) -> None:
        """Remove the faults of one CVM (or all); a refused CVM listens again on the same port."""
        names = list(self.cvms) if cvm is None else [cvm]
        for name in names:
            if name not in self.cvms:
                raise ValueError(f"unknown CVM {name!r}")
            with self._faults_lock:
                had = self.faults.pop(name, None)
            if had is not None and had.mode == "refused":
                self.cvms[name].listen()
            if had is not None:
                log.info("cvm=%s fault cleared", name)

    def _fault_for(self, cvm: str, scope: str, vdisk: int | None) -> Fault | None:
        with self._faults_lock:
            f = self.faults.get(cvm)
        if f is None:
            return None
        if f.expired:
            with self._faults_lock:
                if self.faults.get(cvm) is f:
                    del self.faults[cvm]
            return None
        return f if f.applies(scope, vdisk) else None

    # -- rendering --------------------------------------------------------------------------
    def _cvm_infos(self) -> list[pages.CvmInfo]:
        out = []
        ndisks = 6 if self.scenario.cluster.hybrid else 4
        for c in self.cvms.values():
            disks = []
            for i in range(ndisks):
                did = c.svm_id * 10 + i
                ssd = i < 2 or not self.scenario.cluster.hybrid
                total = (1920 if ssd else 6000) * 10**9
                avail = int(total * (0.62 + 0.03 * ((c.index + i) % 5)))
                disks.append((did, avail, total))
            out.append(pages.CvmInfo(c.name, c.handle, c.svm_id, tuple(disks)))
        return out

    def render_main(self, cvm: str, now: float | None = None) -> str:
        now = self.now() if now is None else now
        views = [self.model.view(d, now) for d in self.hosted(cvm, now)]
        reads = sum(v.read_source_total - v.read_sources["estore_zero"] - v.read_sources["oplog_zero"] for v in views)
        hits = sum(
            v.read_sources["cache_dram"] + v.read_sources["extent_cache"] + v.read_sources["cache_ssd"] for v in views
        )
        cache_mb = (
            min(self.scenario.cluster.dram_cache_bytes, sum(s.working_set_bytes for v in views for s in v.disk.streams))
            // pages.MB
        )
        infos = self._cvm_infos()
        me = next(i for i in infos if i.name == cvm)
        return pages.render_main(
            build=self.build,
            cvm=me,
            cluster=infos,
            views=views,
            start_time=self.start_time,
            now=now,
            content_cache_hit_pct=100.0 * hits / reads if reads else 0.0,
            content_cache_mb=int(cache_mb),
        )

    def render_detail(self, cvm: str, vdisk_id: int | None, now: float | None = None) -> str | None:
        """The per-vdisk view; ``None`` when ``vdisk_id`` is not hosted by ``cvm``."""
        now = self.now() if now is None else now
        if vdisk_id is not None:
            try:
                disk = self.trace.disk_by_vdisk(vdisk_id)
            except KeyError:
                return None
            if disk.cvm_at(self.period_second(now)) != cvm:
                return None
            hosted = [disk]
        else:
            hosted = self.hosted(cvm, now)
        return pages.render_vdisk_page([self.model.view(d, now) for d in hosted], self.build)

    def vars_lines(self, cvm: str, now: float | None = None) -> list[tuple[str, int]]:
        now = self.now() if now is None else now
        hosted = self.hosted(cvm, now)
        views = [self.model.view(d, now) for d in hosted]
        now_i = int(math.floor(now))
        start = int(math.floor(self.start_time))
        counters = {
            "stargate/vdisk/total/read_ops": 0,
            "stargate/vdisk/total/write_ops": 0,
            "stargate/vdisk/total/read_bytes": 0,
            "stargate/vdisk/total/write_bytes": 0,
        }
        for d in hosted:
            for si, s in enumerate(d.streams):
                n = self.model.active_seconds(d, si, now_i, max(0, now_i - start))
                counters["stargate/vdisk/total/read_ops"] += int(n * s.read_iops)
                counters["stargate/vdisk/total/write_ops"] += int(n * s.write_iops)
                counters["stargate/vdisk/total/read_bytes"] += int(n * s.read_iops * s.read_size.mean_bytes)
                counters["stargate/vdisk/total/write_bytes"] += int(n * s.write_iops * s.write_size.mean_bytes)
        return pages.vars_lines(views, counters)

    def prism_virtual_disks(
        self, now: float | None = None, page: int | None = None, count: int | None = None
    ) -> dict[str, Any]:
        """Prism v2 ``GET /virtual_disks``: cluster-wide, one entity per virtual disk, as the Prism
        simulator serves it (:class:`~ioparallax.simulators.prism.model.PrismModel`: identities
        and the 30 s ``hypervisor_*``/``controller_*`` samples), paged by ``count``/``page`` too."""
        return self.prism.virtual_disks(self.now() if now is None else now, page, count)

    def state(self) -> dict[str, Any]:
        now = self.now()
        return {
            "scenario": self.scenario.name,
            "page_build": self.build,
            "now": now,
            "period_second": self.period_second(now),
            "history_start": self.start_time,
            "cvms": {
                name: {
                    "url": c.url,
                    "listening": c.listening,
                    "hosted_vdisks": [d.vdisk_id for d in self.hosted(name, now)],
                    "fault": asdict(self.faults[name]) if name in self.faults else None,
                }
                for name, c in self.cvms.items()
            },
        }

    # -- HTTP -------------------------------------------------------------------------------
    def _count(self, cvm: str, path: str) -> None:
        with self._counts_lock:
            self.request_counts[(cvm, path)] = self.request_counts.get((cvm, path), 0) + 1

    def _dispatch(self, cvm: CvmServer, h: SimHandler, method: str) -> None:
        parts = urlsplit(h.path)
        path, query = parts.path, parse_qs(parts.query, keep_blank_values=True)
        if path.startswith("/-/sim/"):
            control(h, lambda: self._control(cvm, method, path, query), "docs/stargate-simulator.md")
            return
        self._count(cvm.name, path)
        if method != "GET":
            h.send_body(405, b"method not allowed\n", "text/plain")
            return
        scope, vdisk = "other", None
        if path == "/":
            scope = "main"
        elif path == "/vdisk_stats":
            scope = "detail"
            vdisk = pages.detail_query_id(self.build, query)
        elif path == "/h/vars":
            scope = "vars"
        elif path.rstrip("/") == PRISM_VIRTUAL_DISKS:
            scope = "prism"
        fault = self._fault_for(cvm.name, scope, vdisk)
        if answer_fault(h, fault, (b"<html><body>Internal Server Error</body></html>\n", "text/html"), "text/html"):
            return
        if scope == "prism" and self.prism_auth is not None:
            expected = "Basic " + base64.b64encode(":".join(self.prism_auth).encode()).decode()
            if h.headers.get("Authorization", "") != expected:
                h.send_body(
                    401, b'{"message": "Authentication required.", "error_code": {"code": 401}}', "application/json"
                )
                return
        try:
            status, body, ctype = self._render(cvm.name, path, query, scope, vdisk)
        except Exception:  # a bug must not kill the server thread silently
            log.exception("cvm=%s rendering %s failed", cvm.name, h.path)
            h.send_body(500, b"simulator error\n", "text/plain")
            return
        if fault is not None and fault.mode == "truncated":
            cut = _truncation_point(body) if ctype.startswith("text/html") else len(body) // 2
            send_truncated(h, status, body, ctype, cut, abort=fault.abort)
            return
        h.send_body(status, body, ctype)

    def _render(
        self, cvm: str, path: str, query: dict[str, list[str]], scope: str, vdisk: int | None
    ) -> tuple[int, bytes, str]:
        html_type = "text/html; charset=utf-8"
        if scope in ("main", "detail"):
            # Pages only change with the clock's whole second: render each once per second.
            now = self.now()
            key = (cvm, scope, vdisk, bool(query), int(math.floor(now)))
            cached = self._page_cache.get(key)
            if cached is not None:
                return cached
            if len(self._page_cache) > 20000 or (self._page_cache and key[-1] != self._page_cache_second):
                self._page_cache.clear()
            self._page_cache_second = key[-1]
            result = self._render_page(cvm, query, scope, vdisk, now)
            self._page_cache[key] = result
            return result
        if scope == "vars":
            lines = self.vars_lines(cvm)
            pattern = query.get("regex", [""])[0]
            if pattern:
                try:
                    rx = re.compile(pattern)
                except re.error as exc:
                    return 400, f"bad regex: {exc}\n".encode(), "text/plain"
                lines = [(k, v) for k, v in lines if rx.search(k)]
            text = pages.render_vars(lines)
            if query.get("format", [""])[0] == "text":
                return 200, text.encode(), "text/plain; charset=utf-8"
            return 200, f"<html><body><pre>{pages.esc(text)}</pre></body></html>\n".encode(), html_type
        if scope == "prism":
            paging = {}
            for name in ("page", "count"):
                text = query.get(name, [""])[0]
                if text:
                    if not text.isdigit() or int(text) < 1:
                        return 400, f"{name} must be a positive integer\n".encode(), "text/plain"
                    paging[name] = int(text)
            doc = self.prism_virtual_disks(page=paging.get("page"), count=paging.get("count"))
            return 200, json.dumps(doc).encode(), "application/json"
        return 404, b"<html><body>Not found</body></html>\n", html_type

    def _render_page(
        self, cvm: str, query: dict[str, list[str]], scope: str, vdisk: int | None, now: float
    ) -> tuple[int, bytes, str]:
        html_type = "text/html; charset=utf-8"
        if scope == "main":
            return 200, self.render_main(cvm, now).encode(), html_type
        if query and vdisk is None:
            return 404, b"<html><body>unknown vdisk_stats query</body></html>\n", html_type
        page = self.render_detail(cvm, vdisk, now)
        if page is None:
            return 404, pages.render_not_hosted(vdisk or 0).encode(), html_type
        return 200, page.encode(), html_type

    def _control(self, cvm: CvmServer, method: str, path: str, query: dict[str, list[str]]) -> Answer | None:
        def arg(name: str, default: str | None = None) -> str | None:
            return query.get(name, [default])[0]

        if path == "/-/sim/state" and method == "GET":
            return state_answer(self.state())
        if path == "/-/sim/fault" and method == "POST":
            vdisk = arg("vdisk")
            duration = arg("duration")
            self.set_fault(
                arg("cvm") or cvm.name,
                arg("mode") or "",
                delay=float(arg("delay", "0") or 0),
                only=arg("only", "all") or "all",
                vdisk=int(vdisk) if vdisk else None,
                abort=(arg("abort", "0") or "0").lower() in ("1", "true", "yes"),
                duration=float(duration) if duration else None,
            )
            return OK
        if path in ("/-/sim/clear", "/-/sim/fault") and method in ("POST", "DELETE"):
            self.clear_faults(arg("cvm") or None)
            return OK
        return None


def _truncation_point(body: bytes) -> int:
    """Where a ``truncated`` fault cuts a page: inside the table that holds the middle of the page
    (or the next table after it), in the middle of a row."""
    mid = len(body) // 2
    start = body.rfind(b"<table", 0, mid)
    end = body.find(b"</table>", start) if start >= 0 else -1
    if start < 0 or end < mid:
        start = body.find(b"<table", mid)
        end = body.find(b"</table>", start) if start >= 0 else -1
        if start < 0 or end < 0:
            return mid
        mid = (start + end) // 2
    row = body.find(b"<tr>", mid, end)
    return row + 9 if row >= 0 else mid
