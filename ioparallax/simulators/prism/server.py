"""The Prism simulator's HTTP(S) server.

In-process API (tests, benchmarks)::

    with PrismSimulator("clean-oltp", auth=("admin", "secret"), clock=lambda: 1_700_000_000.0) as sim:
        sim.url                     # "http://127.0.0.1:40123" (https:// with a certificate)
        sim.set_fault("slow", delay=3)
        sim.power_off("oltp-01"); sim.delete_vm("oltp-02"); sim.restart()

Paths (as Prism serves them on port 9440):

- ``GET /PrismGateway/services/rest/v2.0/virtual_disks/`` (``?page=&count=``) and ``.../{uuid}``;
- ``GET /PrismGateway/services/rest/v2.0/vms/`` (``?include_vm_disk_config=true``, paging) and
  ``.../hosts/`` (host names);
- ``GET /api/vmm/v4.x/ahv/stats/vms/{vmExtId}/disks/{extId}`` with ``$startTime``, ``$endTime``
  (RFC 3339), ``$samplingInterval`` (seconds) and ``$statType`` (AVG, LAST); ``v4.0`` in place of
  ``v4.x`` too.

Authentication as Prism does it: HTTP basic auth, and a session cookie (``JSESSIONID``) set on
the first authenticated answer that later requests may send instead; a wrong password or an
unknown cookie is 401. ``restart()`` (``POST /-/sim/restart``) forgets the sessions, as a Prism
restart does. The ``Date`` header is the simulated clock (clients label v2 samples by it).

Faults (``slow``, ``http_500``, ``truncated``, ``garbage``, ``refused``) and VM changes are set
in-process or over HTTP on ``/-/sim/`` (never faulted, never authenticated); see docs/prism.md.
"""

from __future__ import annotations

import base64
import email.utils
import hmac
import json
import logging
import os
import secrets
import ssl
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ioparallax.simulators.faultserver import (
    OK,
    Answer,
    Fault,
    SimHandler,
    SimServer,
    answer_fault,
    check_mode,
    control,
    ends_at,
    send_truncated,
    state_answer,
)
from ioparallax.simulators.scenario.model import Scenario
from ioparallax.simulators.scenario.trace import compile_scenario
from ioparallax.simulators.stargate.server import resolve_scenario

from .model import DEFAULT_PUBLISH_DELAY, PrismModel, parse_iso_time

log = logging.getLogger("prism_simulator")

V2 = "/PrismGateway/services/rest/v2.0"
V2_VIRTUAL_DISKS = f"{V2}/virtual_disks"
V2_VMS = f"{V2}/vms"
V2_HOSTS = f"{V2}/hosts"
V4_STATS_PREFIXES = ("/api/vmm/v4.x/ahv/stats/vms/", "/api/vmm/v4.0/ahv/stats/vms/")
SESSION_COOKIE = "JSESSIONID"


#: ``only=``: the requests a fault is limited to (``v2``: virtual_disks and vms).
FAULT_SCOPES = ("all", "v2", "v4", "vms", "virtual_disks")


def _applies(fault: Fault, scope: str) -> bool:
    if fault.expired:
        return False
    return fault.only in ("all", scope) or (fault.only == "v2" and scope in ("vms", "virtual_disks"))


class _Handler(SimHandler):
    server_version = "prism-simulator"
    sys_version = "Python/" + sys.version.split()[0]

    def date_time_string(self, timestamp: float | None = None) -> str:
        # The Date header is Prism's clock: the simulated one.
        return email.utils.formatdate(self.server.owner.now() if timestamp is None else timestamp, usegmt=True)


def _json(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


class PrismSimulator:
    """Prism of one scenario (or ``vdisk_count`` synthetic disks), at ``clock()``.

    ``auth``: (user, password) required as basic auth (None: no authentication).
    ``tls``: (certificate file, key file) to serve HTTPS, as Prism does (None: plain HTTP).
    """

    def __init__(
        self,
        scenario_or_name: Scenario | str | os.PathLike[str] | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], float] = time.time,
        auth: tuple[str, str] | None = None,
        tls: tuple[str, str] | None = None,
        vdisk_count: int | None = None,
        publish_delay: float = DEFAULT_PUBLISH_DELAY,
    ):
        self.scenario = resolve_scenario(scenario_or_name, vdisk_count)
        self.trace = compile_scenario(self.scenario)
        self.model = PrismModel(self.scenario, self.trace, publish_delay=publish_delay)
        self.clock = clock
        self.auth = auth
        self.host, self.port = host, port
        self.tls = tls
        self.sessions: set[str] = set()
        self.logins = 0  # answers that had to check the password (not a session cookie)
        self.requests: dict[str, int] = {}
        self.fault: Fault | None = None
        self._lock = threading.Lock()
        self._httpd: SimServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> PrismSimulator:
        self._httpd = SimServer((self.host, self.port), self.dispatch, log, "prism", _Handler, owner=self)
        if self.tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="prism-simulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd.drop_connections()
            self._httpd = None

    def __enter__(self) -> PrismSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """``host:port``: the exporter's ?target= for this simulator."""
        return f"{self.host}:{self.port}"

    def now(self) -> float:
        return float(self.clock())

    # -- runtime changes --------------------------------------------------------------------
    def set_fault(self, mode: str, delay: float = 0.0, only: str = "all", duration: float | None = None) -> None:
        check_mode(mode)
        if only not in FAULT_SCOPES:
            raise ValueError(f"unknown fault scope {only!r} ({', '.join(FAULT_SCOPES)})")
        self.fault = Fault(mode, delay, only, ends_at(duration))
        log.info("fault set: %s", self.fault)

    def clear_faults(self) -> None:
        self.fault = None

    def _vm(self, name: str) -> str:
        if name not in self.model.vm_uuids:
            raise ValueError(f"unknown VM {name!r}")
        return name

    def power_off(self, vm: str) -> None:
        """From the next sample on, the VM has no VM view and no I/O (the sample Prism serves now
        keeps its values)."""
        self.model.powered_off.add(self._vm(vm))
        self.model.powered_off_at[vm] = self.now()

    def power_on(self, vm: str) -> None:
        self.model.powered_off.discard(self._vm(vm))
        self.model.powered_off_at.pop(vm, None)

    def delete_vm(self, vm: str) -> None:
        self.model.deleted.add(self._vm(vm))

    def restart(self) -> None:
        """Forget every session, as a Prism restart does: clients must log in again."""
        with self._lock:
            self.sessions.clear()

    def state(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario.name,
            "now": self.now(),
            "sample_end": self.model.sample_end(self.now()),
            "url": self.url,
            "vms": len(self.model.vm_uuids),
            "virtual_disks": len(self.model.live_disks()),
            "powered_off": sorted(self.model.powered_off),
            "deleted": sorted(self.model.deleted),
            "sessions": len(self.sessions),
            "logins": self.logins,
            "requests": dict(self.requests),
            "fault": asdict(self.fault) if self.fault else None,
        }

    # -- HTTP -------------------------------------------------------------------------------
    def _authenticate(self, h: SimHandler) -> tuple[bool, dict[str, str]]:
        """(allowed, extra headers): a known session cookie, or correct basic auth (which opens
        a session)."""
        if self.auth is None:
            return True, {}
        cookie = h.headers.get("Cookie", "")
        for part in cookie.split(";"):
            name, _, value = part.strip().partition("=")
            if name == SESSION_COOKIE:
                with self._lock:
                    if value in self.sessions:
                        return True, {}
        header = h.headers.get("Authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() == "basic":
            try:
                user, _, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                user, password = "", ""
            ok_user = hmac.compare_digest(user.encode(), self.auth[0].encode())
            ok_pw = hmac.compare_digest(password.encode(), self.auth[1].encode())
            if ok_user and ok_pw:
                token = secrets.token_hex(16)
                with self._lock:
                    self.sessions.add(token)
                    self.logins += 1
                secure = "; Secure" if self.tls else ""  # a Secure cookie is never sent back over http
                return True, {"Set-Cookie": f"{SESSION_COOKIE}={token}; Path=/{secure}; HttpOnly"}
        return False, {}

    def dispatch(self, h: SimHandler, method: str) -> None:
        parts = urlsplit(h.path)
        path = parts.path
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        if path.startswith("/-/sim/"):
            control(h, lambda: self._control(method, path, query), "docs/prism.md")
            return
        with self._lock:
            self.requests[path] = self.requests.get(path, 0) + 1
        scope = "other"
        if path.rstrip("/").startswith(V2_VIRTUAL_DISKS):
            scope = "virtual_disks"
        elif path.rstrip("/").startswith(V2_VMS):
            scope = "vms"
        elif path.rstrip("/") == V2_HOSTS:
            scope = "hosts"
        elif path.startswith(V4_STATS_PREFIXES):
            scope = "v4"
        fault = self.fault if self.fault is not None and _applies(self.fault, scope) else None
        if answer_fault(h, fault, (b'{"message":"Internal Server Error"}', "application/json"), "application/json"):
            return
        if method != "GET":
            h.send_body(405, b'{"message":"method not allowed"}', "application/json")
            return
        allowed, headers = self._authenticate(h)
        if not allowed:
            h.send_body(
                401,
                b'{"message":"Authentication required.","error_code":{"code":401}}',
                "application/json",
                {"WWW-Authenticate": 'Basic realm="Intent Gateway Login Required"'},
            )
            return
        try:
            status, doc = self._render(path, query, scope)
        except ValueError as exc:
            status, doc = 400, {"message": str(exc)}
        except Exception:  # a bug must not kill the server thread silently
            log.exception("rendering %s failed", h.path)
            status, doc = 500, {"message": "simulator error"}
        body = _json(doc)
        if fault is not None and fault.mode == "truncated":
            send_truncated(h, status, body, "application/json", len(body) // 2, headers=headers)
            return
        h.send_body(status, body, "application/json", headers)

    def _render(self, path: str, query: dict[str, str], scope: str) -> tuple[int, Any]:
        now = self.now()
        page = _int(query, "page")
        count = _int(query, "count")
        if scope == "virtual_disks":
            rest = path.rstrip("/")[len(V2_VIRTUAL_DISKS) :].strip("/")
            if not rest:
                return 200, self.model.virtual_disks(now, page, count)
            entity = self.model.virtual_disk(unquote(rest), now)
            return (200, entity) if entity is not None else (404, {"message": f"virtual disk {rest} not found"})
        if scope == "vms":
            rest = path.rstrip("/")[len(V2_VMS) :].strip("/")
            include = query.get("include_vm_disk_config", "").lower() == "true"
            if not rest:
                return 200, self.model.vms(include, page, count, now)
            names = {u: n for n, u in self.model.vm_uuids.items() if n not in self.model.deleted}
            names.update({u: n for n, u in self.model.cvm_uuids.items()})
            if rest in names:
                return 200, self.model.vm_entity(names[rest], include, now)
            return 404, {"message": f"VM {rest} not found"}
        if scope == "hosts":
            return 200, self.model.hosts_doc(now)
        if scope == "v4":
            rest = next(path[len(p) :] for p in V4_STATS_PREFIXES if path.startswith(p))
            vm_id, sep, disk_part = rest.partition("/disks/")
            if not sep or not vm_id or not disk_part or "/" in disk_part:
                return 404, {"message": "not found"}
            try:
                start = parse_iso_time(query["$startTime"])
                end = parse_iso_time(query["$endTime"]) if "$endTime" in query else now
            except KeyError:
                raise ValueError("$startTime is required") from None
            interval = _int(query, "$samplingInterval") or 30
            doc = self.model.v4_disk_stats(
                vm_id, disk_part, start, min(end, now), interval, query.get("$statType", "AVG")
            )
            return (200, doc) if doc is not None else (404, {"message": f"VM disk {disk_part} not found"})
        return 404, {"message": f"no such path {path}"}

    def _control(self, method: str, path: str, query: dict[str, str]) -> Answer | None:
        if path == "/-/sim/state" and method == "GET":
            return state_answer(self.state())
        if method == "POST" and path == "/-/sim/fault":
            duration = query.get("duration")
            self.set_fault(
                query.get("mode", ""),
                delay=float(query.get("delay", "0") or 0),
                only=query.get("only", "all") or "all",
                duration=float(duration) if duration else None,
            )
        elif method == "POST" and path == "/-/sim/clear":
            self.clear_faults()
        elif method == "POST" and path == "/-/sim/restart":
            self.restart()
        elif method == "POST" and path == "/-/sim/vm":
            name, action = query.get("name", ""), query.get("action", "")
            actions = {"power_off": self.power_off, "power_on": self.power_on, "delete": self.delete_vm}
            if action not in actions:
                raise ValueError(f"action must be one of {', '.join(actions)}")
            actions[action](name)
        else:
            return None
        return OK


def _int(query: dict[str, str], name: str) -> int | None:
    text = query.get(name)
    if text is None or text == "":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{name} must be a positive integer, got {text!r}")
    return int(text)
