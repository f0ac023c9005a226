"""Cluster scale: pages parsed in worker processes (same answer as in-process, deadline, a dead
worker) and the collector switches of the series budget, on the simulator's real pages."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import Future
from pathlib import Path

import pytest
import requests

from ioparallax.exporters.stargate.address import TargetPolicy
from ioparallax.exporters.stargate.client import HttpClient
from ioparallax.exporters.stargate.collector import Collectors, StargateCollector
from ioparallax.exporters.stargate.config import load_config
from ioparallax.exporters.stargate.parsepool import ParsePool
from ioparallax.exporters.stargate.target import probe
from ioparallax.simulators.stargate.server import StargateCluster
from ioparallax.yamlconf import ConfigError
from tests.support import ManagedProcess, free_port, venv_tool, wait_for_http

FROZEN = 1_700_000_000.0
CVMS, VDISKS = 4, 48


@pytest.fixture(scope="module")
def cluster():
    with StargateCluster(None, vdisk_count=VDISKS, cvm_count=CVMS, clock=lambda: FROZEN) as sim:
        yield sim


@pytest.fixture(scope="module")
def pool():
    p = ParsePool(2)
    p.warm_up()
    yield p
    p.close()


def ports(cluster) -> tuple[int, ...]:
    return tuple(int(u.rsplit(":", 1)[1]) for u in cluster.urls.values())


def run(cluster, target: str, pool: ParsePool | None, discover: bool = False, seconds: float = 20.0):
    return probe(
        HttpClient(),
        target,
        time.monotonic() + seconds,
        discover=discover,
        parse_pool=pool,
        policy=TargetPolicy(["127.0.0.1"]),
        discovery_ports=ports(cluster),
    )


def lines(body: bytes) -> list[str]:
    """Sample lines, without the probe's duration (the only value that differs between runs)."""
    return [
        ln
        for ln in body.decode().splitlines()
        if ln and not ln.startswith("#") and not ln.startswith("stargate_scrape_duration_seconds")
    ]


def test_synthetic_cluster_deals_vdisks_over_its_cvms(cluster):
    hosted = Counter(d.cvm_at(cluster.period_second()) for d in cluster.trace.disks)
    assert sorted(hosted) == [f"cvm-{i}" for i in range(1, CVMS + 1)]
    assert set(hosted.values()) == {VDISKS // CVMS}


@pytest.mark.parametrize("discover", [False, True], ids=["per-cvm", "discover"])
def test_parse_workers_give_the_in_process_answer(cluster, pool, discover):
    target = cluster.urls["cvm-2"]
    ours, base = run(cluster, target, pool, discover), run(cluster, target, None, discover)
    assert ours.up and base.up and not ours.detail_errors
    assert len(ours.details) == (VDISKS if discover else VDISKS // CVMS)
    assert lines(StargateCollector(ours).render()) == lines(StargateCollector(base).render())


def test_concurrent_probes_share_the_workers(cluster, pool):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(CVMS) as ex:
        results = list(ex.map(lambda url: run(cluster, url, pool), cluster.urls.values()))
    assert [r.up for r in results] == [True] * CVMS
    assert sorted(v for r in results for v in r.details) == sorted(str(d.vdisk_id) for d in cluster.trace.disks)
    assert all(d is not None for r in results for d in r.details.values())


def test_a_probe_ahead_of_the_workers_waits_for_them(cluster, pool, monkeypatch):
    """Back-pressure: a probe that fetches faster than the workers parse keeps at most
    MAX_QUEUED_BATCHES + 1 batches of pages waiting, not all of its pages (memory)."""
    from ioparallax.exporters.stargate import target as probe_mod

    queued, most = [0], [0]
    submit, result = pool.submit_details, pool.details_result

    def slow_submit(pages):
        queued[0] += 1
        most[0] = max(most[0], queued[0])
        real, late = submit(pages), Future()

        def answer() -> None:  # each batch answers 50 ms late: workers slower than the fetches
            time.sleep(0.05)
            late.set_result(real.result())

        threading.Thread(target=answer, daemon=True).start()
        return late

    def counted_result(fut, pages, timeout):
        out = result(fut, pages, timeout)
        queued[0] -= 1
        return out

    monkeypatch.setattr(probe_mod, "DETAIL_BATCH", 2)  # 48 detail views: 24 batches
    monkeypatch.setattr(pool, "submit_details", slow_submit)
    monkeypatch.setattr(pool, "details_result", counted_result)
    r = run(cluster, cluster.urls["cvm-1"], pool, discover=True)
    assert r.up and len(r.details) == VDISKS and not r.detail_errors
    assert most[0] == probe_mod.MAX_QUEUED_BATCHES + 1 and queued[0] == 0


def test_deadline_with_workers_gives_up_0_and_keeps_the_workers(cluster, pool, caplog):
    before = sorted(pool.pids())
    # discover=true reads 48 detail views: 50 ms is not enough for them (nor for the CVMs).
    r = run(cluster, cluster.urls["cvm-1"], pool, discover=True, seconds=0.05)
    assert not r.up and "deadline exceeded" in r.error and not r.details
    assert "deadline exceeded" in caplog.text
    time.sleep(0.5)  # batches already in a worker finish; their answers are dropped
    assert sorted(pool.pids()) == before, "a worker was lost or replaced after an abandoned probe"
    again = run(cluster, cluster.urls["cvm-1"], pool, discover=True)
    assert again.up and len(again.details) == VDISKS and not again.detail_errors


def test_a_killed_worker_costs_no_probe_and_is_replaced(cluster, caplog):
    p = ParsePool(2)
    try:
        p.warm_up()
        victim = p.pids()[0]
        os.kill(victim, signal.SIGKILL)
        time.sleep(0.5)
        r = run(cluster, cluster.urls["cvm-3"], p, discover=True)
        assert r.up and len(r.details) == VDISKS and not r.detail_errors
        assert "parse workers failed" in caplog.text
        r = run(cluster, cluster.urls["cvm-3"], p)
        assert r.up and len(r.details) == VDISKS // CVMS
        assert victim not in p.pids() and len(p.pids()) == 2
    finally:
        p.close()


# ------------------------------------------------------------------------------ series budget
def per_vdisk(body: bytes) -> Counter:
    """Series per metric family of one vdisk (every vdisk of the synthetic cluster is alike in
    its families; the counts are over all of them, divided)."""
    fams: Counter = Counter()
    for ln in lines(body):
        if 'vdisk_id="' in ln:
            name = ln.split("{", 1)[0]
            for suffix in ("_bucket", "_gcount", "_gsum"):
                name = name.removesuffix(suffix)
            fams[name] += 1
    return fams


def series_per_vdisk(body: bytes, vdisks: int) -> float:
    return sum(per_vdisk(body).values()) / vdisks


def test_series_budget_per_vdisk_with_each_switch(cluster):
    """The figures of docs/stargate.md's budget table, from a real exposition (2016 build)."""
    r = run(cluster, cluster.urls["cvm-1"], None, discover=True)
    assert r.up and len(r.details) == VDISKS
    full = StargateCollector(r).render()
    no_hist = StargateCollector(r, collectors=Collectors(histograms=False)).render()
    no_ratio = StargateCollector(r, collectors=Collectors(source_ratios=False)).render()
    neither = StargateCollector(r, collectors=Collectors(histograms=False, source_ratios=False)).render()
    fams = per_vdisk(full)
    hist = (
        "stargate_vdisk_read_latency_seconds",
        "stargate_vdisk_write_latency_seconds",
        "stargate_vdisk_read_size_bytes",
        "stargate_vdisk_write_size_bytes",
    )
    assert [fams[h] / VDISKS for h in hist] == [10, 10, 10, 10]  # 8 buckets, _gcount, _gsum
    ratios = fams["stargate_vdisk_read_source_ratio"] + fams["stargate_vdisk_write_destination_ratio"]
    assert ratios / VDISKS == 11  # 7 read sources + 4 write destinations
    assert series_per_vdisk(full, VDISKS) == 98
    assert series_per_vdisk(no_hist, VDISKS) == 58
    assert series_per_vdisk(no_ratio, VDISKS) == 87
    assert series_per_vdisk(neither, VDISKS) == 47
    for body in (no_hist, neither):
        assert not any(f in body.decode() for f in hist)
    for body in (no_ratio, neither):
        assert "_source_ratio" not in body.decode() and "_destination_ratio" not in body.decode()
        assert "stargate_vdisk_read_source_bytes_per_second{" in body.decode()
    # The per-CVM series (up, duration, cvm_up, cvm_info, rejected rows) are the same with every switch.
    assert [ln for ln in lines(neither) if "vdisk_id" not in ln] == [ln for ln in lines(full) if "vdisk_id" not in ln]


def test_answers_are_written_one_at_a_time_and_by_the_deadline(cluster):
    """While one answer is being written, another waits for it (16 probes ending together do not
    hold 16 answers half-written), but never past its deadline: then it is written anyway."""
    from ioparallax.exporters.stargate import collector as exposition

    r = run(cluster, cluster.urls["cvm-1"], None)
    want = StargateCollector(r).render()
    with exposition._WRITING:  # another probe's answer being written
        t0 = time.monotonic()
        got = StargateCollector(r).render(time.monotonic() + 0.3)
        waited = time.monotonic() - t0
    assert got == want and 0.3 <= waited < 5
    done: list[float] = []
    exposition._WRITING.acquire()
    writer = threading.Thread(target=lambda: done.append(len(StargateCollector(r).render(time.monotonic() + 30))))
    writer.start()
    time.sleep(0.2)
    assert done == []  # waiting for the other answer
    exposition._WRITING.release()
    writer.join(10)
    assert done == [len(want)]
    assert exposition._WRITING.acquire(blocking=False)  # released after writing
    exposition._WRITING.release()


def test_collector_and_worker_keys_of_the_config_file(tmp_path):
    f = tmp_path / "stargate.yml"
    f.write_text("histograms: false\nsource_ratios: false\nparse_workers: 0\n")
    cfg = load_config(str(f))
    assert (cfg.histograms, cfg.source_ratios, cfg.parse_workers) == (False, False, 0)
    f.write_text("parse_workers: auto\n")
    assert load_config(str(f)).parse_workers == "auto"
    assert load_config(None).parse_workers is None and load_config(None).histograms is True
    for text, key in (
        ("histograms: 0\n", "histograms"),
        ("parse_workers: -1\n", "parse_workers"),
        ("parse_workers: true\n", "parse_workers"),
        ("parse_workers: many\n", "parse_workers"),
        ("source_ratio: false\n", "source_ratio"),
    ):
        f.write_text(text)
        with pytest.raises(ConfigError) as exc:
            load_config(str(f))
        assert str(f) in str(exc.value) and key in str(exc.value)


@pytest.mark.parametrize(("cores", "workers"), [(1, 0), (2, 1), (4, 3), (64, 4)])
def test_parse_workers_default_to_none_and_auto_is_one_per_core_beyond_the_first(cores, workers, monkeypatch):
    """Without --stargate.parse-workers or parse_workers:, pages are parsed in each probe's
    thread, whatever the cores (docs/stargate.md). ``auto``: a worker for each core the
    exporter's own process does not use (none on 1 core; at most 4, past which the exporter's
    process is the bottleneck)."""
    from ioparallax.exporters.stargate import parsepool

    monkeypatch.setattr(parsepool, "usable_cores", lambda: cores)
    assert parsepool.default_workers() == 0
    assert parsepool.auto_workers() == workers


def test_auto_workers_start_and_take_pages_only_while_probes_run_at_once(cluster):
    """parse_workers auto: a lone probe parses in its thread and starts no process; the first
    time two probes run at once the workers start, and from then on a probe that runs beside
    another hands its batches over, with the same answer as in-process."""
    pool = ParsePool(1, adaptive=True)
    try:
        target = cluster.urls["cvm-3"]
        base = run(cluster, target, None, discover=True)
        alone = run(cluster, target, pool, discover=True)
        assert pool.batches_handed == 0 and pool.pids() == [] and not pool.hand_over()
        assert lines(StargateCollector(alone).render()) == lines(StargateCollector(base).render())
        with pool.probing():  # another probe is running
            with pool.probing():  # and a third: the first time two run at once, the workers start
                deadline = time.monotonic() + 120
                while not pool.hand_over():  # in the background, without holding up a probe
                    assert time.monotonic() < deadline, "the parse workers did not start"
                    time.sleep(0.05)
            assert len(pool.pids()) == 1
            beside = run(cluster, target, pool, discover=True)
        assert pool.batches_handed >= VDISKS // 16  # every batch of 16 detail views, and main pages
        assert beside.up and not beside.detail_errors
        assert lines(StargateCollector(beside).render()) == lines(StargateCollector(base).render())
        handed = pool.batches_handed
        again = run(cluster, target, pool, discover=True)  # alone again: in its thread
        assert pool.batches_handed == handed and again.up and len(again.details) == VDISKS
    finally:
        pool.close()


def test_auto_workers_leave_a_batch_in_the_probe_when_they_are_behind(monkeypatch):
    """With QUEUED_PER_WORKER batches per worker waiting, the next batch is parsed by the probe
    itself (this process' core is then the sooner one)."""
    from ioparallax.exporters.stargate.parsepool import QUEUED_PER_WORKER

    pool = ParsePool(2, adaptive=True)
    pool._ready = True
    with pool.probing(), pool.probing():
        assert pool.hand_over()
        pool._queued = 2 * QUEUED_PER_WORKER
        assert not pool.hand_over()
        pool._queued = 2 * QUEUED_PER_WORKER - 1
        assert pool.hand_over()
    assert not pool.hand_over()  # no probe running beside


def _exporter(tmp_path: Path, config: str, *flags: str) -> tuple[ManagedProcess, str]:
    """A real stargate-exporter with ``config`` as its file, started and answering: the process and
    its base URL."""
    cfg = tmp_path / "stargate.yml"
    cfg.write_text(config)
    port = free_port()
    argv = [venv_tool("stargate-exporter"), f"--web.listen-address=127.0.0.1:{port}", f"--config.file={cfg}", *flags]
    proc = ManagedProcess("stargate-exporter", argv, tmp_path)
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", proc=proc)
    except BaseException:
        proc.stop()
        raise
    return proc, f"http://127.0.0.1:{port}"


def _probe(url: str, target: str, discover: bool = False) -> requests.Response:
    """One /probe of ``target`` through the exporter at ``url`` (discovering the other CVMs if asked)."""
    params = {"target": target, **({"discover": "true"} if discover else {})}
    return requests.get(
        f"{url}/probe", params=params, headers={"X-Prometheus-Scrape-Timeout-Seconds": "10"}, timeout=30
    )


def test_exporter_process_parses_in_its_threads_by_default(cluster, tmp_path):
    """The real command with no worker setting: no parse workers (one process), its probe answers
    as the in-process path, every detail view is read by the strict reader (counted on /metrics),
    and glibc's allocator is set up (two arenas)."""
    config = f"targets: [127.0.0.1]\ndiscovery_ports: {list(ports(cluster))}\n"
    proc, url = _exporter(tmp_path, config, "--log.level=debug")
    try:
        r = _probe(url, cluster.urls["cvm-2"])
        assert r.status_code == 200
        want = StargateCollector(run(cluster, cluster.urls["cvm-2"], None))
        assert lines(r.content) == lines(want.render())
        details = len(want.result.details)
        own = requests.get(f"{url}/metrics", timeout=10).text
        assert f'stargate_parse_detail_views_total{{reader="strict"}} {float(details)}' in own, own
        assert 'stargate_parse_detail_views_total{reader="lxml"} 0.0' in own
        assert details > 0
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert children == [], children  # no fork server, no workers, no resource tracker
    finally:
        proc.stop()
    log_text = proc.log_path.read_text()
    assert "parse_workers 0" in log_text, log_text
    assert "malloc: 2 arenas, mmap from 131072 bytes: set" in log_text, log_text


def test_exporter_process_with_auto_workers_starts_none_for_a_lone_probe(cluster, tmp_path):
    """The real command with --stargate.parse-workers=auto: a probe running alone is answered
    as in-process and starts no process (no fork server, no worker, no resource tracker)."""
    config = f"targets: [127.0.0.1]\ndiscovery_ports: {list(ports(cluster))}\n"
    proc, url = _exporter(tmp_path, config, "--stargate.parse-workers=auto", "--log.level=info")
    try:
        r = _probe(url, cluster.urls["cvm-2"], discover=True)
        assert r.status_code == 200
        want = StargateCollector(run(cluster, cluster.urls["cvm-2"], None, discover=True))
        assert lines(r.content) == lines(want.render())
        assert _children(proc.pid) == set()
    finally:
        proc.stop()
    log_text = proc.log_path.read_text()
    assert "parse_workers auto" in log_text, log_text


def test_exporter_process_with_workers_and_switches(cluster, tmp_path):
    """The real command: --stargate.parse-workers starts the workers, the --no-collector flags
    drop their families, and a probe answers as the in-process path does."""
    config = f"targets: [127.0.0.1]\ndiscovery_ports: {list(ports(cluster))}\nhistograms: true\n"
    flags = ("--stargate.parse-workers=2", "--no-collector.histograms", "--no-collector.source-ratios")
    proc, url = _exporter(tmp_path, config, *flags, "--log.level=info")
    try:
        r = _probe(url, cluster.urls["cvm-1"], discover=True)
        assert r.status_code == 200 and "stargate_up 1.0" in r.text
        assert series_per_vdisk(r.content, VDISKS) == 47
        assert (
            r.text.count("stargate_vdisk_detail_up{") == VDISKS
            and " 0.0\n" not in r.text.split("stargate_vdisk_detail_up", 1)[1].split("#", 1)[0]
        )
    finally:
        proc.stop()
    log_text = proc.log_path.read_text()
    assert "pages parsed by 2 worker processes" in log_text
    assert "collectors switched off: histograms, source-ratios" in log_text


def _children(pid: int) -> set[int]:
    """The children of ``pid``, from each of its threads' list (a thread may end while they are
    read: its children move to another thread, so the caller polls for the count it expects)."""
    out: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:  # the process is gone
        return out
    for task in tasks:
        try:
            out |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:  # the thread ended
            continue
    return out


def test_workers_exit_when_the_exporter_is_killed(tmp_path):
    """SIGKILL leaves the exporter no chance to shut its pool down: the workers (children of
    multiprocessing's fork server, which no parent-death signal reaches) watch the exporter and
    exit, and with them the fork server and the resource tracker. Nothing is left behind."""
    proc, _ = _exporter(tmp_path, "targets: [127.0.0.1]\n", "--stargate.parse-workers=2")
    try:
        deadline = time.monotonic() + 10
        while True:
            helpers = _children(proc.pid)  # the resource tracker and the fork server
            workers = set().union(*(_children(h) for h in helpers))
            if (len(helpers) == 2 and len(workers) == 2) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(helpers) == 2 and len(workers) == 2, (helpers, workers)
        os.kill(proc.pid, signal.SIGKILL)
        proc.popen.wait(timeout=10)
        left = helpers | workers
        deadline = time.monotonic() + 10
        while left and time.monotonic() < deadline:
            left = {p for p in left if Path(f"/proc/{p}").exists() and "Z" not in _state(p)}
            time.sleep(0.1)
        assert not left, f"left running after the exporter was killed: {sorted(left)}"
    finally:
        proc.stop()


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
