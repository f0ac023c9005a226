"""The long-term store gives the same answers as Prometheus.

One zero-heavy stack with ``long_term=True`` (what ``ioparallax-demo --long-term`` starts): Debian's
VictoriaMetrics is Prometheus' remote_write target for every scraped and every recorded series.
Once the windows are whole, every dashboard query (panels and variables, with the variables of
the first VM disk all three views know) and every PromQL cookbook query (docs/promql.md) is run
as an instant query against Prometheus and against VictoriaMetrics' Prometheus-compatible API at
the same evaluation time, and the two answers must hold the same series (names and labels) with
the same values.

Tolerance:

- A query without rate()/irate()/increase() reads stored samples only (gauges, info series, the
  recorded series, ALERTS) and both stores pick the same last sample at or before the evaluation
  time: equal to 1e-9 relative (the float's text form).
- A query with rate()/irate()/increase() of raw counters is compared to ``2 s / W`` relative, where
  W is its shortest range window and s the scrape interval of the counters it reads (fio 1 s,
  vCenter 5 s, the others 2 s in the e2e stacks). Prometheus' rate is the increase between the
  first and last samples inside the window, extrapolated to the window's edges; MetricsQL's rate
  does not extrapolate: it is the increase from the last sample before the window to the last one
  in it, over the time between them. Both read the same samples but for the one scrape interval at
  the window's start, so a steady counter gives equal rates (fio's IOPS, vCenter's counters) and
  one whose increments vary (fio's latency histogram buckets, 1.7 % seen) differs by about one
  interval's share of the window, on either side: 2 s / W. The cookbook's burst query takes
  rate() over 4 s windows of 1 s fio scrapes: 50 %. A histogram's bucket or count series steps by
  whole events, and a bucket the load reaches a few times a minute can have all of a window's
  difference in that one interval: a query that only adds rates of such series (no ratio, product
  or quantile) may differ by up to 2 events per window for each series it reads, 2 n / W absolute.
- NaN: MetricsQL leaves NaN values out of its answers; a Prometheus series whose value is NaN
  (0/0) counts as no answer.

Any other difference fails: a query with data in one store and none in the other, a series in
one and not the other, an error from either. The evaluation time is 35 s in the past
(VictoriaMetrics serves samples older than its -search.latencyOffset, 30 s by default), after
Prometheus reports having sent past it, and at least 2 min and a few scrapes after the start (the
cookbook's longest window; before that Prometheus' rate over a window the series only partly
covers is diluted, MetricsQL's is not).

The PoC report (ioparallax/report) made from VictoriaMetrics over the last 2 minutes must match
the one made from Prometheus: the same text (verdicts, VM disks, sections) with what names the
source blanked, and every printed number within 5 % (numbers printed from 1 min rates: 2 s / 1 min
and rounding); the figures are drawn from the same series and are not compared.
"""

from __future__ import annotations

import difflib
import math
import re
import time
from typing import Any

import pytest
import requests
import yaml

from ioparallax.mixin.queries import expressions, load_dashboards, substitute
from ioparallax.simulators.stack import Stack
from tests.e2e.test_e2e_dashboards import joined_vm_disk
from tests.e2e.test_e2e_promql import cookbook
from tests.mixin.dashboards.promql import rate_calls

pytestmark = pytest.mark.e2e

EVAL_LAG_S = 35  # VictoriaMetrics' -search.latencyOffset (30 s) and a margin
LONGEST_WINDOW_S = 120  # the cookbook's rate(...[2m])
EXACT = 1e-9

Series = dict[tuple[tuple[str, str], ...], float]


def instant(base: str, promql: str, t: float) -> Series:
    """An instant query's answer: label set (with __name__) -> value, NaN values left out."""
    r = requests.get(f"{base}/api/v1/query", params={"query": promql, "time": f"{t:.3f}"}, timeout=30)
    assert r.status_code == 200, f"{base}: HTTP {r.status_code} for {promql}: {r.text[:300]}"
    data = r.json()["data"]
    if data["resultType"] == "scalar":
        rows = [({}, data["result"][1])]
    else:
        rows = [(x["metric"], x["value"][1]) for x in data["result"]]
    out = {tuple(sorted(m.items())): float(v) for m, v in rows}
    return {k: v for k, v in out.items() if not math.isnan(v)}


def seconds(duration: str) -> float:
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration)
    assert parts, f"not a duration: {duration!r}"
    return sum(float(n) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[u] for n, u in parts)


# A histogram's bucket and count series count events: a bucket the load reaches a few times a
# minute steps by whole events, so the one scrape interval the stores read differently can hold all
# of a window's difference (Prometheus 0.034/s, VictoriaMetrics 0.05/s: one event in a minute).
EVENT_COUNTER = re.compile(r"_(bucket|count)$")


def event_tolerance(promql: str, base: str, t: float) -> float:
    """Absolute tolerance for a query that only adds rates of event counters (no ratio, product or
    quantile): up to 2 events a window for each series read (see the module's docstring); 0 else."""
    if any(op in promql for op in ("/", "*", "histogram_quantile", "quantile", "topk", "bottomk")):
        return 0.0
    total = 0.0
    for arg in rate_calls(promql):
        name = re.match(r"\s*([a-zA-Z_:][\w:]*)", arg)
        window = re.search(r"\[([^\]:]+)[\]:]", arg)
        if not (name and window and EVENT_COUNTER.search(name.group(1))):
            return 0.0
        selector = arg[: window.start()]
        series = sum(instant(base, f"count({selector})", t).values())
        total += 2 * series / seconds(window.group(1))
    return total


def tolerance(promql: str, stack: Stack) -> float:
    """Relative tolerance for ``promql`` (see the module's docstring)."""
    tol = EXACT
    for arg in rate_calls(promql):
        window = re.search(r"\[([^\]:]+)[\]:]", arg)
        assert window, f"a rate() without a range window in {promql}"
        name = re.match(r"\s*([a-zA-Z_:][\w:]*)", arg)
        metric = name.group(1) if name else ""
        scrape = (
            stack.fio_scrape_interval or stack.scrape_interval
            if metric.startswith("fio_")
            else stack.vcenter_scrape_interval
            if metric.startswith("vcenter_")
            else stack.scrape_interval
        )
        tol = max(tol, 2 * seconds(scrape) / seconds(window.group(1)))
    return tol


def differences(prom: Series, store: Series, tol: float, events: float = 0.0) -> list[str]:
    out = [f"only in Prometheus: {dict(k)} = {prom[k]}" for k in prom.keys() - store.keys()]
    out += [f"only in VictoriaMetrics: {dict(k)} = {store[k]}" for k in store.keys() - prom.keys()]
    for k in prom.keys() & store.keys():
        a, b = prom[k], store[k]
        if not (a == b or math.isclose(a, b, rel_tol=tol, abs_tol=max(1e-12, events))):
            out.append(
                f"{dict(k)}: Prometheus {a!r}, VictoriaMetrics {b!r} (tolerance {tol:.3g}"
                + (f", or {events:.3g} for events" if events else "")
                + ")"
            )
    return out


def remote_write_sent(stack: Stack) -> float:
    """The newest sample timestamp Prometheus has sent to VictoriaMetrics (from its own /metrics:
    the stack's Prometheus does not scrape itself)."""
    text = requests.get(stack.urls["prometheus"] + "/metrics", timeout=10).text
    m = re.search(
        r'^prometheus_remote_storage_queue_highest_sent_timestamp_seconds\{[^}]*remote_name="victoria-metrics"'
        r"[^}]*\} (\S+)$",
        text,
        re.M,
    )
    return float(m.group(1)) if m else 0.0


def wait_sent_past(stack: Stack, t: float, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (sent := remote_write_sent(stack)) < t + 2:
        assert time.monotonic() < deadline, (
            f"Prometheus has sent samples up to {sent} only, not past {t}, to "
            f"{stack.urls['victoria-metrics']} in {timeout:.0f} s"
        )
        time.sleep(1)


def the_queries(stack: Stack) -> list[tuple[str, str]]:
    values = joined_vm_disk(stack)
    values.setdefault("cluster", ".*")  # the dashboards' "All" (allValue .*)
    dashboards = [(e.where, substitute(e.expr, values)) for e in expressions(load_dashboards())]
    recipes = [(f"docs/promql.md ({scenario}): {query.splitlines()[0]}", query) for scenario, _, query in cookbook()]
    return dashboards + recipes


def test_victoria_metrics_answers_every_dashboard_and_cookbook_query_as_prometheus(long_term_stack):
    stack = long_term_stack
    store = stack.urls["victoria-metrics"]
    queries = the_queries(stack)
    # Windows whole at the evaluation time, and a few scrapes more.
    wait = stack.started_at + LONGEST_WINDOW_S + 10 + EVAL_LAG_S - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    t = math.floor(time.time()) - EVAL_LAG_S
    wait_sent_past(stack, t)

    failures: list[str] = []
    answered = loose = 0
    for where, promql in queries:
        tol = tolerance(promql, stack)
        prom, lts = instant(stack.urls["prometheus"], promql, t), instant(store, promql, t)
        answered += bool(prom)
        loose += tol > EXACT and bool(prom)
        diff = differences(prom, lts, tol)
        if diff and tol > EXACT:  # a rate of sparse events: whole events per window, not a share
            diff = differences(prom, lts, tol, event_tolerance(promql, stack.urls["prometheus"], t))
        if diff:
            failures.append(f"{where}\n    {promql}\n    " + "\n    ".join(diff[:5]))
    assert not failures, (
        f"{len(failures)} of {len(queries)} queries differ between Prometheus and "
        f"VictoriaMetrics at {t}:\n" + "\n".join(failures)
    )
    # Most queries must have data, or the comparison proves little: zero-heavy answers all but a
    # few dashboard queries and the cookbook's queries about other scenarios' disks.
    assert len(queries) >= 150 and answered >= 0.85 * len(queries), (answered, len(queries))
    assert loose >= 20, loose  # the rate() queries were compared, not skipped


def test_raw_and_recorded_series_reach_victoria_metrics(long_term_stack):
    stack = long_term_stack
    store = stack.urls["victoria-metrics"]
    t = math.floor(time.time()) - EVAL_LAG_S
    wait_sent_past(stack, t)
    # Recorded series are named level:metric:operations; scraped ones have no colon.
    counts = {}
    for kind, selector in (("raw", '{__name__=~"[^:]+"}'), ("recorded", '{__name__=~".+:.+"}')):
        promql = f"count({selector})"
        counts[kind] = instant(stack.urls["prometheus"], promql, t)
        assert instant(store, promql, t) == counts[kind], kind
    assert counts["raw"][()] > 500 and counts["recorded"][()] > 50, counts
    metrics: dict[str, Any] = {}
    for line in requests.get(f"{store}/metrics", timeout=10).text.splitlines():
        if line.startswith('vm_rows_inserted_total{type="promremotewrite"}'):
            metrics["rows"] = float(line.split()[-1])
    assert metrics.get("rows", 0) > 0, "VictoriaMetrics counted no remote-write rows"


def test_the_stack_runs_victoria_metrics_in_its_run_dir_and_reports_it(long_term_stack):
    stack = long_term_stack
    store = stack.urls["victoria-metrics"]
    cfg = yaml.safe_load((stack.workdir / "prometheus.yml").read_text())
    [rw] = cfg["remote_write"]
    assert rw["url"] == f"{store}/api/v1/write" and "write_relabel_configs" not in rw
    assert store.startswith("http://127.0.0.1:")
    assert any((stack.workdir / "victoria-metrics-data").iterdir())
    pid = int((stack.workdir / "pids" / "victoria-metrics.pid").read_text())
    [proc] = [p for p in stack.procs if p.name == "victoria-metrics"]
    assert proc.popen.pid == pid and proc.alive()
    report = stack.report()
    assert f"query URL (Grafana data source): {store}" in report
    received = re.search(r"samples received so far: ([\d,]+)", report)
    assert received and int(received.group(1).replace(",", "")) > 0, report


NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?")
REPORT_TOLERANCE = 0.05  # a number printed from a rate: 2 s / 1 min windows (see above), rounded


def report_lines(html: str, source_url: str) -> list[str]:
    """The report's text, figures left out (they are drawn from the same series as the numbers),
    with what names the source (its URL, its version, its query count) and the time it was made
    blanked."""
    html = re.sub(r"<svg.*?</svg>|<style.*?</style>|<script.*?</script>", "", html, flags=re.S)
    html = re.sub(r"data:[^\"']+", "", html).replace(source_url, "[source]")
    lines = [line.strip() for line in re.sub(r"<[^>]+>", "\n", html).splitlines() if line.strip()]
    lines = [re.sub(r"generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "generated [time]", line) for line in lines]
    return [re.sub(r"^\d+ Prometheus queries", "[n] Prometheus queries", line) for line in lines]


def test_the_poc_report_made_from_victoria_metrics_matches_the_one_from_prometheus(long_term_stack):
    from ioparallax.report.report import make_report

    stack = long_term_stack
    end = math.floor(time.time()) - EVAL_LAG_S
    wait_sent_past(stack, end)
    start = end - LONGEST_WINDOW_S
    prom = make_report(stack.urls["prometheus"], start, end)
    lts = make_report(stack.urls["victoria-metrics"], start, end)
    assert (lts.disks, lts.missing_views) == (prom.disks, prom.missing_views) and prom.disks > 0
    a = report_lines(prom.html, stack.urls["prometheus"])
    b = report_lines(lts.html, stack.urls["victoria-metrics"])
    # Prometheus names its version in the versions table; VictoriaMetrics' API has no buildinfo.
    version = requests.get(stack.urls["prometheus"] + "/api/v1/status/buildinfo", timeout=10).json()["data"]["version"]
    a = [line.replace(version, "[version]") for line in a]
    b = [line.replace("not exposed by the query API", "[version]") for line in b]
    assert len(a) == len(b), "\n".join(difflib.unified_diff(a, b, "Prometheus", "VictoriaMetrics", lineterm=""))
    for x, y in zip(a, b):
        assert NUMBER.sub("#", x) == NUMBER.sub("#", y), (x, y)
        for u, v in zip(NUMBER.findall(x), NUMBER.findall(y)):
            u, v = float(u.replace(",", "")), float(v.replace(",", ""))
            assert math.isclose(u, v, rel_tol=REPORT_TOLERANCE, abs_tol=1e-9), (x, y)
