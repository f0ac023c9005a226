"""With a scenario origin ``o`` (period second 0 at Unix time ``o``) the guest simulator's fio records
and /proc/diskstats at wall-clock ``x`` are those at ``x - o`` with origin 0, except the record's
times, which stay the wall clock's; the stream file is replaced at the shifted period boundary."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ioparallax.simulators.guest.diskstats import GuestDiskstats
from ioparallax.simulators.guest.fio import GuestFio
from ioparallax.simulators.guest.writer import GuestWriter, vm_paths
from ioparallax.simulators.scenario import compile_scenario, load_scenario

ORIGIN = 1_700_000_913  # not a multiple of any library period
X = 1_800_000_123
TIMES = ("timestamp", "timestamp_ms", "time")


def shifted(name: str):
    sc = load_scenario(name)
    return compile_scenario(sc), compile_scenario(dataclasses.replace(sc, origin=ORIGIN))


def without_times(record: dict) -> dict:
    return {k: v for k, v in record.items() if k not in TIMES}


@pytest.mark.parametrize("name", ["scaling-ramp", "zero-heavy", "bursty-1m", "noisy-neighbour"])
def test_fio_and_diskstats_are_the_origin_0_views_shifted(name):
    plain, moved = shifted(name)
    started = X - 1234  # the simulator's start: its jobs' anchor is that period's start
    a, b = GuestFio(plain, anchor=started - ORIGIN), GuestFio(moved, anchor=started)
    assert b.anchor == a.anchor + ORIGIN
    assert moved.period_second(b.anchor) == 0
    da, db = GuestDiskstats(plain, fio=a), GuestDiskstats(moved, fio=b)
    differs = False
    for x in range(X, X + plain.period + 1, 29):
        for vm in plain.scenario.vms:
            ra, rb = a.record(vm.name, x - ORIGIN), b.record(vm.name, x)
            assert without_times(rb) == without_times(ra), (name, vm.name, x)
            assert rb["timestamp"] == x and rb["timestamp_ms"] == x * 1000  # the wall clock's
            assert db.text(vm.name, x) == da.text(vm.name, x - ORIGIN), (name, vm.name, x)
            differs = differs or without_times(b.record(vm.name, x)) != without_times(a.record(vm.name, x))
    assert differs, "the origin changed no fio record: the guest ignores it"


def test_a_windowed_job_runs_from_the_origin(tmp_path):
    # scaling-ramp's web-02 joins at period second 120: 120 s after the origin, not after the epoch.
    _, moved = shifted("scaling-ramp")
    fio = GuestFio(moved, anchor=ORIGIN + 5)
    assert fio.anchor == ORIGIN
    assert [j["jobname"] for j in fio.record("web-01", ORIGIN + 60)["jobs"]] == ["web"]
    assert fio.record("web-02", ORIGIN + 120)["jobs"] == []
    (job,) = fio.record("web-02", ORIGIN + 125)["jobs"]
    assert job["elapsed"] == 5


def test_the_stream_file_is_replaced_at_the_shifted_period_boundary(tmp_path):
    _, moved = shifted("scaling-ramp")
    writer = GuestWriter(moved, tmp_path, vms=["web-01"], anchor=ORIGIN + 960 - 3)
    writer.setup()
    stream, _ = vm_paths(tmp_path, "web-01")
    boundary = ORIGIN + 2 * 960
    for T in range(boundary - 3, boundary):
        writer.write(T)
    assert [json.loads(line)["timestamp"] for line in stream.read_text().splitlines()] == list(
        range(boundary - 3, boundary)
    )
    writer.write(boundary)  # period second 0: a new file, starting with this record
    assert [json.loads(line)["timestamp"] for line in stream.read_text().splitlines()] == [boundary]
    writer.write(boundary + 1)
    assert len(stream.read_text().splitlines()) == 2
