"""Transport: one vim25 SOAP session per vCenter, kept between probes and re-established when
it expires. Every failure becomes a :class:`TargetError` with a cause a user can act on (the
password never appears in it)."""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from typing import Any, TypeVar

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
