"""Fixtures of the Prism tests: the simulator in-process (its clock frozen or accelerated) and
the exporter in-process on a free loopback port."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

import pytest

from ioparallax.exporters.prism.cli import make_app
from ioparallax.exporters.prism.config import load_config
from ioparallax.simulators.prism.server import PrismSimulator
from tests.support import Exporter, started_and_stopped

USER, PASSWORD = "monitor", "pr1sm-Secret!"
ENV = {"PRISM_TEST_PASSWORD": PASSWORD}
#: 15 s after a 30 s boundary of the simulated clock (1_700_000_010 is one): v2 answers are dated.
FROZEN = 1_700_000_010.0 + 15 + 30 * 1000


class AcceleratedClock:
    """Simulated seconds that run ``scale`` times faster than real ones, from ``start``."""

    def __init__(self, start: float, scale: float):
        self.start, self.scale = start, scale
        self.t0 = time.monotonic()

    def __call__(self) -> float:
        return self.start + (time.monotonic() - self.t0) * self.scale

    def sleep_until(self, sim_time: float) -> None:
        while (left := sim_time - self()) > 0:
            time.sleep(left / self.scale)


class SteppedClock:
    """Simulated seconds that move only when a test moves them: ``sleep_until`` is a jump."""

    def __init__(self, start: float):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep_until(self, sim_time: float) -> None:
        self.now = max(self.now, sim_time)


@pytest.fixture
def prism_sim():
    """start(scenario, **kw) -> a running PrismSimulator (basic auth USER/PASSWORD), stopped after."""

    def start(scenario: str = "clean-oltp", **kw) -> PrismSimulator:
        return PrismSimulator(scenario, **{"auth": (USER, PASSWORD), **kw}).start()

    yield from started_and_stopped(start)


def config_yaml(targets: list[str] | None = None, scheme: str = "http", **extra) -> str:
    lines = ["defaults:", f"  username: {USER}", "  password_env: PRISM_TEST_PASSWORD", f"  scheme: {scheme}"]
    lines += [f"  {k}: {v}" for k, v in extra.items()]
    if targets:
        lines.append("targets:")
        lines += [f"  {t}: {{}}" for t in targets]
    else:
        lines.append("allow_unlisted_targets: true")
    return "\n".join(lines) + "\n"


@pytest.fixture
def exporter(tmp_path, monkeypatch) -> Callable[..., Exporter]:
    """start(yaml_text, time_scale=1.0, **load_config flags) -> Exporter on a free loopback port."""
    started: list[Exporter] = []

    def start(yaml_text: str, time_scale: float = 1.0, env: dict[str, str] | None = None, **flags) -> Exporter:
        for k, v in {**ENV, **(env or {})}.items():
            monkeypatch.setenv(k, v)
        path = tmp_path / f"prism-{len(started)}.yml"
        path.write_text(yaml_text)
        exp = Exporter.serve(*make_app(dataclasses.replace(load_config(str(path), **flags), time_scale=time_scale)))
        started.append(exp)
        return exp

    yield start
    for exp in started:
        exp.stop()


def series(metrics: dict, name: str, **labels) -> list[float]:
    return [v for key, v in metrics.get(name, {}).items() if all(dict(key).get(k) == x for k, x in labels.items())]
