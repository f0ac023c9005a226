"""The one Prism client, used by ``prism-exporter`` (its targets) and the Stargate exporter (its
vdisk -> VM names): GETs of one Prism over one ``requests.Session`` (keep-alive, its session
cookie), with basic auth sent on the first request and again when Prism forgets the session (a
restart, an expiry). Every failure becomes a :class:`TargetError` whose cause a user can act on
and that never holds the password.

One security policy for both: nothing from the environment (no proxy, no ``~/.netrc``, no
``REQUESTS_CA_BUNDLE``), no redirects, TLS verified unless the config opts out, one deadline over
each whole request, and caps on the answer's bytes, JSON values and cookies."""

from __future__ import annotations

import email.utils
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import requests
import urllib3
from requests.adapters import HTTPAdapter

log = logging.getLogger(__name__)

#: Largest answer read (a 2,000-disk virtual_disks page of 500 is ~1 MB).
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Most JSON values (counted as commas, brackets and braces, before parsing) in one answer: a
#: 500-disk page holds ~60,000; 64 MB of ``[{},{},...]`` holds 21 million and would parse to
#: ~1.6 GB (3 million took 240 MB).
MAX_JSON_VALUES = 2_000_000
#: Most cookies kept for one Prism (it sets one or two): a Prism setting new ones on every
#: answer would grow the jar, and the Cookie header sent back, without end.
MAX_COOKIES = 32


_current = threading.local()  # .watch: the _Deadline of the request this thread is making


class _Deadline:
    """One deadline over a whole request: connection, status line, headers and body. Socket
    timeouts apply to each read, so a Prism sending its headers a byte a second held a request
    for ever; at the deadline this shuts the request's socket down, and the blocked read ends."""

    def __init__(self, seconds: float):
        self.fired = False
        self._conn: Any = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.name = "prism request deadline"

    def __enter__(self) -> _Deadline:
        _current.watch = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        _current.watch = None
        self._timer.cancel()
        # A timer that has fired may still be shutting the socket: wait for it (a socket shutdown,
        # never long), so that no timer thread outlives the request.
        self._timer.join(timeout=5)

    def attach(self, conn: Any) -> None:
        with self._lock:
            self._conn = conn
            if self.fired:
                self._shut()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shut()

    def _shut(self) -> None:
        sock = getattr(self._conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _Watched:
    """A urllib3 connection that registers with the current request's :class:`_Deadline` (if
    any) as it sends, so that the deadline can shut its socket."""

    def request(self, *args: Any, **kwargs: Any) -> None:
        watch = getattr(_current, "watch", None)
        if watch is not None:
            watch.attach(self)
        super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTPConnection(_Watched, urllib3.connection.HTTPConnection):
    pass


class _WatchedHTTPSConnection(_Watched, urllib3.connection.HTTPSConnection):
    pass


class _WatchedHTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


def _watched_adapter() -> HTTPAdapter:
    """requests' adapter whose connections register with the request's :class:`_Deadline`."""
    adapter = HTTPAdapter()
    adapter.poolmanager.pool_classes_by_scheme = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}
    return adapter


#: Set by ``prism-exporter capture`` while its probe runs: called with every answer a client
#: receives (path, params, HTTP status, body, Content-Type, Date header, seconds).
RECORDER: Callable[[str, dict[str, Any], int, bytes, str, str, float], None] | None = None


class TargetError(Exception):
    """A Prism that cannot be collected from; ``cause`` is short and names no secret."""

    def __init__(self, cause: str, kind: str = "error"):
        super().__init__(cause)
        self.cause = cause
        self.kind = kind  # login, tls, connect, timeout, protocol, error


@dataclass
class Answer:
    doc: Any
    date: float | None  # Prism's clock (the Date header), epoch seconds; None when absent
    nbytes: int


def _reason(exc: BaseException) -> str:
    """The innermost cause: requests' messages repeat the URL and pool details."""
    inner: BaseException = exc
    for _ in range(10):
        nxt = getattr(inner, "reason", None) or inner.__context__
        if not isinstance(nxt, BaseException) or nxt is inner:
            break
        inner = nxt
    text = str(inner)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "certificate verify failed: " + text.rpartition("certificate verify failed:")[2].strip(" ')\"")
    return f"{inner.__class__.__name__}: {text}"[:200]


class PrismAccess(Protocol):
    """What the client reads of a configuration: prism-exporter's TargetConfig, the Stargate
    exporter's PrismConfig."""

    @property
    def username(self) -> str: ...
    @property
    def password(self) -> str: ...
    @property
    def insecure_skip_verify(self) -> bool: ...
    @property
    def ca_file(self) -> str | None: ...
    @property
    def timeout(self) -> float: ...


class PrismClient:
    def __init__(self, base: str, cfg: PrismAccess):
        """``base``: scheme, host and port (``https://prism1:9440``), never credentials; requests
        go to ``base + path``."""
        self.base = base.rstrip("/")
        self.cfg = cfg
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, _watched_adapter())
        # No environment: REQUESTS_CA_BUNDLE would override ca_file and insecure_skip_verify, proxies would
        # see the credentials, and ~/.netrc could add credentials of its own.
        self.session.trust_env = False
        verify = not cfg.insecure_skip_verify
        self.verify: bool | str = cfg.ca_file if (verify and cfg.ca_file) else verify
        self.session.verify = self.verify
        if not verify:
            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        self.logins = 0  # requests that had to send the password (first, or after a lost session)
        self._lock = threading.Lock()

    def _auth(self) -> tuple[str, str] | None:
        return (self.cfg.username, self.cfg.password) if self.cfg.username else None

    def get(self, path: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Answer:
        """GET ``path``; JSON answer and Prism's Date. With a session cookie, the password is not
        sent; a 401 then means the session is gone: one retry with basic auth."""
        timeout = self.cfg.timeout if timeout is None else max(0.1, min(timeout, self.cfg.timeout))
        start = time.monotonic()
        r, body = self._authenticated(path, params, timeout)
        ctype, date = r.headers.get("Content-Type", ""), r.headers.get("Date", "")
        recorder = RECORDER
        if recorder is not None:
            recorder(path, dict(params or {}), r.status_code, body, ctype, date, time.monotonic() - start)
        return answer_of(path, r.status_code, body, ctype, date, bool(self.cfg.username))

    def _jar(self) -> tuple:
        return tuple(sorted(self.session.cookies.items()))

    def _authenticated(
        self, path: str, params: dict[str, Any] | None, timeout: float
    ) -> tuple[requests.Response, bytes]:
        """One login at a time: the first request (no session yet) and the one that finds the
        session gone send the password; requests running beside them wait and use the session
        it opens (so concurrent page requests open one session, not one each)."""
        auth = self._auth()
        if auth is None:
            return self._request(path, params, timeout, None)
        jar = self._jar()
        if not jar:
            with self._lock:
                if not self._jar():
                    self.logins += 1
                    return self._request(path, params, timeout, auth)
                jar = self._jar()
        r, body = self._request(path, params, timeout, None)
        if r.status_code != 401:
            return r, body
        with self._lock:
            if self._jar() == jar:  # nobody logged in again meanwhile: this request does
                log.info(
                    "prism %s: the session was refused (Prism restarted or it expired); logging in again", self.base
                )
                self.session.cookies.clear()
                self.logins += 1
                return self._request(path, params, timeout, auth)
        return self._request(path, params, timeout, None)  # with the session another request opened

    def _request(
        self, path: str, params: dict[str, Any] | None, timeout: float, auth: tuple[str, str] | None
    ) -> tuple[requests.Response, bytes]:
        url = self.base + path
        with _Deadline(timeout) as watch:
            try:
                answer = self._exchange(url, path, params, timeout, auth)
            except TargetError as exc:
                if watch.fired and exc.kind != "timeout":
                    raise TargetError(f"Prism did not answer {path} within {timeout:.1f}s", "timeout") from None
                raise
            if watch.fired:  # the shut socket can end a body without Content-Length: it is cut short
                raise TargetError(f"Prism did not answer {path} within {timeout:.1f}s", "timeout")
            return answer

    def _exchange(
        self, url: str, path: str, params: dict[str, Any] | None, timeout: float, auth: tuple[str, str] | None
    ) -> tuple[requests.Response, bytes]:
        try:
            r = self.session.get(
                url, params=params, timeout=timeout, auth=auth, stream=True, allow_redirects=False, verify=self.verify
            )
            if len(self.session.cookies) > MAX_COOKIES:
                self.session.cookies.clear()
                r.close()
                raise TargetError(
                    f"Prism set more than {MAX_COOKIES} cookies (answer of {path}); all dropped", "protocol"
                )
            length = r.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
                r.close()
                raise TargetError(f"the answer of {path} is larger than {MAX_BODY_BYTES} bytes", "protocol")
            return r, _read_body(r, path, time.monotonic() + timeout)
        except requests.exceptions.SSLError as exc:
            raise TargetError(
                f"TLS error ({_reason(exc)}); give ca_file, or insecure_skip_verify: true for this target", "tls"
            ) from None
        except requests.exceptions.Timeout:
            raise TargetError(f"Prism did not answer {path} within {timeout:.1f}s", "timeout") from None
        except requests.exceptions.ConnectionError as exc:
            text = str(exc).lower()
            if "refused" in text:
                cause = "connection refused (Prism down or wrong port)"
            elif "name or service not known" in text or "nodename nor servname" in text:
                cause = "cannot resolve the host name"
            else:
                cause = f"connection failed ({_reason(exc)})"
            raise TargetError(cause, "connect") from None
        except requests.exceptions.ChunkedEncodingError as exc:
            raise TargetError(f"the answer of {path} was cut short ({_reason(exc)})", "protocol") from None
        except requests.RequestException as exc:
            raise TargetError(f"request failed: {_reason(exc)}", "error") from None

    def close(self) -> None:
        self.session.close()


def answer_of(path: str, status: int, body: bytes, ctype: str, date: str, has_username: bool = True) -> Answer:
    """The :class:`Answer` of one HTTP answer, or the TargetError it means (live and replayed
    answers go through this one function)."""
    if status in (401, 403):
        raise TargetError(
            f"HTTP {status} from {path}: the credentials were refused"
            + ("" if has_username else " (no username configured)"),
            "login",
        )
    if status != 200:
        raise TargetError(f"HTTP {status} from {path}", "protocol")
    values = body.count(b",") + body.count(b"{") + body.count(b"[")
    if values > MAX_JSON_VALUES:
        raise TargetError(
            f"the answer of {path} holds more than {MAX_JSON_VALUES} JSON values ({len(body)} bytes): not parsed",
            "protocol",
        )
    try:
        doc = json.loads(body)
    except RecursionError:  # nesting deeper than the interpreter's stack: no answer of Prism's
        raise TargetError(f"the answer of {path} is JSON nested too deep ({len(body)} bytes)", "protocol") from None
    except ValueError:
        raise TargetError(
            f"the answer of {path} is not JSON ({len(body)} bytes, "
            f"Content-Type {ctype or 'none'}; truncated or garbled)",
            "protocol",
        ) from None
    return Answer(doc, _date(date), len(body))


def _read_body(r: requests.Response, path: str, deadline: float) -> bytes:
    """The body, at most MAX_BODY_BYTES and until ``deadline``: a server trickling bytes does
    not hold the read past the request's timeout, and a chunked answer without Content-Length
    cannot grow without bound. Read with urllib3's ``read1`` (what has arrived, not a full
    buffer, so the deadline is checked between small reads)."""
    chunks, size = [], 0
    read1 = getattr(r.raw, "read1", None)
    try:
        while True:
            if read1 is not None:
                chunk = read1(256 * 1024, decode_content=True)
            else:  # urllib3 < 2.3: whole chunks (the deadline is then checked less often)
                chunk = r.raw.read(256 * 1024, decode_content=True)
            if not chunk:
                break
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                raise TargetError(f"the answer of {path} is larger than {MAX_BODY_BYTES} bytes", "protocol")
            if time.monotonic() > deadline:
                raise TargetError(f"the answer of {path} was still arriving at the request's timeout", "timeout")
            chunks.append(chunk)
    except urllib3.exceptions.ReadTimeoutError:
        raise TargetError(f"Prism stopped sending the answer of {path}", "timeout") from None
    except (urllib3.exceptions.ProtocolError, urllib3.exceptions.DecodeError) as exc:
        raise TargetError(f"the answer of {path} was cut short or garbled ({_reason(exc)})", "protocol") from None
    finally:
        r.close()
    return b"".join(chunks)


#: A Date outside these years is not Prism's clock (garbage, or a year 9999 that the clock would
#: carry past what datetime can print as a v4 query's $endTime): taken as no Date.
MIN_DATE_YEAR, MAX_DATE_YEAR = 1971, 9000


def _date(header: str | None) -> float | None:
    if not header:
        return None
    try:
        parsed = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError, IndexError):
        return None
    if parsed.tzinfo is None or not MIN_DATE_YEAR <= parsed.year <= MAX_DATE_YEAR:
        return None
    return parsed.timestamp()
