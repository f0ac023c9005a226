"""The project's one duration grammar (ioparallax/units.py): Prometheus' grammar checked
against the real promtool, the seconds it gives, and the older single-unit forms the exporters'
files and flags keep taking."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from ioparallax.report.promapi import parse_seconds
from ioparallax.units import parse_duration, parse_prometheus_duration, prometheus_duration_seconds
from tests.support import require_tool

UNITS = (("y", 365 * 86400), ("w", 7 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001))

# pieces that make near misses too: decimals, leading zeros, other units, upper case, no number
_piece = st.tuples(
    st.sampled_from(["0", "1", "5", "30", "90", "007", "1.5", ""]),
    st.sampled_from(["y", "w", "d", "h", "m", "s", "ms", "us", "M", "H", "x", ""]),
)
candidates = st.lists(_piece, max_size=4).map(lambda ps: "".join(n + u for n, u in ps))


def promtool_accepts(durations: list[str], tmp_path: Path) -> dict[str, bool]:
    """Which durations Prometheus takes, asked of the real promtool: one rule file per duration,
    as an alert's ``for`` (read with Prometheus' own duration parser), all in one promtool run."""
    files = {}
    for i, text in enumerate(durations):
        path = tmp_path / f"d{i}.yml"
        path.write_text(f"groups:\n- name: g\n  rules:\n  - alert: A\n    expr: vector(1)\n    for: '{text}'\n")
        files[text] = path
    out = subprocess.run(
        ["promtool", "check", "rules", *map(str, files.values())], capture_output=True, text=True, timeout=60
    )
    taken = {text: f"Checking {path}\n  SUCCESS: 1 rules found" in out.stdout for text, path in files.items()}
    for text, path in files.items():  # a file not taken is one promtool names as invalid
        assert taken[text] or f"{path}: " in out.stderr, (text, out.stdout, out.stderr)
    return taken


def needs_promtool(test):
    """The test runs promtool: it fails when promtool is missing (`make deps` installs it)."""

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        require_tool("promtool")
        return test(*args, **kwargs)

    return wrapper


@needs_promtool
def test_the_prometheus_grammar_is_what_promtool_takes(tmp_path):
    durations = [
        "1h30m",
        "500ms",
        "2d",
        "1w",
        "1y",
        "0",
        "0s",
        "1y2w3d4h5m6s7ms",
        "90s",
        "1s500ms",
        "007m",
        "1m1h",
        "5m5m",
        "30s1m",
        "1.5m",
        "5M",
        "1H",
        "",
        "m",
        "1d1",
        "5 m",
        "-5m",
        "1ms1s",
        "us",
        "250us",
        # Go's time.Duration ends at 2^63-1 ns: what promtool takes ends there too (hypothesis found "300y")
        "292y",
        "293y",
        "300y",
        "106751d23h47m16s854ms",
        "106751d23h47m16s855ms",
        "9223372036855ms",
    ]
    taken = promtool_accepts(durations, tmp_path)
    assert taken["1h30m"] and not taken["1m1h"], "the oracle itself must tell the two apart"
    assert {d: prometheus_duration_seconds(d) is not None for d in durations} == taken


@needs_promtool
@settings(max_examples=4, deadline=None)
@given(st.lists(candidates, min_size=40, max_size=40, unique=True))
def test_any_near_miss_is_taken_exactly_when_promtool_takes_it(tmp_path_factory, durations):
    taken = promtool_accepts(durations, tmp_path_factory.mktemp("durations"))
    assert {d: prometheus_duration_seconds(d) is not None for d in durations} == taken


@given(
    st.lists(st.integers(min_value=0, max_value=10_000), min_size=len(UNITS), max_size=len(UNITS)),
    st.lists(st.booleans(), min_size=len(UNITS), max_size=len(UNITS)).filter(any),
)
def test_prometheus_durations_give_their_seconds(numbers, used):
    parts = [(n, unit, mult) for n, (unit, mult), u in zip(numbers, UNITS, used) if u]
    text = "".join(f"{n}{unit}" for n, unit, _ in parts)
    seconds = sum(n * mult for n, _, mult in parts)
    if sum(n * round(mult * 1e9) for n, _, mult in parts) > 2**63 - 1:  # past Go's time.Duration
        assert prometheus_duration_seconds(text) is None
        return
    assert prometheus_duration_seconds(text) == pytest.approx(seconds)
    assert parse_duration(text) == pytest.approx(seconds)
    assert parse_duration(text.upper()) == pytest.approx(seconds), "the exporters' files take any case"
    assert parse_prometheus_duration(f" {text} ") == text


@pytest.mark.parametrize(
    "value, seconds",
    [
        ("500ms", 0.5),
        ("20s", 20),
        ("5m", 300),
        ("1h", 3600),
        ("1h30m", 5400),
        ("2d", 172800),
        ("1w", 604800),
        ("1y", 365 * 86400),
        ("1s500ms", 1.5),
        # the forms the exporters took before Prometheus' grammar, all kept
        ("1.5m", 90),
        ("250us", 0.00025),
        ("0.5s", 0.5),
        ("20S", 20),
        ("  3m ", 180),
        ("20", 20),
        ("1e3s", 1000),
        (3, 3.0),
        (0.25, 0.25),
    ],
)
def test_parse_duration_takes_both_forms(value, seconds):
    assert parse_duration(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", [True, "", "m", "5x", "1m1h", "5m5m", "inf", "nan", "1.5d", "five minutes", None])
def test_parse_duration_rejects_with_the_value_named(value):
    with pytest.raises(ValueError, match="expected a duration such as") as err:
        parse_duration(value)
    assert repr(value) in str(err.value)


@pytest.mark.parametrize("value", [90, "1.5m", "5M", "1m1h", "", None])
def test_rule_durations_are_only_prometheus_durations(value):
    with pytest.raises(ValueError, match="expected a Prometheus duration such as 30s, 1m, 5m or 1h30m"):
        parse_prometheus_duration(value)


def test_the_report_reads_durations_with_the_same_grammar():
    # the report's durations: Prometheus' scrapeInterval, --step, --start=-30m
    for text in ("15s", "1m30s", "250ms", "1.5m", "2d", "1h30m"):
        assert parse_seconds(text) == parse_duration(text)
    for bad in ("90", "-5s", "1m1h", ""):  # a unit is required: callers read a bare number themselves
        with pytest.raises(ValueError, match="expected a duration such as 30s, 5m or 1h30m"):
            parse_seconds(bad)
