"""Every query of the PromQL cookbook (docs/promql.md) runs against the scenario it names and
returns the value stated beside it (e2e); the cookbook's form is checked without a stack."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

COOKBOOK = Path(__file__).resolve().parents[2] / "docs" / "promql.md"
ENTRY = re.compile(
    r"<!-- scenario: (?P<scenario>[\w-]+); expect: (?P<expect>.+?) -->\n```promql\n(?P<query>.*?)```", re.S
)


def cookbook() -> list[tuple[str, str, str]]:
    text = COOKBOOK.read_text()
    entries = [(m["scenario"], m["expect"].strip(), m["query"].strip()) for m in ENTRY.finditer(text)]
    assert len(entries) == text.count("```promql"), "every promql block of the cookbook states its scenario and value"
    return entries


def satisfies(expect: str, v: float) -> bool:
    # forms: "a <= value <= b", "value >= x", "value > x", "value == x", "value < x"
    m = re.fullmatch(r"([\d.e+-]+) <= value <= ([\d.e+-]+)", expect)
    if m:
        return float(m[1]) <= v <= float(m[2])
    m = re.fullmatch(r"value (<=|>=|==|<|>) ([\d.e+-]+)", expect)
    assert m, f"cannot read the expectation {expect!r}"
    x = float(m[2])
    return {"<=": v <= x, ">=": v >= x, "==": v == pytest.approx(x), "<": v < x, ">": v > x}[m[1]]


def test_cookbook_entries_are_well_formed():
    from ioparallax.simulators.scenario import list_scenarios

    entries = cookbook()
    assert len(entries) >= 15
    assert {s for s, _, _ in entries} <= set(list_scenarios())
    assert satisfies("0.33 <= value <= 0.39", 0.357) and not satisfies("value >= 3", 2.9)


@pytest.mark.e2e
def test_cookbook_queries_return_their_values(scenario_stack):
    name = scenario_stack.trace.scenario.name
    entries = [(q, e) for s, e, q in cookbook() if s == name]
    if not entries:
        pytest.skip(f"no cookbook query names {name}")
    pending = dict(entries)
    deadline = max(time.monotonic() + 30, scenario_stack.started_at + 150)
    last: dict[str, object] = {}
    while pending and time.monotonic() < deadline:
        for query, expect in list(pending.items()):
            res = scenario_stack.query(query)
            values = [float(r["value"][1]) for r in res]
            last[query] = values
            if values and all(satisfies(expect, v) for v in values):
                del pending[query]
        if pending:
            time.sleep(3)
    assert not pending, "\n".join(f"{q}\n  expected {e}, got {last.get(q)}" for q, e in pending.items())
