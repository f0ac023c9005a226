"""Benchmark: the Stargate exporter's transports side by side on the 16-CVM cluster bench.

Two real stargate-exporter processes, the same flags (parse workers as the exporter's default,
none), differing only in what fetches the pages:

- **select**: the exporter's own transport (ioparallax/exporters/stargate/client.py: HTTP/1.1
  framing over non-blocking sockets, one ``select`` loop per probe in the probe's thread);
- **curl**: libcurl's multi interface through pycurl (:class:`CurlClient` below: every request of
  a probe driven from the probe's thread, framing in C), the best library alternative measured
  (docs/stargate.md, Transport); ``--lean-curl``: without its Python callbacks (libcurl's own
  head limits), the library's best case.

One stargate-simulator serves 16 CVMs of 250 vdisks (bench/stargate_cluster.py's set-up, clock
frozen). Each run, the two sides in turn (the order alternates run by run, so both see the same
load): **per-CVM**, 16 probes at once, one per CVM, as Prometheus scrapes 16 targets; and
**discover**, one ``discover=true`` probe of the cluster. Printed per side: the slowest probe's
wall time and the exporter's CPU (its process tree; and its own process, where the fetches run),
min / median over the runs, the load average, and curl's figures as a ratio of select's.

Targets (bench/gate.py: each figure as min / median over the runs with the load average, the
target beside it; exit 1 when one is missed): the exporter's transport (``--chosen``) must not
lose to the other by ``--margin`` (10 %) or more on the median of the exporter's own-process CPU
(where the fetches run), nor by ``--wall-margin`` (25 %: the slowest of 16 concurrent probes
varies by ~20 % from run to run on a loaded 2-core machine) or more on the median of the slowest
per-CVM probe.

    nice -n 10 .venv/bin/python bench/stargate_transport.py [--runs 5] [--margin 0.10] [--wall-margin 0.25]
        [--chosen select] [--lean-curl] [--workers 0]
"""

from __future__ import annotations

import argparse
import ipaddress
import ssl
import sys
import tempfile
from collections.abc import Iterator, Sequence
from io import BytesIO
from pathlib import Path

import pycurl

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from stargate_cluster import Round, measure, start_exporter, start_simulator  # noqa: E402

import gate  # noqa: E402
from ioparallax.exporters.stargate.address import Origin  # noqa: E402
from ioparallax.exporters.stargate.client import (  # noqa: E402
    DEFAULT_CONCURRENCY,
    Budget,
    DeadlineExceeded,
    FetchError,
    resolve,
)
from ioparallax.exporters.stargate.parsepool import default_workers  # noqa: E402
from ioparallax.simulators.process import Process, stop_all  # noqa: E402

SIDES = ("select", "curl")

# ------------------------------------------------------------------ the curl side's page client
# The same PageClient interface as transport.HttpClient over libcurl's multi interface (pycurl),
# every request of a call driven from the caller's thread. It keeps client.py's guarantees so
# that the sides compare like with like: the probe's deadline over the whole call (``select``
# bounded by the time left, each transfer's TIMEOUT_MS the time left when it starts),
# body_size_limit (MAXFILESIZE for an announced length, the write callback past it), at most 100
# header lines and 64 KiB of head (the header callback), keep-alive reuse (one multi handle per
# probe, closed with it), 200 the only status read, https verified against the system's CAs, no
# redirect, names resolved once per probe by transport.resolve (handed over with RESOLVE). Its
# error messages are libcurl's, not client.py's wording.

_MAX_HEAD = 64 * 1024
_MAX_HEADERS = 100
_CA_FILE = ssl.get_default_verify_paths().cafile or ssl.get_default_verify_paths().openssl_cafile


class _Transfer:
    __slots__ = ("index", "url", "limit", "body", "head", "lines", "cause", "handle")

    def __init__(self, index: int, url: str, limit: int, handle: pycurl.Curl):
        self.index, self.url, self.limit, self.handle = index, url, limit, handle
        self.body = BytesIO()
        self.head = 0
        self.lines = 0
        self.cause = ""

    def write(self, data: bytes) -> int | None:
        if self.body.tell() + len(data) > self.limit:
            self.cause = f"page is over body_size_limit ({self.limit} bytes); not read further"
            return 0  # aborts the transfer
        self.body.write(data)
        return None

    def header(self, line: bytes) -> int | None:
        self.head += len(line)
        if line.startswith(b"HTTP/"):
            self.lines = 0
            self.head = len(line)
            return None
        self.lines += 1
        if self.head > _MAX_HEAD:
            self.cause = f"response headers over {_MAX_HEAD} bytes"
            return 0
        if self.lines > _MAX_HEADERS + 1:  # the empty line ends the head
            self.cause = f"got more than {_MAX_HEADERS} headers"
            return 0
        return None


class CurlClient:
    """Keep-alive GETs over libcurl's multi interface in the caller's thread (see the module
    docstring). One multi handle per budget (probe): its connections are the probe's."""

    #: No Python callback per transfer: the body limit is libcurl's MAXFILESIZE (applied while
    #: receiving too, libcurl >= 8.4), the head limits libcurl's own (not client.py's 100
    #: lines / 64 KiB). The library's best case, for the bench; not what the exporter could ship.
    lean = False

    def get_many(
        self, wanted: Sequence[tuple[Origin, str]], budget: Budget, concurrency: int = DEFAULT_CONCURRENCY
    ) -> Iterator[tuple[int, bytes | FetchError]]:
        multi = _multi(budget, concurrency)
        queue = list(enumerate(wanted))[::-1]
        total = len(queue)
        active: dict[int, _Transfer] = {}
        free: list[pycurl.Curl] = budget.__dict__.setdefault("_curl_free", [])
        limit = budget.limits.body_size_limit
        try:
            while queue or active:
                while queue and len(active) < max(1, concurrency):
                    i, (origin, path) = queue.pop()
                    url = origin.page_url(path)
                    try:
                        budget.take_page(url)
                        if not (path.startswith("/") and path.isascii() and path.isprintable() and " " not in path):
                            raise FetchError(f"{url}: not a request path")
                        left = budget.remaining()
                        if left <= 0:
                            raise DeadlineExceeded(f"{url}: deadline exceeded before the request", len(queue) + 1)
                        pins = _pins(origin, budget)
                    except DeadlineExceeded as exc:
                        raise DeadlineExceeded(str(exc), len(queue) + len(active) + 1) from None
                    except FetchError as exc:
                        yield i, exc
                        continue
                    c = free.pop() if free else pycurl.Curl()
                    t = _Transfer(i, url, limit, c)
                    c.setopt(pycurl.URL, url)
                    c.setopt(pycurl.RESOLVE, pins)
                    if self.lean:  # libcurl's own limits only (bench/stargate_transport.py --lean-curl)
                        c.setopt(pycurl.WRITEDATA, t.body)
                    else:
                        c.setopt(pycurl.WRITEFUNCTION, t.write)
                        c.setopt(pycurl.HEADERFUNCTION, t.header)
                    c.setopt(pycurl.TIMEOUT_MS, max(1, int(left * 1000)))
                    c.setopt(pycurl.MAXFILESIZE_LARGE, limit)
                    if not hasattr(c, "_ioparallax"):
                        _configure(c)
                    active[id(c)] = t
                    multi.add_handle(c)
                while True:
                    ret, _ = multi.perform()
                    if ret != pycurl.E_CALL_MULTI_PERFORM:
                        break
                while True:
                    _, ok, failed = multi.info_read()
                    for c in ok:
                        t = active.pop(id(c))
                        multi.remove_handle(c)
                        free.append(c)
                        status = c.getinfo(pycurl.RESPONSE_CODE)
                        if status != 200:
                            yield t.index, FetchError(f"{t.url}: HTTP {status}")
                        else:
                            yield t.index, t.body.getvalue()
                    for c, code, msg in failed:
                        t = active.pop(id(c))
                        multi.remove_handle(c)
                        free.append(c)
                        if code == pycurl.E_OPERATION_TIMEDOUT and budget.remaining() <= 0:
                            raise DeadlineExceeded(f"{t.url}: deadline exceeded", len(queue) + len(active) + 1)
                        yield t.index, FetchError(f"{t.url}: {t.cause or _cause(code, msg)}")
                    if not (ok or failed):
                        break
                if not active:
                    continue
                left = budget.left(len(active) + len(queue), total)
                wait = multi.timeout()  # ms libcurl wants at most (-1: none), e.g. to start a connection
                if wait != 0:
                    multi.select(min(left, 1.0 if wait < 0 else wait / 1000))
        finally:
            for t in active.values():
                multi.remove_handle(t.handle)
                t.handle.close()


def _cause(code: int, msg: str) -> str:
    if code == pycurl.E_COULDNT_CONNECT and "refused" in msg.lower():
        return "connection refused"
    if code in (pycurl.E_SSL_CACERT, pycurl.E_PEER_FAILED_VERIFICATION, pycurl.E_SSL_CONNECT_ERROR):
        return f"TLS error: {msg}"
    if code == pycurl.E_FILESIZE_EXCEEDED:
        return "page is over body_size_limit; not read further"
    return msg or f"curl error {code}"


def _configure(c: pycurl.Curl) -> None:
    c.setopt(pycurl.NOSIGNAL, 1)
    c.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
    c.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
    c.setopt(pycurl.HTTPHEADER, ["Accept: text/html", "Accept-Encoding: identity"])
    c.setopt(pycurl.FOLLOWLOCATION, 0)
    if _CA_FILE:
        c.setopt(pycurl.CAINFO, _CA_FILE)
    c._ioparallax = True  # type: ignore[attr-defined]


def _multi(budget: Budget, concurrency: int) -> pycurl.CurlMulti:
    """The budget's multi handle: its connection cache is the probe's keep-alive pool (closed
    when the budget is dropped at the probe's end)."""
    multi = budget.__dict__.get("_curl_multi")
    if multi is None:
        multi = budget.__dict__["_curl_multi"] = pycurl.CurlMulti()
        multi.setopt(pycurl.M_MAXCONNECTS, max(1, concurrency) * 4)
    return multi


def _pins(origin: Origin, budget: Budget) -> list[str]:
    """``host:port:address`` for libcurl's RESOLVE: the name resolved by client.py's resolver
    (once per probe, within its deadline)."""
    try:
        ipaddress.ip_address(origin.host)
        return []
    except ValueError:
        pass
    addrs = resolve(origin, budget)
    return [f"{origin.host}:{origin.port}:" + ",".join(_bracket(a[1][0]) for a in addrs)]


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def closed(budget: Budget) -> None:
    """Close the budget's handles (the probe is over)."""
    for c in budget.__dict__.pop("_curl_free", []):
        c.close()
    multi = budget.__dict__.pop("_curl_multi", None)
    if multi is not None:
        multi.close()


def serve(kind: str, argv: list[str]) -> int:
    """Run the stargate-exporter in this process with the ``kind`` transport."""
    from ioparallax.exporters.stargate import cli

    if kind in ("curl", "curl-lean"):
        CurlClient.lean = kind == "curl-lean"
        cli.HttpClient = CurlClient  # type: ignore[misc,assignment]
        close = Budget.close

        def close_all(self: Budget) -> None:
            closed(self)
            close(self)

        Budget.close = close_all  # type: ignore[method-assign]
    return cli.main(argv)


def start_side(tmp: Path, kind: str, ports: list[int], workers: str, lean: bool) -> tuple[Process, str]:
    """The exporter with ``kind``'s transport (this file, ``--serve``)."""
    serve = [sys.executable, __file__, "--serve", "curl-lean" if kind == "curl" and lean else kind, "--"]
    return start_exporter(tmp, ports, workers, name=f"stargate-exporter-{kind}", command=serve)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve"]:
        return serve(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5, help="measured runs per side and mode (default: %(default)s)")
    ap.add_argument("--cvms", type=int, default=16, help="simulated CVMs (default: %(default)s)")
    ap.add_argument("--vdisks-per-cvm", type=int, default=250, help="default: %(default)s")
    ap.add_argument(
        "--workers", default=default_workers(), help="parse workers, auto or a count (default: %(default)s)"
    )
    ap.add_argument("--chosen", choices=SIDES, default="select", help="the exporter's transport (default: %(default)s)")
    ap.add_argument(
        "--margin",
        type=float,
        default=0.10,
        help="how much the chosen transport may lose by on the exporter's own-process CPU, as a fraction "
        "(default: %(default)s)",
    )
    ap.add_argument(
        "--wall-margin",
        type=float,
        default=0.25,
        help="how much it may lose by on the slowest per-CVM probe's wall time (default: %(default)s: the slowest of "
        "16 concurrent probes varies by ~20%% from run to run on a loaded 2-core machine)",
    )
    ap.add_argument(
        "--lean-curl",
        action="store_true",
        help="the curl side without its Python callbacks (libcurl's own head limits): the library's best case",
    )
    args = ap.parse_args(argv)
    g = gate.Gate("bench/stargate_transport.py")
    g.calibrate()
    total = args.cvms * args.vdisks_per_cvm
    rounds: dict[tuple[str, str], list[Round]] = {}
    rss: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            sim, targets, ports = start_simulator(Path(tmp), args.cvms, args.vdisks_per_cvm)
        except SystemExit as exc:
            return g.cannot_measure(str(exc))
        sides: dict[str, tuple[Process, str]] = {}
        try:
            for kind in SIDES:
                sides[kind] = start_side(Path(tmp), kind, ports, args.workers, args.lean_curl)
            for proc, base in sides.values():  # warm-up: the simulator's page cache, the workers
                measure(proc, sim, base, targets, False, total)
                measure(proc, sim, base, targets, True, total)
            for run in range(args.runs):
                for kind in SIDES if run % 2 == 0 else SIDES[::-1]:
                    proc, base = sides[kind]
                    for mode, discover in (("per-CVM", False), ("discover", True)):
                        rounds.setdefault((kind, mode), []).append(measure(proc, sim, base, targets, discover, total))
            for kind, (proc, _) in sides.items():
                rss[kind] = gate.tree_peak_rss_mb(proc.pid)
        finally:
            stop_all([proc for proc, _ in sides.values()] + [sim], timeout=15)

    loads = [r.load for rs in rounds.values() for r in rs]
    print(
        f"stargate transport bench: {args.cvms} CVMs x {args.vdisks_per_cvm} vdisks ({total} vdisks), "
        f"{gate.CORES} cores, parse workers {args.workers}, {args.runs} runs per side interleaved, "
        f"curl side {'lean (no callbacks)' if args.lean_curl else 'with the limits callbacks'}, "
        f"load average {min(loads):.1f}-{max(loads):.1f}"
    )
    print("  slowest: the slowest probe of the round; cpu: the exporter's processes; own: its own process (fetches)")
    med: dict[tuple[str, str, str], gate.Runs] = {}
    for mode in ("per-CVM", "discover"):
        print(f"\n  {mode}:")
        for kind in SIDES:
            rs = rounds[(kind, mode)]
            at = [r.load for r in rs]
            slowest = gate.Runs([max(r.walls) for r in rs], at)
            cpu = gate.Runs([r.cpu for r in rs], at)
            own = gate.Runs([r.own_cpu for r in rs], at)
            med[(kind, mode, "slowest")], med[(kind, mode, "own")] = slowest, own
            print(f"    {kind:6}  slowest {slowest.describe('s')}")
            print(f"    {kind:6}  cpu {cpu.describe('s')}; own {own.describe('s')}")
        for what in ("slowest", "own"):
            s, c = med[("select", mode, what)].median, med[("curl", mode, what)].median
            print(f"    curl / select, {what} (medians): {c:5.2f} / {s:5.2f} = {c / s:4.2f}x")
    print()
    for kind in SIDES:
        print(f"  peak RSS {kind}: {rss[kind]:6.1f} MB (sum of VmHWM over the exporter's processes)")
    other = next(k for k in SIDES if k != args.chosen)
    for what, label, margin in (
        ("slowest", "slowest per-CVM probe", args.wall_margin),
        ("own", "exporter's own-process CPU, per-CVM", args.margin),
    ):
        mine, theirs = med[(args.chosen, "per-CVM", what)], med[(other, "per-CVM", what)]
        print(f"  {label}: {args.chosen} {mine.describe('s')}; {other} {theirs.describe('s')}")
        g.check_ratio(f"{label}, {args.chosen} / {other} (medians)", mine, theirs, below=1 + margin)
    return g.verdict()


if __name__ == "__main__":
    sys.exit(main())
