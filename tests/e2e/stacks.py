"""End-to-end fixtures: one real stack per library scenario, shared by every e2e module; a pytest
plugin (tests/conftest.py loads it).

``scenario_stack`` is session-scoped and parametrized over the scenario library, so pytest groups
the e2e tests by scenario and each stack serves all of them (the trace checks, the alert checks and
the dashboard queries all run against the same Prometheus). ``stack_pool`` (tests/e2e/pool.py)
starts the stacks a few ahead of their tests, so that their windows fill side by side.

Most of an e2e test's time would be waiting for a stack to age, so the session is ordered for it:
the unit tests run first and the e2e tests after them, and the pool starts with the session (its
first window of stacks and the eager ones age while the unit tests run). Scaling-ramp, whose USL
test needs its first four VM levels settled, starts with the session, its ramp's period second 0
at the stack's start (``from_start``) and its times scaled by ``TIME_SCALED_SCENARIOS`` (the four
levels have settled about 7 minutes after the start, every time), and runs last. The long-term
stack, whose test needs 165 s of history, starts with the session too. Every pooled entry is
stopped after its last test.

The stack loads rules generated from the shipped mixin config with the same windows (so rule names
match the dashboards) and short ``for`` durations, and sends Alertmanager's notifications to an
in-test webhook (``alert_sink``).
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from ioparallax.mixin.config import load_config
from ioparallax.mixin.rules.files import write_rule_files
from ioparallax.simulators.process import start as start_process
from ioparallax.simulators.scenario import list_scenarios, load_scenario, scenario_path
from ioparallax.simulators.stack import Stack
from ioparallax.simulators.stack.quick_alerts import write_quick_alert_rules
from ioparallax.yamlconf import load_yaml
from tests.e2e.pool import Entry, StackPool
from tests.support import venv_tool

# Short `for` durations so that each scenario's alerts fire within a minute of the start; windows
# stay those of the shipped config, so recording-rule names are the dashboards' names. The
# views-disagree alerts keep the shipped 10m: they judge 5m rates, which a stack a minute or two old
# covers only in part, and there a checkpoint-like workload (postgres: 15 s of every 60 s) is one
# burst more or less in the guest's window than in vCenter's lagging samples. Their firing and
# silent cases are promtool's (alerts/tests/views-alerts.test.yml).
TEST_FOR = {
    "zero_heavy": "10s",
    "cache": "10s",
    "burst": "10s",
    "misaligned_partition": "10s",
    "misaligned_io": "10s",
    "hygiene": "10s",
    "views_disagree": "10m",
    "down": "10s",
    "scrape_slow": "1m",
}


class AlertSink:
    """An Alertmanager webhook receiver: notifications are kept per URL path (one per scenario)."""

    def __init__(self) -> None:
        sink = self
        self.notifications: dict[str, list[dict[str, Any]]] = {}
        self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with sink.lock:
                    sink.notifications.setdefault(self.path.strip("/"), []).append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def firing(self, key: str) -> dict[str, list[dict[str, str]]]:
        """alertname -> label sets of the alerts last notified as firing under ``key``."""
        latest: dict[tuple, dict[str, Any]] = {}
        with self.lock:
            for note in self.notifications.get(key, []):
                for alert in note.get("alerts", []):
                    latest[tuple(sorted(alert["labels"].items()))] = alert
        out: dict[str, list[dict[str, str]]] = {}
        for alert in latest.values():
            if alert["status"] == "firing":
                out.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
        return out

    def ever_fired(self, key: str) -> set[str]:
        """Every alertname notified as firing under ``key`` so far, resolved since or not."""
        with self.lock:
            return {
                alert["labels"]["alertname"]
                for note in self.notifications.get(key, [])
                for alert in note.get("alerts", [])
                if alert["status"] == "firing"
            }

    def wait_for(self, key: str, names: set[str], timeout: float) -> dict[str, list[dict[str, str]]]:
        deadline = time.monotonic() + timeout
        while True:
            got = self.firing(key)
            if names <= set(got) or time.monotonic() > deadline:
                return got
            time.sleep(1)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="session")
def alert_sink():
    sink = AlertSink()
    yield sink
    sink.close()


@pytest.fixture(scope="session")
def test_rules_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rules")
    write_rule_files(load_config(overrides={"for": TEST_FOR}), out, "ioparallax/mixin/config.yml (e2e for-durations)")
    return out


# How many pooled entries (scenario stacks, the demo stack, the demo command) run side by side,
# besides the eager ones. Each stack takes about 0.1 of a core once started; starting one takes a
# core for a few seconds. While the unit tests run, AHEAD of them age (more would slow the unit
# tests down); then the e2e tests take 15 to 30 s per scenario and a stack needs 2 to 2.5 minutes
# of history for its report test, so the window is wider: with 6, the seventh stack in line
# (ilm-upmigration) started only once the first (the AHV stack, about 2 1/2 minutes of tests)
# was done, and its report test waited 72 s for it; 8 start before any test needs them.
AHEAD = 4


def _window() -> int:
    text = os.environ.get("IOPARALLAX_E2E_STACKS", "8")
    if not text.isdigit() or int(text) < 1:
        raise pytest.UsageError(f"IOPARALLAX_E2E_STACKS: expected a whole number of stacks, at least 1, got {text!r}")
    return int(text)


# Non-parametrized pooled fixtures: fixture name = pool key.
POOLED_FIXTURES = (
    "demo_stack",
    "no_vcenter_stack",
    "demo_command",
    "long_term_stack",
    "two_clusters_stack",
    "two_hypervisors_stack",
)

# Scenarios whose tests wait for a long history: started with the session, their tests run last
# (db-density: the report's density line needs three settled 120 s steps, about 6 minutes).
LONG_HISTORY_SCENARIOS = ("scaling-ramp", "db-density")
# Scenarios whose period starts with their stack (``ioparallax-demo --from-start``): the ramp's phase
# at the start is known, not wherever the wall clock puts it.
FROM_START_SCENARIOS = ("scaling-ramp", "db-density")
# Scenarios whose stack runs a copy of the library file with every time in it (period, each stream's
# from/to, the law's step) multiplied by a factor: scaling-ramp's USL test waits for the fourth VM's
# plateau to settle (3 steps and about 95 s: the 1m rate window, vCenter's 20 s sample, one report
# step and 10 s), the longest wait of the e2e session, which sets its length. 0.875 makes the step
# 105 s, still above the 92 s a plateau needs to count (ioparallax.report.scaling: settle + 10 s);
# every test of the scenario reads its times from the stack's trace, so they check the copy's.
# The first level is longer by a lead: the period starts with the stack, but its Prometheus' history
# only once every target was scraped (15-40 s later with the session's other stacks starting beside
# it), and the 1-VM plateau needs 92 s of it; at 105 s it was too short, so the fit waited for a
# fifth level (about 90 s more, the longest wait of the session).
# db-density (120 s steps, the report's density line needs the 1-VM level) gets the same lead only.
TIME_SCALED_SCENARIOS = {"scaling-ramp": (0.875, 40), "db-density": (1.0, 40)}

# `make demo SCENARIO=zero-heavy,<file>`: two simulated clusters in one Prometheus whose VM names,
# vdisk ids and disk serials are the same (tests/e2e/scenarios/clean-bench.yaml beside zero-heavy).
TWO_CLUSTERS = ["zero-heavy", str(Path(__file__).resolve().parent / "scenarios" / "clean-bench.yaml")]

# `make demo SCENARIO=clean-oltp@esxi,clean-oltp-ahv@ahv`: one workload on ESXi (vCenter) and on AHV
# (Prism) in one Prometheus, and bursty-1m on AHV (tests/e2e/scenarios/bursty-ahv.yaml) for an AHV
# alert and verdict that need the VM view. The library's AHV scenarios are checked on this stack
# (tests/e2e/test_e2e_ahv.py), not each on a stack of its own.
TWO_HYPERVISORS = [
    "clean-oltp@esxi",
    "clean-oltp-ahv@ahv",
    str(Path(__file__).resolve().parent / "scenarios" / "bursty-ahv.yaml") + "@ahv-bursty",
]
# The library scenarios with a stack of their own (scenario_stack): the ESXi ones.
ESXI_SCENARIOS = [s for s in list_scenarios() if not load_scenario(s).cluster.ahv]

# Scenarios also run as `make demo DEMO_ARGS=--quick-alerts` runs them (the demo's 5 s scrapes and
# 20 s vCenter probes, the quick `for` durations): the ones whose bursts meet those intervals.
DEMO_MODE_SCENARIOS = ("bursty-1m", "postgres")

_ORDER = pytest.StashKey[list]()
_LAST = pytest.StashKey[dict]()  # nodeid of an entry's last test -> pool key
_POOL = pytest.StashKey["StackPool"]()


def pool_key(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "scenario_stack" in callspec.params:
        return f"scenario:{callspec.params['scenario_stack']}"
    if callspec is not None and "demo_mode_stack" in callspec.params:
        return f"demo-mode:{callspec.params['demo_mode_stack']}"
    for name in POOLED_FIXTURES:
        if name in getattr(item, "fixturenames", ()):
            return name
    return None


def _e2e_last(items: list[pytest.Item]) -> list[pytest.Item]:
    """Unit tests first, then the e2e tests, those of the long-history scenarios last; pytest's
    grouping by scenario is kept (a stable partition)."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("e2e") is None:
            return 0
        return 2 if pool_key(item) in {f"scenario:{s}" for s in LONG_HISTORY_SCENARIOS} else 1

    return sorted(items, key=rank)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """Order the session (``_e2e_last``), then record in which order the selected tests will ask for
    pooled entries and which test is each entry's last (after pytest has grouped the tests by
    scenario and ``-k`` has deselected)."""
    items[:] = _e2e_last(items)
    order: list[str] = []
    last: dict[str, str] = {}
    for item in items:
        key = pool_key(item)
        if key:
            if key not in order:
                order.append(key)
            last[key] = item.nodeid
    config.stash[_ORDER] = order
    config.stash[_LAST] = {nodeid: key for key, nodeid in last.items()}


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """Stop a pooled entry once its last test is done (a session fixture that is not parametrized
    would keep its stack running, and its slot in the pool's window, to the end of the session)."""
    key = item.config.stash.get(_LAST, {}).get(item.nodeid)
    pool = item.config.stash.get(_POOL, None)
    if key is not None and pool is not None:
        pool.release(key)


@pytest.fixture(scope="session", autouse=True)
def _stacks_age_from_the_start(request):
    """The pool starts with the session when e2e tests are selected: its first stacks and the eager
    ones age while the unit tests run."""
    if request.config.stash.get(_ORDER, []):
        request.getfixturevalue("stack_pool").start_ahead(AHEAD)


class DemoCommand:
    """``ioparallax-demo`` running in the background, its output going to a file."""

    def __init__(self, workdir: Path, argv: list[str]) -> None:
        self.workdir = workdir
        self.output = workdir.parent / "demo-command.out"
        self.proc = start_process("ioparallax-demo", argv, self.output)
        self.popen = self.proc.popen

    def wait(self, timeout: float) -> tuple[int, str]:
        code = self.popen.wait(timeout)
        return code, self.proc.log_text()

    def stop(self) -> None:
        self.proc.stop(timeout=30)  # the demo stops what it started on SIGTERM


TEST_INTERVALS = {"scrape_interval": "2s", "evaluation_interval": "2s", "vcenter_scrape_interval": "5s"}


def _seconds(value: Any, where: str) -> float:
    text = str(value)
    if not text.endswith("s") or text.endswith("ms"):
        raise ValueError(f"{where}: expected whole seconds like '120s' to scale, got {value!r}")
    return float(text[:-1])


# The keys time_scaled_scenario knows to hold no time (besides from/to): a scenario with any other
# key (a burst's period, a DiskSPD run's length, a VM's start) is refused rather than left at the
# old pace beside scaled ones.
_TIMELESS_STREAM_KEYS = {"name", "read_iops", "write_iops", "latency", "from", "to"}
_TIMELESS_DISK_KEYS = {"unit", "guest_device", "defaults", "streams"}
_TIMELESS_DEFAULTS = {"job", "size", "random", "iodepth", "working_set", "fio_options"}


def time_scaled_scenario(name: str, factor: float, out: Path, lead: int = 0) -> Path:
    """Write to ``out`` the library scenario ``name`` with its period, every stream's ``from`` and
    ``to`` and ``expect.usl.step`` multiplied by ``factor`` (whole seconds), and every time but 0 (and
    the period) ``lead`` seconds later: what starts at 0 lasts ``lead`` seconds longer; returns
    ``out``. A key that may hold another time (``_TIMELESS_*``) is refused."""
    data = load_yaml(scenario_path(name))
    data["period"] = f"{round(_seconds(data['period'], 'period') * factor) + lead}s"
    for vm in data["vms"]:  # a VM's application or CPU may hold times (pgbench's progress_s)
        if factor != 1 and set(vm) - {"name", "disks"}:
            raise ValueError(f"{name}: {vm['name']}: cannot scale the time of {sorted(set(vm) - {'name', 'disks'})}")

    def scaled(value: Any, where: str) -> str:
        t = round(_seconds(value, where) * factor)
        return f"{t + lead if t else 0}s"

    for vm in data["vms"]:
        for disk in vm["disks"]:
            where = f"{name}: {vm['name']} {disk.get('unit')}"
            extra = (set(disk) - _TIMELESS_DISK_KEYS) | (set(disk.get("defaults", {})) - _TIMELESS_DEFAULTS)
            for stream in disk["streams"]:
                extra |= set(stream) - _TIMELESS_STREAM_KEYS
                for key in ("from", "to"):
                    if key in stream:
                        stream[key] = scaled(stream[key], f"{where} {key}")
            if extra:
                raise ValueError(f"{where}: cannot scale the time of {sorted(extra)}")
    for law in ("usl", "density"):
        expect = data.get("expect", {}).get(law)
        if expect and "step" in expect:
            expect["step"] = f"{round(_seconds(expect['step'], f'expect.{law}.step') * factor)}s"
    out.write_text(
        f"# {scenario_path(name).resolve()}, its times multiplied by {factor}"
        + (f", the first level {lead} s longer" if lead else "")
        + "\n"
        + yaml.safe_dump(data, sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    return out


def joined_at(trace: Any, vms: int) -> int:
    """The period second at which ``vms`` VMs first run I/O, by the trace (a ramp's join)."""
    for t in range(trace.period):
        if sum(1 for d in trace.disks if (x := trace.second(d, t)).read_ops + x.write_ops > 0) >= vms:
            return t
    raise AssertionError(f"the scenario never runs {vms} VMs")


def started_stack(demo_intervals: bool = False, **kwargs: Any) -> Stack:
    """A started stack, every target scraped once: 2 s scrapes and 5 s vCenter probes, or with
    ``demo_intervals`` those of `make demo` (Stack's defaults)."""
    stack = Stack(fixed_ports=False, **({} if demo_intervals else TEST_INTERVALS), **kwargs)
    stack.started_at = time.monotonic()  # for tests that wait for windows to fill
    stack.__enter__()
    try:
        stack.wait_scraped(timeout=90)
        # A component that died at start (e.g. its port taken) fails the start, not the tests later.
        dead = [p.exited() for p in stack.procs if not p.alive()]
        if dead:
            raise RuntimeError("a stack component exited at start: " + "\n".join(dead))
    except BaseException:
        stack.stop()
        raise
    return stack


def _without_vcenter(start: Any, **kwargs: Any) -> Stack:
    stack = start(**kwargs)
    try:
        (proc,) = [p for p in stack.procs if p.name == "vcenter-exporter"]
        proc.stop(timeout=30)
        stack.vcenter_stopped_at = time.monotonic()
    except BaseException:
        stack.stop()
        raise
    return stack


@pytest.fixture(scope="session")
def stack_pool(request, tmp_path_factory, test_rules_dir, alert_sink):
    entries: dict[str, Entry] = {}
    for scenario in ESXI_SCENARIOS:
        workdir = tmp_path_factory.mktemp(f"stack-{scenario}")
        source = scenario
        if scenario in TIME_SCALED_SCENARIOS:
            copy = tmp_path_factory.mktemp(f"scenario-{scenario}") / f"{scenario}.yaml"
            factor, lead = TIME_SCALED_SCENARIOS[scenario]
            source = str(time_scaled_scenario(scenario, factor, copy, lead=lead))
        entries[f"scenario:{scenario}"] = Entry(
            start=functools.partial(
                started_stack,
                scenario=source,
                workdir=workdir,
                rules_dir=test_rules_dir,
                alertmanager_webhook=f"{alert_sink.url}/{scenario}",
                from_start=scenario in FROM_START_SCENARIOS,
            ),
            stop=Stack.stop,
            eager=scenario in LONG_HISTORY_SCENARIOS,
        )
    # What `make demo` starts: the shipped rules (alerts/), no webhook.
    # Eager: tests of the report (tests/report/) use it too, after the other e2e modules.
    entries["demo_stack"] = Entry(
        start=functools.partial(started_stack, scenario="zero-heavy", workdir=tmp_path_factory.mktemp("demo")),
        stop=Stack.stop,
        eager=True,
    )
    # The same, its vCenter exporter stopped once scraped: the report's missing-view case.
    entries["no_vcenter_stack"] = Entry(
        start=functools.partial(
            _without_vcenter, started_stack, scenario="zero-heavy", workdir=tmp_path_factory.mktemp("no-vcenter")
        ),
        stop=Stack.stop,
        eager=True,
    )
    # zero-heavy with VictoriaMetrics as Prometheus' remote_write target (`--long-term`). Eager: its
    # comparison waits for 2m windows and VictoriaMetrics' 30 s latency offset (165 s of history),
    # more than the window would give it: started in line, its test waited over 2 minutes.
    entries["long_term_stack"] = Entry(
        start=functools.partial(
            started_stack,
            scenario="zero-heavy",
            workdir=tmp_path_factory.mktemp("long-term"),
            rules_dir=test_rules_dir,
            long_term=True,
        ),
        stop=Stack.stop,
        eager=True,
    )
    for fixture, scenarios, slug in (
        ("two_clusters_stack", TWO_CLUSTERS, "two-clusters"),
        ("two_hypervisors_stack", TWO_HYPERVISORS, "two-hypervisors"),
    ):
        entries[fixture] = Entry(
            start=functools.partial(
                started_stack,
                scenarios=scenarios,
                workdir=tmp_path_factory.mktemp(slug),
                rules_dir=test_rules_dir,
                alertmanager_webhook=f"{alert_sink.url}/{slug}",
            ),
            stop=Stack.stop,
        )
    command_dir = tmp_path_factory.mktemp("demo-command") / "demo"
    entries["demo_command"] = Entry(
        start=functools.partial(
            DemoCommand,
            command_dir,
            [
                venv_tool("ioparallax-demo"),
                "--scenario",
                "zero-heavy",
                "--workdir",
                str(command_dir),
                "--duration",
                "10",
                "--settle",
                "70",
                "--quick-alerts",
            ],
        ),
        stop=DemoCommand.stop,
        eager=True,
    )
    quick_rules = write_quick_alert_rules(tmp_path_factory.mktemp("quick-rules"))
    for scenario in DEMO_MODE_SCENARIOS:
        workdir = tmp_path_factory.mktemp(f"demo-mode-{scenario}")
        entries[f"demo-mode:{scenario}"] = Entry(
            start=functools.partial(
                started_stack,
                demo_intervals=True,
                scenario=scenario,
                workdir=workdir,
                rules_dir=quick_rules,
                alertmanager_webhook=f"{alert_sink.url}/demo-mode/{scenario}",
            ),
            stop=Stack.stop,
            eager=True,
        )  # their test waits minutes from the start: age from the start
    pool = StackPool(request.config.stash.get(_ORDER, []), entries, _window())
    request.config.stash[_POOL] = pool
    yield pool
    pool.close()


@pytest.fixture(scope="session", params=ESXI_SCENARIOS)
def scenario_stack(request, stack_pool) -> Stack:
    """A started demo stack for one library scenario (2 s scrapes, 5 s vCenter probes), its alerts
    sent to ``alert_sink`` under the scenario's name; started ahead by ``stack_pool``. The AHV
    scenarios run on ``two_hypervisors_stack``."""
    with stack_pool.lease(f"scenario:{request.param}") as stack:
        yield stack


@pytest.fixture(scope="session", params=DEMO_MODE_SCENARIOS)
def demo_mode_stack(request, stack_pool) -> Stack:
    """A scenario as `make demo DEMO_ARGS=--quick-alerts` runs it, its alerts sent to ``alert_sink``
    under ``demo-mode/<scenario>``; started with the pool."""
    with stack_pool.lease(f"demo-mode:{request.param}") as stack:
        yield stack


@pytest.fixture(scope="session")
def demo_stack(stack_pool) -> Stack:
    """The stack `make demo` starts (zero-heavy, the shipped rules), with test scrape intervals."""
    with stack_pool.lease("demo_stack") as thing:
        yield thing


@pytest.fixture(scope="session")
def no_vcenter_stack(stack_pool) -> Stack:
    """zero-heavy (the shipped rules) whose vCenter exporter was stopped once every target had been
    scraped (``vcenter_stopped_at``: time.monotonic())."""
    with stack_pool.lease("no_vcenter_stack") as thing:
        yield thing


@pytest.fixture(scope="session")
def long_term_stack(stack_pool) -> Stack:
    """zero-heavy (the e2e rules) with VictoriaMetrics as Prometheus' remote_write target, as
    `ioparallax-demo --long-term` starts it."""
    with stack_pool.lease("long_term_stack") as thing:
        yield thing


@pytest.fixture(scope="session")
def two_clusters_stack(stack_pool) -> Stack:
    """zero-heavy and clean-bench as two clusters in one Prometheus (the e2e rules, alerts sent to
    ``alert_sink`` under ``two-clusters``), as `make demo SCENARIO=a,b` starts them."""
    with stack_pool.lease("two_clusters_stack") as thing:
        yield thing


@pytest.fixture(scope="session")
def two_hypervisors_stack(stack_pool) -> Stack:
    """clean-oltp on ESXi (cluster esxi), clean-oltp-ahv (cluster ahv) and bursty-ahv (cluster
    ahv-bursty) in one Prometheus (the e2e rules, alerts sent to ``alert_sink`` under
    ``two-hypervisors``), as `make demo SCENARIO=clean-oltp@esxi,clean-oltp-ahv@ahv` starts them."""
    with stack_pool.lease("two_hypervisors_stack") as thing:
        yield thing


@pytest.fixture(scope="session")
def demo_command(stack_pool) -> DemoCommand:
    """``ioparallax-demo --duration 10 --settle 70 --quick-alerts``, started ahead in the background."""
    with stack_pool.lease("demo_command") as thing:
        yield thing
