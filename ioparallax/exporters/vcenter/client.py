"""Transport: one vim25 SOAP session per vCenter, kept between probes and re-established when
it expires, and the requests sent on it. Every failure becomes a :class:`TargetError` with a cause
a user can act on (the password never appears in it).

Login, counter look-up and the ``inventory_mode: sync`` baseline stay on pyvmomi: they are rare.
The frequent requests (QueryPerf, the inventory's RetrievePropertiesEx pages, the
PropertyCollector's WaitForUpdatesEx) are written here as text and sent by :func:`post` on
pyvmomi's own stub (cookie, TLS context, connection pool, timeout), so session expiry is still
pyvmomi's ``vim.fault.NotAuthenticated``, handled by :meth:`VCenterClient.call`; their answers
are read by :mod:`.parse`.
"""

from __future__ import annotations

import datetime as dt
import http.client
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from xml.sax.saxutils import escape

from pyVim.connect import Disconnect, SmartConnect
from pyVmomi import vim, vmodl

from ioparallax.exporters.vcenter.address import parse_vcenter_target
from ioparallax.exporters.vcenter.config import TargetConfig

log = logging.getLogger(__name__)
T = TypeVar("T")


class TargetError(Exception):
    """A vCenter that cannot be collected from; ``cause`` is short and names no secret."""

    def __init__(self, cause: str, kind: str = "error"):
        super().__init__(cause)
        self.cause = cause
        self.kind = kind  # login, tls, connect, timeout, protocol, error


def split_target(target: str) -> tuple[str, int]:
    """``vc1``, ``vc1:8443``, ``[::1]:443``, ``https://vc1/sdk`` -> (host, port); ValueError for
    anything else (see :func:`.address.parse_vcenter_target`)."""
    addr = parse_vcenter_target(target)
    return addr.host, addr.port


def ssl_context(cfg: TargetConfig) -> ssl.SSLContext:
    if cfg.insecure_skip_verify:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    return ssl.create_default_context(cafile=cfg.ca_file)


def describe_error(exc: BaseException) -> TargetError:
    """Map what pyvmomi, ssl and sockets raise to one clear cause."""
    if isinstance(exc, TargetError):
        return exc
    if isinstance(exc, vim.fault.InvalidLogin):
        return TargetError("login failed: invalid user name or password", "login")
    if isinstance(exc, vim.fault.NotAuthenticated):
        return TargetError("session not authenticated (expired or logged out)", "login")
    if isinstance(exc, vim.fault.NoPermission):
        return TargetError(f"permission denied: {getattr(exc, 'privilegeId', '') or exc.msg}", "login")
    if isinstance(exc, ssl.SSLCertVerificationError):
        return TargetError(
            f"TLS certificate verification failed ({exc.verify_message}); "
            "give ca_file or set insecure_skip_verify for this target",
            "tls",
        )
    if isinstance(exc, ssl.SSLError):
        return TargetError(f"TLS error: {exc.reason or exc}", "tls")
    if isinstance(exc, ConnectionRefusedError):
        return TargetError("connection refused (vCenter down or wrong port)", "connect")
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return TargetError("timed out waiting for vCenter", "timeout")
    if isinstance(exc, socket.gaierror):
        return TargetError(f"cannot resolve host: {exc.strerror}", "connect")
    if isinstance(exc, (ConnectionError, http.client.HTTPException, OSError)):
        return TargetError(f"connection failed: {exc.__class__.__name__}: {exc}", "connect")
    if isinstance(exc, vmodl.MethodFault):
        return TargetError(f"vCenter fault {exc.__class__.__name__}: {exc.msg or ''}".rstrip(": "), "protocol")
    return TargetError(f"{exc.__class__.__name__}: {exc}", "error")


#: What a kept-alive connection closed by the server looks like on the next request.
STALE_CONNECTION = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)


class VCenterClient:
    """A logged-in session to one vCenter, shared by the probes of that target.

    ``call(fn)`` runs ``fn(service_instance)``; when the session has expired (NotAuthenticated)
    it logs in again once and retries, so expiry costs one extra login, not a failed scrape.
    A connection the server closed is reopened once with the same session; when that reveals
    a dead session (vCenter restarted: the reset connection, then NotAuthenticated), the session
    is discarded and the login done once too.
    """

    def __init__(self, target: str, cfg: TargetConfig, connect: Callable[..., Any] = SmartConnect):
        self.target = target
        self.cfg = cfg
        self.host, self.port = split_target(target)
        self._connect_fn = connect
        self._si: Any = None
        self._lock = threading.Lock()
        self._closed = False
        self.logins = 0

    def _login(self) -> Any:
        try:
            si = self._connect_fn(
                host=self.host,
                port=self.port,
                user=self.cfg.username,
                pwd=self.cfg.password,
                sslContext=ssl_context(self.cfg),
                httpConnectionTimeout=self.cfg.timeout,
                connectionPoolTimeout=-1,
            )
        except Exception as exc:
            raise describe_error(exc) from None
        self.logins += 1
        log.debug("logged in to %s as %s", self.target, self.cfg.username)
        return si

    def service_instance(self) -> Any:
        with self._lock:
            if self._closed:  # a thread still running after close must not log in again
                raise TargetError("the session to this vCenter was closed", "error")
            if self._si is None:
                self._si = self._login()
            return self._si

    def reset(self) -> None:
        with self._lock:
            self._si = None

    def call(self, fn: Callable[[Any], T]) -> T:
        # At most one retry for each of: a connection closed by the server, a dead session.
        # QueryPerf and the property reads are safe to repeat.
        relogged = reconnected = False
        si = self.service_instance()
        while True:
            try:
                return fn(si)
            except vim.fault.NotAuthenticated as exc:
                if relogged:
                    return self._failed(exc, si)
                relogged = True
                log.info(
                    "session to %s is not authenticated (expired, or vCenter restarted), logging in again", self.target
                )
                self._discard(si)
                si = self.service_instance()
            except STALE_CONNECTION as exc:
                if reconnected:
                    return self._failed(exc, si)
                reconnected = True
                # A kept-alive connection the server closed while it sat idle (vCenter's reverse
                # proxy does), or a restarted vCenter: pyvmomi has dropped its pooled connections;
                # once more on a new one, same session (a restart shows as NotAuthenticated then).
                log.debug("connection to %s was closed by the server, reconnecting", self.target)
            except Exception as exc:
                return self._failed(exc, si)

    def _discard(self, si: Any) -> None:
        """Forget a dead session (unless another thread already replaced it)."""
        with self._lock:
            if self._si is si:
                self._si = None

    def _failed(self, exc: Exception, si: Any) -> Any:
        if isinstance(exc, vim.fault.NotAuthenticated):
            with self._lock:
                if self._si is si:
                    self._si = None
        elif isinstance(exc, (ConnectionError, socket.timeout, TimeoutError, http.client.HTTPException, ssl.SSLError)):
            # A broken connection is not reused: the next probe connects afresh.
            self.reset()
        raise describe_error(exc) from None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            si, self._si = self._si, None
        if si is not None:
            try:
                Disconnect(si)
            except Exception:  # logging out of a dead vCenter is not an error worth reporting
                pass


# ---- SOAP requests: written as text, posted on pyvmomi's session (see the module docstring)

SOAPENV = "http://schemas.xmlsoap.org/soap/envelope/"
VIM = "urn:vim25"
XSI_TYPE = "{http://www.w3.org/2001/XMLSchema-instance}type"

#: The VM properties the inventory reads (RetrievePropertiesEx, CreateFilter, the pyvmomi baseline).
VM_PROPERTIES = [
    "name",
    "runtime.host",
    "runtime.powerState",
    "config.uuid",
    "config.instanceUuid",
    "config.hardware.device",
    "guest.hostName",  # VMware Tools: the guest's host name (DiskSPD's ComputerName, windows_exporter's hostname)
    "guest.disk",  # VMware Tools: guest volumes with the virtual disks behind them (vSphere 7+ mappings)
    "config.files.vmPathName",  # the .vmx: a Nutanix CVM's lies in a ServiceVM folder
]

#: The host properties the inventory reads: its name and CPU capacity (per core MHz x cores).
HOST_PROPERTIES = ["name", "summary.hardware.cpuMhz", "summary.hardware.numCpuCores"]

#: vCenter's realtime statistics interval (seconds): the only one QueryPerf asks for.
REALTIME_INTERVAL = 20
DEFAULT_MAX_QUERY_METRICS = 256


def read_max_query_metrics(si: Any) -> int:
    """config.vpxd.stats.maxQueryMetrics, or 256 when the option is absent or its value unreadable
    (256 is the default since vCenter 6.5; set max_query_metrics for older ones).

    Any other failure (an expired session, a dropped connection) is raised: the caller keeps the
    answer for the target's life, so a default taken on a transient error would make every later
    QueryPerf too large for a vCenter whose limit is lower (a session that expired during a slow
    first probe did that)."""
    try:
        opts = si.content.setting.QueryOptions("config.vpxd.stats.maxQueryMetrics")
    except vim.fault.InvalidName:
        return DEFAULT_MAX_QUERY_METRICS
    try:
        value = int(opts[0].value)
    except (IndexError, TypeError, ValueError, AttributeError):
        return DEFAULT_MAX_QUERY_METRICS
    return value if value > 0 else DEFAULT_MAX_QUERY_METRICS


@dataclass
class EntityRequest:
    """What to ask for one VM: its disk instances (or "*") and the last sample already seen."""

    moref: str
    instances: tuple[str, ...]  # explicit instances; ("*",) to let vCenter expand; ("",) the aggregate
    since: float | None  # epoch seconds of the newest sample seen (exclusive)
    entity_type: str = "VirtualMachine"  # or HostSystem (CPU)


def batch_requests(requests: list[EntityRequest], n_counters: int, max_metrics: int) -> Iterator[list[EntityRequest]]:
    """Group VM requests so that one QueryPerf asks for at most ``max_metrics`` metric ids."""
    batch: list[EntityRequest] = []
    used = 0
    for req in requests:
        cost = max(1, n_counters * len(req.instances))
        if batch and used + cost > max_metrics:
            yield batch
            batch, used = [], 0
        batch.append(req)
        used += cost
    if batch:
        yield batch


_QUERY_PERF_START = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    f'<soapenv:Envelope xmlns:soapenv="{SOAPENV}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xmlns:xsd="http://www.w3.org/2001/XMLSchema">'
    f'<soapenv:Body><QueryPerf xmlns="{VIM}"><_this type="PerformanceManager">'
)

_QUERY_PERF_END = "</QueryPerf></soapenv:Body></soapenv:Envelope>"


def _iso(ts: float) -> str:
    d = dt.datetime.fromtimestamp(ts, dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{d.microsecond:06d}Z" if d.microsecond else "Z")


def query_perf_body(perf_manager: str, requests: Iterable[EntityRequest], keys: list[int], fmt: str) -> bytes:
    """The QueryPerf request for ``requests``: realtime samples after ``since`` (exclusive), or
    only the latest one when nothing has been seen yet. Elements in the WSDL's order."""
    parts = [_QUERY_PERF_START, escape(perf_manager), "</_this>"]
    tail = f"<intervalId>{REALTIME_INTERVAL}</intervalId><format>{escape(fmt)}</format></querySpec>"
    for req in requests:
        parts.append(f'<querySpec><entity type="{escape(req.entity_type)}">{escape(req.moref)}</entity>')
        if req.since is None:
            parts.append("<maxSample>1</maxSample>")
        else:
            parts.append(f"<startTime>{_iso(req.since)}</startTime>")
        for inst in req.instances:
            inst_xml = escape(inst)
            parts.extend(
                f"<metricId><counterId>{k}</counterId><instance>{inst_xml}</instance></metricId>" for k in keys
            )
        parts.append(tail)
    parts.append(_QUERY_PERF_END)
    return "".join(parts).encode("utf-8")


#: Objects per answer page: fewer round trips than pyvmomi's 500 without making one answer huge
#: (7 KB of XML per stock vcsim VM: ~7 MB a page).
PAGE_SIZE = 1000

_ENVELOPE_START = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    f'<soapenv:Envelope xmlns:soapenv="{SOAPENV}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xmlns:xsd="http://www.w3.org/2001/XMLSchema"><soapenv:Body>'
)

_ENVELOPE_END = "</soapenv:Body></soapenv:Envelope>"


def filter_spec(view: str) -> str:
    """The PropertyFilterSpec's content: VMs (VM_PROPERTIES), hosts and datastores (name) in
    ``view``, elements in the WSDL's order; shared by RetrievePropertiesEx and CreateFilter."""
    vm_paths = "".join(f"<pathSet>{escape(p)}</pathSet>" for p in VM_PROPERTIES)
    host_paths = "".join(f"<pathSet>{escape(p)}</pathSet>" for p in HOST_PROPERTIES)
    return (
        f"<propSet><type>VirtualMachine</type><all>false</all>{vm_paths}</propSet>"
        f"<propSet><type>HostSystem</type><all>false</all>{host_paths}</propSet>"
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


#: Object updates asked for per WaitForUpdatesEx answer (a page of the first, full one). vCenter
#: and govmomi's simulator may answer with fewer (the simulator caps it at 100).
MAX_OBJECT_UPDATES = 1000


def _call(collector: str, method: str, inner: str) -> bytes:
    return (
        f'{_ENVELOPE_START}<{method} xmlns="{VIM}"><_this type="PropertyCollector">{escape(collector)}</_this>'
        f"{inner}</{method}>{_ENVELOPE_END}"
    ).encode()


def create_collector_body(collector: str) -> bytes:
    return _call(collector, "CreatePropertyCollector", "")


def create_filter_body(collector: str, view: str) -> bytes:
    return _call(collector, "CreateFilter", f"<spec>{filter_spec(view)}</spec><partialUpdates>false</partialUpdates>")


def wait_body(collector: str, version: str, max_object_updates: int = MAX_OBJECT_UPDATES) -> bytes:
    """WaitForUpdatesEx that answers at once (maxWaitSeconds 0): what changed since ``version``."""
    return _call(
        collector,
        "WaitForUpdatesEx",
        f"<version>{escape(version)}</version><options><maxWaitSeconds>0</maxWaitSeconds>"
        f"<maxObjectUpdates>{int(max_object_updates)}</maxObjectUpdates></options>",
    )


def destroy_collector_body(collector: str) -> bytes:
    return _call(collector, "DestroyPropertyCollector", "")


def snippet(body: bytes, n: int = 160) -> str:
    text = body[:n].decode("utf-8", "replace").replace("\n", " ").strip()
    return text + ("..." if len(body) > n else "")


#: Set by ``vcenter-exporter capture`` (capture.py) while it runs: called with (method, request,
#: HTTP status, answer, seconds) for every answer ``post`` reads. None in the exporter.
RECORDER: Callable[[str, bytes, int, bytes, float], None] | None = None


def post(si: Any, body: bytes, method: str = "QueryPerf") -> tuple[int, bytes]:
    """POST a SOAP request on the session's own connection pool (same TLS context, timeout and
    cookie as pyvmomi's calls); (HTTP status, body) for 200 and 500 (a fault)."""
    stub = si._stub
    conn = stub.GetConnection()
    started = time.monotonic()
    try:
        conn.request(
            "POST",
            stub.path,
            body,
            {
                "Cookie": stub.cookie,
                "SOAPAction": stub.versionId,
                "Content-Type": "text/xml; charset=UTF-8",
                "User-Agent": "ioparallax-vcenter-exporter",
            },
        )
        resp = conn.getresponse()
        data = resp.read()
    except (OSError, http.client.HTTPException):
        conn.close()
        stub.DropConnections()  # the server may be sick: no cached connection is reused
        raise
    if RECORDER is not None:
        RECORDER(method, body, resp.status, data, time.monotonic() - started)
    cookie = resp.getheader("Set-Cookie")
    if cookie:
        stub.cookie = cookie
    if resp.status not in (200, 500):
        conn.close()
        raise TargetError(f"{method} got HTTP {resp.status} {resp.reason}: {snippet(data)!r}", "protocol")
    if resp.will_close:
        conn.close()
    else:
        stub.ReturnConnection(conn)
    return resp.status, data
