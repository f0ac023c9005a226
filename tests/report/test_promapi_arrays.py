"""PromAPI.query_range_arrays: the points of query_range (shape-checked alike) as float arrays,
"NaN", "+Inf" and "-Inf" included, and a failed query the same PromError."""

from __future__ import annotations

import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ioparallax.report.promapi import PromAPI, PromError


def _serve(answer: dict, status: int = 200):
    body = json.dumps(answer).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def prometheus_answering():
    servers = []

    def start(answer: dict, status: int = 200) -> PromAPI:
        s = _serve(answer, status)
        servers.append(s)
        return PromAPI(f"http://127.0.0.1:{s.server_address[1]}")

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def _matrix(values: list[list]) -> dict:
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": {"vm": "vm-1", "disk": "scsi0:1"}, "values": values},
                {"metric": {"vm": "vm-2", "disk": "scsi0:1"}, "values": []},
            ],
        },
    }


@pytest.mark.parametrize(
    "values",
    [
        [[1700000000, "1.5"], [1700000006.5, "0"], [1700000012, "1e-3"], [1700000018, "NaN"]],
        [[1700000000, "+Inf"], [1700000006, "-Inf"], [1700000012, "2"]],
    ],
)
def test_arrays_hold_the_points_of_query_range(prometheus_answering, values):
    api = prometheus_answering(_matrix(values))
    got = api.query_range_arrays("x", 0, 1, 6)
    plain = api.query_range("x", 0, 1, 6)
    assert [m for m, _ in got] == [s["metric"] for s in plain]
    for (_, points), s in zip(got, plain):
        assert points.shape == (len(s["values"]), 2)
        expected = np.array([[float(t), float(v)] for t, v in s["values"]]).reshape(-1, 2)
        assert np.array_equal(points, expected, equal_nan=True)
    assert math.isinf(got[0][1][0, 1]) or got[0][1][0, 1] == 1.5
    assert api.queries == 2


def test_a_failed_query_is_the_same_error(prometheus_answering):
    api = prometheus_answering(
        {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}, status=400
    )
    with pytest.raises(PromError, match=r"HTTP 400, bad_data: parse error at char 3 \(query: rate\(x\)\)"):
        api.query_range_arrays("rate(x)", 0, 1, 6)


def test_warnings_are_logged(prometheus_answering, caplog):
    answer = _matrix([[1, "1"]]) | {"warnings": ["PromQL info: metric might not be a counter"]}
    api = prometheus_answering(answer)
    with caplog.at_level("WARNING"):
        api.query_range_arrays("x", 0, 1, 6)
    assert "metric might not be a counter" in caplog.text


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([[1700000000, "1_0"]], 'expected a sample \\[time, "value"\\]'),  # float() would take it
        ([[1700000000, " 1"]], 'expected a sample \\[time, "value"\\]'),  # float() would take it
        ([[1700000000, "nan"]], 'expected a sample \\[time, "value"\\]'),  # float() would take it
        ([[1700000000, "infinity"]], 'expected a sample \\[time, "value"\\]'),  # float() would take it
        ([[1700000000, "2"], [1700000006, "1e"]], 'expected a sample \\[time, "value"\\]'),
        ([[1700000000, "--1"]], 'expected a sample \\[time, "value"\\]'),
        ([[1700000000, "."]], 'expected a sample \\[time, "value"\\]'),
        ([[1700000000, "1,2"]], 'expected a sample \\[time, "value"\\]'),
        ([[1700000000, 1.5]], 'expected a sample \\[time, "value"\\]'),  # a number, not a string
        ([[True, "1"]], 'expected a sample \\[time, "value"\\]'),
    ],
)
def test_a_sample_prometheus_does_not_write_is_refused_as_query_range_refuses_it(prometheus_answering, values, message):
    api = prometheus_answering(_matrix(values))
    with pytest.raises(PromError, match=message):
        api.query_range_arrays("x", 0, 1, 6)
    with pytest.raises(PromError, match=message):
        api.query_range("x", 0, 1, 6)
