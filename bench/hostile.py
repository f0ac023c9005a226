"""What hostile input costs (issue 25): the figures docs/hostile-input.md, docs/report.md and
docs/endpoint-security.md quote, measured on real processes over loopback.

- ioparallax-report against a scripted Prometheus: a 100 MB answer with and without a
  Content-Length, and the densest answer the value check lets through under the default
  --max-answer-size (62 MiB of one-number lists): exit code, seconds, peak RSS (the child's own
  VmHWM, read while it runs).
- fio-exporter against 300 half-sent requests (a request line and one header, never finished):
  the exporter's threads while they are held (at most --web.max-connections) and after
  --web.read-header-timeout (1 s here).
- The YAML loader against an alias bomb (ten levels of nine aliases): seconds to refuse it.

Run: .venv/bin/python bench/hostile.py
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ioparallax.simulators.process import free_port, start, wait_for_http  # noqa: E402
from ioparallax.yamlconf import ConfigError, load_yaml  # noqa: E402

VENV_BIN = REPO / ".venv" / "bin"
HEAD = b'{"status":"success","data":{"resultType":"vector","result":['
TAIL = b"]}}"


def _status_field(pid: int, name: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split(f"{name}:")[1].split()[0])


class Scripted(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.query_answer: tuple[bytes, bool] = (b"", True)  # one chunk repeated to 100 MB, or a body
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                try:
                    if path != "/api/v1/query":
                        body = b'{"status":"success","data":null}'
                        self._head(len(body))
                        self.wfile.write(body)
                        return
                    body, stream = server.query_answer
                    if not stream:
                        self._head(len(body))
                        self.wfile.write(body)
                        return
                    framed = stream == "framed"
                    self._head(100 * 2**20 if framed else None)
                    for _ in range(100 * 2**20 // len(body)):
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _head(self, length: int | None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if length is None:
                    self.send_header("Connection", "close")
                else:
                    self.send_header("Content-Length", str(length))
                self.end_headers()

        super().__init__(("127.0.0.1", 0), Handler)


def report_run(url: str, out: Path) -> tuple[int, float, int, str]:
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [str(VENV_BIN / "ioparallax-report"), "--prometheus", url, "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    hwm = 0
    while proc.poll() is None:
        try:
            hwm = max(hwm, _status_field(proc.pid, "VmHWM") * 1024)
        except (OSError, IndexError, ValueError):
            pass
        time.sleep(0.01)
    err = proc.stderr.read().decode() if proc.stderr else ""
    return proc.returncode, time.monotonic() - t0, hwm, err.strip().splitlines()[-1][:110] if err.strip() else ""


def bench_report(tmp: Path) -> None:
    server = Scripted()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    chunk = b"[" + b'[1,"1"],' * 8191 + b'[1,"1"]'
    cases = [
        ("100 MB answer, Content-Length", (chunk, "framed")),
        ("100 MB answer, no length", (chunk, "unframed")),
        ("densest allowed, 62 MiB", (HEAD + b",".join([b"[0.00000]"] * ((62 * 2**20) // 10)) + TAIL, False)),
    ]
    print("ioparallax-report (default --max-answer-size 64MiB, --timeout 30):")
    for label, answer in cases:
        server.query_answer = answer  # type: ignore[assignment]
        code, seconds, hwm, line = report_run(url, tmp / "r.html")
        print(f"  {label:<32} exit {code}  {seconds:5.1f} s  peak RSS {hwm / 2**20:5.0f} MiB  {line}")
    server.shutdown()
    server.server_close()


def bench_half_sent(tmp: Path) -> None:
    port = free_port()
    argv = [
        str(VENV_BIN / "fio-exporter"),
        "serve",
        f"--web.listen-address=127.0.0.1:{port}",
        "--no-collector.guest-disk",
        "--web.read-header-timeout=1s",
    ]
    proc = start("fio-exporter", argv, tmp / "fio-exporter.log")
    try:
        wait_for_http(f"http://127.0.0.1:{port}/-/healthy", proc=proc)
        before = _status_field(proc.popen.pid, "Threads")
        socks = []
        for _ in range(300):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            socks.append(s)
        time.sleep(0.5)
        held = _status_field(proc.popen.pid, "Threads")
        time.sleep(2.0)
        after = _status_field(proc.popen.pid, "Threads")
        for s in socks:
            s.close()
        print("fio-exporter, 300 half-sent requests (--web.max-connections 256, --web.read-header-timeout 1s):")
        print(f"  threads: {before} idle, {held} while held, {after} 2.5 s later")
    finally:
        proc.stop()


def bench_alias_bomb(tmp: Path) -> None:
    path = tmp / "bomb.yml"
    path.write_text(
        "a0: &a0 [x, x, x, x, x, x, x, x, x]\n"
        + "".join(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 11))
    )
    t0 = time.monotonic()
    try:
        load_yaml(path)
    except ConfigError as exc:
        print(f"YAML alias bomb (9^10 leaves): refused in {1000 * (time.monotonic() - t0):.1f} ms: {exc.message[:60]}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ioparallax-hostile-") as d:
        tmp = Path(d)
        bench_alias_bomb(tmp)
        bench_half_sent(tmp)
        bench_report(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
