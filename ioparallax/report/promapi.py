"""A thin client of the Prometheus HTTP query API (``/api/v1/query``, ``/api/v1/query_range``).

Works against anything that speaks that API (Prometheus, Thanos, Mimir, VictoriaMetrics). Every
call has a timeout; every failure raises :class:`PromError` naming the URL and the cause, never a
bare ``requests`` exception. The client counts its queries, so the report (and bench/report.py) can
show that the number of queries follows the kinds of figures, not the number of VM disks.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
import requests

from ioparallax.exporters.common.config import parse_duration

log = logging.getLogger(__name__)


class PromError(RuntimeError):
    """A query that failed: the message names the Prometheus URL, the query and the cause."""


# A range answer decoded straight into typed values by msgspec (in C): each point a pair of floats
# (strict=False reads Prometheus' "1.5" strings as floats), no per-point list, int and str objects
# to make and convert again. Measured on the 77 MB of range answers of bench/report.py (100 VM
# disks x 1 h), decoding and shaping took 0.70 s of CPU this way against 1.35 s with the json
# module, 1.22 s with orjson and 1.39 s with msgspec untyped (all three then convert each point).
# An answer of any other shape (a value such as "+Inf", which msgspec does not read as a float)
# goes the json module's way.
class _Series(msgspec.Struct):
    metric: dict[str, str]
    values: list[tuple[float, float]]


class _Matrix(msgspec.Struct):
    result: list[_Series]


class _RangeAnswer(msgspec.Struct):
    status: str
    data: _Matrix
    warnings: list[str] = []


_RANGE_DECODER = msgspec.json.Decoder(_RangeAnswer, strict=False)


@dataclass
class PromAPI:
    url: str  # base URL, e.g. http://127.0.0.1:9090 (a path prefix is kept)
    timeout: float = 30.0  # seconds per HTTP request
    queries: int = 0  # how many queries were sent (query + query_range)
    session: requests.Session = field(default_factory=requests.Session, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise PromError(f"{self.url!r}: expected a Prometheus URL such as http://127.0.0.1:9090")

    def _get(self, path: str, params: dict[str, Any]) -> Any:
        where = f"{self.url}{path}"
        return self._answer(where, self._request(where, params), params)

    def _request(self, where: str, params: dict[str, Any]) -> requests.Response:
        with self._lock:
            self.queries += 1
        try:
            return self.session.get(where, params=params, timeout=self.timeout)
        except requests.Timeout:
            raise PromError(f"{where}: no answer within {self.timeout:g} s") from None
        except requests.ConnectionError as e:
            raise PromError(f"{where}: cannot connect ({_short(e)})") from None
        except requests.RequestException as e:
            raise PromError(f"{where}: {_short(e)}") from None

    def _answer(self, where: str, r: requests.Response, params: dict[str, Any]) -> Any:
        try:
            body = r.json()
        except ValueError:
            raise PromError(f"{where}: HTTP {r.status_code}, not a Prometheus API answer ({r.text[:120]!r})") from None
        if r.status_code != 200 or body.get("status") != "success":
            query = params.get("query", "")
            raise PromError(
                f"{where}: HTTP {r.status_code}, {body.get('errorType', 'error')}: "
                f"{body.get('error', '?')} (query: {query[:200]})"
            )
        for w in body.get("warnings", []) or []:
            log.warning("%s: %s", where, w)
        return body["data"]

    def query(self, expr: str, time: float | None = None) -> list[dict[str, Any]]:
        """Instant query: a list of ``{"metric": {...}, "value": [t, "v"]}`` (vector results)."""
        params: dict[str, Any] = {"query": expr}
        if time is not None:
            params["time"] = f"{time:.3f}"
        data = self._get("/api/v1/query", params)
        if data.get("resultType") == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return data.get("result", [])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """Range query: a list of ``{"metric": {...}, "values": [[t, "v"], ...]}``."""
        data = self._get(
            "/api/v1/query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        )
        return data.get("result", [])

    def query_range_arrays(
        self, expr: str, start: float, end: float, step: float
    ) -> list[tuple[dict[str, str], np.ndarray]]:
        """Range query as ``(labels, points)`` pairs, ``points`` a float array of shape (n, 2):
        time and value of each point (what :meth:`query_range` answers, decoded in C)."""
        where = f"{self.url}/api/v1/query_range"
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}"}
        r = self._request(where, params)
        if r.status_code == 200:
            try:
                answer = _RANGE_DECODER.decode(r.content)
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass
            else:
                if answer.status == "success":
                    for w in answer.warnings:
                        log.warning("%s: %s", where, w)
                    return [(s.metric, _points(s.values)) for s in answer.data.result]
        data = self._answer(where, r, params)
        return [(s["metric"], _points([(float(t), float(v)) for t, v in s["values"]])) for s in data.get("result", [])]

    def scrape_interval(self) -> float | None:
        """The shortest scrape interval among the active targets (seconds), None if unknown."""
        try:
            data = self._get("/api/v1/targets", {"state": "active"})
        except PromError as e:
            log.info("scrape interval unknown: %s", e)
            return None
        out = []
        for t in data.get("activeTargets", []):
            text = t.get("scrapeInterval", "")
            try:
                out.append(parse_seconds(text))
            except ValueError:
                continue
        return min(out) if out else None

    def buildinfo(self) -> dict[str, str]:
        try:
            return self._get("/api/v1/status/buildinfo", {})
        except PromError:
            return {}


def _points(values: list[tuple[float, float]]) -> np.ndarray:
    return np.array(values, dtype=float).reshape(-1, 2)


def _short(e: Exception) -> str:
    text = str(e)
    if "Connection refused" in text:
        return "connection refused"
    return text[:200]


def parse_seconds(text: str) -> float:
    """A duration (``1m30s``, ``5s``, ``250ms``, ``1.5m``) in seconds: the project's one grammar
    (ioparallax.exporters.common.config.parse_duration), here for a text with a unit."""
    try:
        if not text.strip() or text.strip()[-1].isdigit():
            raise ValueError("no unit")
        seconds = parse_duration(text)
        if seconds < 0:
            raise ValueError("negative")
    except ValueError:
        raise ValueError(f"expected a duration such as 30s, 5m or 1h30m, got {text!r}") from None
    return seconds
