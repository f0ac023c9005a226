"""A thin client of the Prometheus HTTP query API (``/api/v1/query``, ``/api/v1/query_range``).

Works against anything that speaks that API (Prometheus, Thanos, Mimir, VictoriaMetrics). Every
failure raises :class:`PromError`, one line naming the URL, the query and the cause, never a bare
``requests`` exception or a traceback. The client counts its queries, so the report (and
bench/report.py) can show that the number of queries follows the kinds of figures, not the number
of VM disks.

What comes back is not trusted:

- **one deadline per request** (``timeout``) over the whole exchange: connecting, the TLS
  handshake, the headers and the body. requests' own timeout is per socket read, so a server
  sending a byte a second never reached it; here a timer shuts the request's socket down when the
  deadline passes.
- **a size cap** (``max_answer_bytes``, ``--max-answer-size``): an answer is read in chunks and
  given up as soon as it passes the cap (at once when its Content-Length says so), never buffered
  whole; a 100 MB answer took 8 GB of memory before.
- **its size in series and labels**: at most :data:`MAX_SERIES` series an answer, label values
  at most :data:`MAX_LABEL_CHARS` long (:func:`check_bounds`); more is a PromError that says so.
- **its shape is checked** before anyone uses it (:func:`check_vector`, :func:`check_matrix`):
  ``data`` an object, ``result`` a list, each series a ``metric`` object of string labels and
  samples ``[time, "value"]`` with a number for time and a Prometheus float for value. Anything
  else is a PromError saying which query and what came back.
"""

from __future__ import annotations

import json
import logging
import math
import re
import socket
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import requests
import urllib3
from requests.adapters import HTTPAdapter

from ioparallax.units import parse_duration

log = logging.getLogger(__name__)

#: Default of --max-answer-size: the largest answer read (bytes). The report's largest are range
#: queries over every VM disk: 1,000 series of 2,000 points are ~50 MB of JSON.
DEFAULT_MAX_ANSWER_BYTES = 64 * 1024 * 1024

_CHUNK = 256 * 1024

#: Most series one answer may hold. The report draws and tabulates every VM disk: three series
#: with 1 MB labels took 1.6 GB and 100,000 series gave no report after 150 s. 20,000 is 1,000
#: vdisks of 20 histogram buckets each (the bench measures 100 disks); narrow a larger PoC with --match.
MAX_SERIES = 20_000
#: Longest label name or value (a VM, disk or job name; Prometheus' own are well under 255).
MAX_LABEL_CHARS = 1024

#: A sample value as Prometheus writes it (Go's strconv formats, NaN and +/-Inf): float() would
#: also take "1_0" and other digits than ASCII ones.
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:Inf|inf)|NaN", re.ASCII)


class PromError(RuntimeError):
    """A query that failed: the message names the Prometheus URL, the query and the cause."""


def _show(value: Any, limit: int = 80) -> str:
    """A short picture of what came back, for an error message."""
    try:
        text = json.dumps(value, ensure_ascii=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ---- one deadline per request -------------------------------------------------------------


class _Watch:
    """The sockets of one request, shut down together when its deadline passes."""

    def __init__(self) -> None:
        self.sockets: list[socket.socket] = []
        self.fired = False
        self.done = False
        self.lock = threading.Lock()

    def add(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self.lock:
            self.sockets.append(sock)
            if self.fired:
                _shut(sock)

    def fire(self) -> None:
        with self.lock:
            if self.done:
                return
            self.fired = True
            for sock in self.sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        # the plain socket's shutdown, also under TLS: wakes a read blocked in another thread
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    except OSError:
        pass


_current = threading.local()  # .watch: the _Watch of the request this thread is making


def _watched(sock: socket.socket | None) -> None:
    watch = getattr(_current, "watch", None)
    if watch is not None:
        watch.add(sock)


class _HTTPConnection(urllib3.connection.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watched(sock)  # before any TLS handshake
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        super().request(*args, **kwargs)
        _watched(self.sock)  # a kept-alive connection, opened by an earlier request


class _HTTPSConnection(urllib3.connection.HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        sock = super()._new_conn()
        _watched(sock)
        return sock

    def request(self, *args: Any, **kwargs: Any) -> None:
        super().request(*args, **kwargs)
        _watched(self.sock)


class _HTTPPool(urllib3.HTTPConnectionPool):
    ConnectionCls = _HTTPConnection


class _HTTPSPool(urllib3.HTTPSConnectionPool):
    ConnectionCls = _HTTPSConnection


class _DeadlineAdapter(HTTPAdapter):
    """requests' adapter whose connections report their sockets to the request's _Watch."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        """Through an HTTP(S) proxy (HTTP_PROXY and the like) too; a SOCKS proxy keeps its own
        connections, and there the deadline is requests' per-read timeout."""
        manager = super().proxy_manager_for(proxy, **kwargs)
        if type(manager) is urllib3.ProxyManager:
            manager.pool_classes_by_scheme = {"http": _HTTPPool, "https": _HTTPSPool}
        return manager


def _session() -> requests.Session:
    session = requests.Session()
    for prefix in ("http://", "https://"):
        session.mount(prefix, _DeadlineAdapter())
    return session


# ---- the client ---------------------------------------------------------------------------


@dataclass
class PromAPI:
    url: str  # base URL, e.g. http://127.0.0.1:9090 (a path prefix is kept)
    timeout: float = 30.0  # seconds per request, the whole exchange
    queries: int = 0  # how many queries were sent (query + query_range)
    max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES
    session: requests.Session = field(default_factory=_session, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise PromError(f"{self.url!r}: expected a Prometheus URL such as http://127.0.0.1:9090")
        if not (math.isfinite(self.timeout) and self.timeout > 0):
            raise PromError(f"--timeout: expected seconds above 0, got {self.timeout:g}")
        if self.max_answer_bytes < 1:
            raise PromError(f"--max-answer-size: expected at least 1 byte, got {self.max_answer_bytes}")

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        """The ``data`` of a successful answer (any JSON value: the callers check its shape)."""
        where, query, status, raw = self._fetch(path, params)
        return self._data(where, query, status, raw)

    def _fetch(self, path: str, params: dict[str, Any]) -> tuple[str, str | None, int, bytearray]:
        """(where, query, HTTP status, body) of one request, within the deadline and the size cap,
        its count of JSON values checked."""
        with self._lock:
            self.queries += 1
        where = f"{self.url}{path}"
        query = params.get("query")
        watch = _Watch()
        timer = threading.Timer(self.timeout, watch.fire)
        timer.daemon = True
        _current.watch = watch
        timer.start()
        try:
            status, raw = self._exchange(where, query, params, watch)
        finally:
            with watch.lock:
                watch.done = True
            timer.cancel()
            _current.watch = None
        # What json.loads builds is ~60 bytes per list, object or string: "[[],[],...]" turns
        # 60 MiB into 1.5 GB. A Prometheus answer has at most one per ~10 bytes (a sample is a list
        # and a string in ~20), so more than one per 8 bytes of the cap is not one: refused unparsed.
        values = raw.count(b"[") + raw.count(b"{") + raw.count(b'"') // 2
        if values > self.max_answer_bytes // 8:
            raise _err(
                where, query, f"HTTP {status}, {values} JSON values in {len(raw)} bytes: not a Prometheus answer"
            )
        return where, query, status, raw

    def _data(self, where: str, query: str | None, status: int, raw: bytearray) -> Any:
        try:
            body = json.loads(raw)
        except (ValueError, RecursionError):
            text = raw[:120].decode("utf-8", "replace")
            raise _err(where, query, f"HTTP {status}, not a Prometheus API answer ({text!r})") from None
        finally:
            del raw
        if not isinstance(body, dict):
            raise _err(where, query, f"HTTP {status}, expected a JSON object, got {_show(body)}")
        if status != 200 or body.get("status") != "success":
            raise _err(
                where, query, f"HTTP {status}, {_text(body.get('errorType'), 'error')}: {_text(body.get('error'), '?')}"
            )
        warnings = body.get("warnings")
        for w in warnings if isinstance(warnings, list) else []:
            log.warning("%s: %s", where, _text(w, "?"))
        if "data" not in body:
            raise _err(where, query, "the answer has no 'data'")
        return body["data"]

    def _exchange(self, where: str, query: str | None, params: dict[str, Any], watch: _Watch) -> tuple[int, bytearray]:
        """GET ``where``: the status and the body, read within the deadline and the size cap."""
        cap = self.max_answer_bytes
        try:
            with self.session.get(where, params=params, timeout=self.timeout, stream=True) as r:
                length = r.headers.get("Content-Length", "")
                if length.isdigit() and length.isascii() and int(length) > cap:
                    raise _err(where, query, f"the answer is {int(length)} bytes, above --max-answer-size ({cap})")
                body = _read_body(r, cap, where, query)
                return r.status_code, body
        except PromError:
            raise
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as e:
            # OSError and urllib3's own errors: raised reading r.raw, which requests does not wrap
            if watch.fired:
                raise _err(where, query, f"no complete answer within {self.timeout:g} s (--timeout)") from None
            if isinstance(e, (requests.Timeout, urllib3.exceptions.TimeoutError, TimeoutError)):
                raise _err(where, query, f"no answer within {self.timeout:g} s") from None
            if isinstance(e, requests.ConnectionError):
                raise _err(where, query, f"cannot connect ({_short(e)})") from None
            raise _err(where, query, f"{_short(e)}") from None

    def query(self, expr: str, time: float | None = None) -> list[dict[str, Any]]:
        """Instant query: a list of ``{"metric": {...}, "value": [t, "v"]}`` (vector results;
        a scalar answer as one series without labels)."""
        params: dict[str, Any] = {"query": expr}
        if time is not None:
            params["time"] = f"{time:.3f}"
        data = self._get("/api/v1/query", params)
        return check_vector(data, f"{self.url}/api/v1/query", expr)

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """Range query: a list of ``{"metric": {...}, "values": [[t, "v"], ...]}``."""
        data = self._get(
            "/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        )
        return check_matrix(data, f"{self.url}/api/v1/query_range", expr)

    def query_range_arrays(
        self, expr: str, start: float, end: float, step: float
    ) -> list[tuple[dict[str, str], np.ndarray]]:
        """Range query as ``(labels, points)`` pairs, ``points`` a float array of shape (n, 2):
        time and value of each point: what :meth:`query_range` answers, shape-checked alike.

        An answer of Prometheus' own shape is decoded by msgspec into typed series (labels
        strings, each sample a number and a string), its value strings checked against the
        float grammar all at once per series, and made arrays by numpy: no list, int and str per
        point for the json module to make and check one by one (3 million points for the
        100-disk bench). Anything else (an error, an odd shape, a value string that is not a
        Prometheus float) goes :meth:`query_range`'s way, which decides and names what is wrong."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        where, query, status, raw = self._fetch("/api/v1/query_range", params)
        if status == 200:
            try:
                answer = _RANGE_DECODER.decode(raw)
            except (msgspec.ValidationError, msgspec.DecodeError):
                answer = None
            if answer is not None and answer.status == "success" and answer.data.resultType == "matrix":
                check_bounds([(series.metric, None) for series in answer.data.result], where, expr)
                out = [(s.metric, _checked_points(s.values)) for s in answer.data.result]
                if all(points is not None for _, points in out):
                    for w in answer.warnings:
                        log.warning("%s: %s", where, w[:300])
                    return out  # type: ignore[return-value]
        data = self._data(where, query, status, raw)
        return [(s["metric"], _points(s["values"])) for s in check_matrix(data, where, expr)]

    def scrape_interval(self) -> float | None:
        """The shortest scrape interval among the active targets (seconds), None if unknown."""
        try:
            data = self._get("/api/v1/targets", {"state": "active"})
        except PromError as e:
            log.info("scrape interval unknown: %s", e)
            return None
        targets = data.get("activeTargets") if isinstance(data, dict) else None
        if not isinstance(targets, list):
            log.info("scrape interval unknown: %s/api/v1/targets answered %s", self.url, _show(data))
            return None
        out = []
        for t in targets:
            text = t.get("scrapeInterval") if isinstance(t, dict) else None
            if not isinstance(text, str):
                continue
            try:
                out.append(parse_seconds(text))
            except ValueError:
                continue
        return min(out) if out else None

    def buildinfo(self) -> dict[str, str]:
        try:
            data = self._get("/api/v1/status/buildinfo", {})
        except PromError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _read_body(r: requests.Response, cap: int, where: str, query: str | None) -> bytearray:
    """The body, decompressed here (gzip or deflate) so that the cap holds for what is kept:
    a small compressed answer can inflate a thousandfold."""
    encoding = r.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("identity", "", "gzip", "x-gzip", "deflate"):
        raise _err(where, query, f"unsupported Content-Encoding {encoding[:40]!r}")
    inflate = zlib.decompressobj(zlib.MAX_WBITS | 32) if encoding not in ("identity", "") else None
    body = bytearray()
    over = _err(where, query, f"the answer is above --max-answer-size ({cap} bytes); not read further")
    while True:
        chunk = r.raw.read(_CHUNK, decode_content=False)
        if not chunk:
            break
        if inflate is None:
            body += chunk
        else:
            try:
                while chunk:
                    body += inflate.decompress(chunk, cap + 1 - len(body))
                    if len(body) > cap:
                        raise over
                    chunk = inflate.unconsumed_tail
            except zlib.error as e:
                raise _err(where, query, f"the {encoding} answer cannot be decompressed ({e})") from None
        if len(body) > cap:
            raise over
    return body


# ---- the shape of answers -----------------------------------------------------------------


def _labels(item: Any, where: str, query: str, i: int) -> dict[str, str]:
    metric = item.get("metric", {}) if isinstance(item, dict) else None
    if not isinstance(metric, dict) or not all(isinstance(v, str) for v in metric.values()):
        raise _err(where, query, f"series {i}: expected 'metric' to be an object of string labels, got {_show(metric)}")
    _check_label_sizes(metric, where, query, i)
    return metric


def _check_label_sizes(metric: dict[str, str], where: str, query: str, i: int) -> None:
    for name, value in metric.items():
        if len(name) > MAX_LABEL_CHARS or len(value) > MAX_LABEL_CHARS:
            raise _err(
                where,
                query,
                f"series {i}: label {_show(name[:40])} of {max(len(name), len(value))} characters, over the "
                f"report's {MAX_LABEL_CHARS}: not a VM, disk or job name",
            )


def _check_series_count(n: int, where: str, query: str) -> None:
    if n > MAX_SERIES:
        raise _err(
            where,
            query,
            f"{n} series, over the report's {MAX_SERIES}: narrow the report to the PoC's VMs with --match",
        )


def check_bounds(series: list[tuple[dict[str, str], Any]], where: str, query: str) -> None:
    """At most :data:`MAX_SERIES` series, every label name and value at most
    :data:`MAX_LABEL_CHARS` characters; else a PromError saying which."""
    _check_series_count(len(series), where, query)
    for i, (metric, _) in enumerate(series):
        _check_label_sizes(metric, where, query, i)


def _sample(point: Any, where: str, query: str, i: int) -> None:
    if (
        not isinstance(point, list)
        or len(point) != 2
        or isinstance(point[0], bool)
        or not isinstance(point[0], (int, float))
        or not math.isfinite(point[0])
        or not isinstance(point[1], str)
        or not _FLOAT.fullmatch(point[1])
    ):
        raise _err(where, query, f'series {i}: expected a sample [time, "value"], got {_show(point)}')


def _result(data: Any, where: str, query: str, kinds: tuple[str, ...]) -> tuple[str, Any]:
    if not isinstance(data, dict):
        raise _err(where, query, f"expected 'data' to be an object, got {_show(data)}")
    kind = data.get("resultType")
    result = data.get("result")
    if kind not in kinds:
        raise _err(where, query, f"expected a {' or '.join(kinds)} result, got resultType {_show(kind)}")
    if kind != "scalar" and not isinstance(result, list):
        raise _err(where, query, f"expected 'result' to be a list, got {_show(result)}")
    if isinstance(result, list):
        _check_series_count(len(result), where, query)
    return kind, result


def check_vector(data: Any, where: str, query: str) -> list[dict[str, Any]]:
    """The series of an instant query's ``data`` (a vector, or a scalar as one series without
    labels), each ``{"metric": {str: str}, "value": [t, "v"]}``; PromError for any other shape."""
    kind, result = _result(data, where, query, ("vector", "scalar"))
    if kind == "scalar":
        _sample(result, where, query, 0)
        return [{"metric": {}, "value": result}]
    out = []
    for i, item in enumerate(result):
        metric = _labels(item, where, query, i)
        value = item.get("value")
        _sample(value, where, query, i)
        out.append({"metric": metric, "value": value})
    return out


def check_matrix(data: Any, where: str, query: str) -> list[dict[str, Any]]:
    """The series of a range query's ``data``, each ``{"metric": {str: str}, "values": [[t, "v"],
    ...]}``; PromError for any other shape."""
    _, result = _result(data, where, query, ("matrix",))
    for i, item in enumerate(result):
        metric = _labels(item, where, query, i)
        values = item.get("values")
        if not isinstance(values, list):
            raise _err(where, query, f"series {i}: expected 'values' to be a list, got {_show(values)}")
        for point in values:
            _sample(point, where, query, i)
        item["metric"] = metric
    return result


def _points(values: list[list[Any]]) -> np.ndarray:
    """Checked samples ``[t, "v"]`` -> float array (n, 2) (numpy reads "NaN", "+Inf" and "-Inf")."""
    return np.array(values, dtype=float).reshape(-1, 2)


# A range answer of Prometheus' own shape, typed (see PromAPI.query_range_arrays): strict, so a
# time must be a JSON number (not a bool, not a string) and a value a JSON string.
class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, str]]


class _Matrix(msgspec.Struct):
    resultType: str  # noqa: N815 (Prometheus' name)
    result: list[_Series]


class _RangeAnswer(msgspec.Struct):
    status: str
    data: _Matrix
    warnings: list[str] = []


_RANGE_DECODER = msgspec.json.Decoder(_RangeAnswer)
# Value strings joined with "," (which no Prometheus float holds): all checked by one match.
_FLOATS = re.compile(rf"(?:{_FLOAT.pattern})(?:,(?:{_FLOAT.pattern}))*", re.ASCII)
# The characters of the grammar's finite numbers (and the commas joining them).
_NUMBER_BYTES = b"0123456789.+-eE,"


def _checked_points(values: list[tuple[float, str]]) -> np.ndarray | None:
    """Typed samples -> float array (n, 2); None when a time is not finite or a value string is
    not a Prometheus float (the caller then goes the checking way, which names it)."""
    if not values:
        return np.empty((0, 2))
    times, texts = zip(*values)
    joined = ",".join(texts)
    if joined.count(",") != len(texts) - 1:
        return None
    if joined.encode().translate(None, _NUMBER_BYTES):
        # A letter, a space, an underscore (or more): NaN and Inf are checked against the grammar,
        # anything else is refused by it.
        if not _FLOATS.fullmatch(joined):
            return None
        numbers = np.array(texts, dtype=float)
    else:
        # Only digits, signs, points and exponent letters: here float() reads exactly the numbers
        # of the grammar and refuses the rest ("1e", "--1", "."), at a third of the regular
        # expression's cost (a tenth of the report's CPU for 100 VM disks).
        try:
            numbers = np.array(list(map(float, texts)))
        except ValueError:
            return None
    out = np.empty((len(values), 2))
    out[:, 0] = times
    if not np.isfinite(out[:, 0]).all():
        return None
    out[:, 1] = numbers
    return out


def _err(where: str, query: str | None, cause: str) -> PromError:
    """``<url>: <cause> (query: <the PromQL>)``: one line saying which query and what came back."""
    return PromError(f"{where}: {cause}" + (f" (query: {query[:200]})" if query else ""))


def _text(value: Any, default: str) -> str:
    return value[:300] if isinstance(value, str) else default


def _short(e: BaseException) -> str:
    text = str(e)
    if "Connection refused" in text:
        return "connection refused"
    return text[:200]


def parse_seconds(text: str) -> float:
    """A duration (``1m30s``, ``5s``, ``250ms``, ``1.5m``) in seconds: the project's one grammar
    (ioparallax.units.parse_duration), here for a text with a unit."""
    try:
        if not text.strip() or text.strip()[-1].isdigit():
            raise ValueError("no unit")
        seconds = parse_duration(text)
        if seconds < 0:
            raise ValueError("negative")
    except ValueError:
        raise ValueError(f"expected a duration such as 30s, 5m or 1h30m, got {text!r}") from None
    return seconds
