"""The e2e stack pool (tests/e2e/pool.py) with stand-in entries: what it starts when, and that it
stops everything. Runs without starting any process (no ``e2e`` marker)."""

from __future__ import annotations

import threading

import pytest

from tests.e2e.pool import Entry, StackPool


class Recorder:
    def __init__(self) -> None:
        self.started: list[str] = []
        self.stopped: list[str] = []
        self.lock = threading.Lock()

    def entry(self, key: str, fail: bool = False, eager: bool = False) -> Entry:
        def start() -> str:
            with self.lock:
                self.started.append(key)
            if fail:
                raise RuntimeError(f"{key} would not start")
            return f"thing-{key}"

        def stop(thing: str) -> None:
            assert thing == f"thing-{key}"
            with self.lock:
                self.stopped.append(key)

        return Entry(start=start, stop=stop, eager=eager)


def pool_of(rec: Recorder, order: list[str], window: int, **special: dict) -> StackPool:
    keys = set(order) | set(special)
    return StackPool(order, {k: rec.entry(k, **special.get(k, {})) for k in keys}, window)


def test_keeps_window_entries_ahead_in_test_order():
    rec = Recorder()
    pool = pool_of(rec, ["a", "b", "c", "d"], window=2)
    assert rec.started == []  # nothing before the first test asks
    assert pool.get("a") == "thing-a"
    pool.get("b")
    assert sorted(rec.started) == ["a", "b"]  # a and its next in line, not c
    pool.release("a")
    assert pool.get("c") == "thing-c"
    assert rec.stopped == ["a"]
    assert sorted(rec.started) == ["a", "b", "c"]
    pool.release("b")
    pool.release("c")
    pool.get("d")
    pool.close()
    assert sorted(rec.stopped) == ["a", "b", "c", "d"]


def test_close_stops_entries_started_for_tests_that_never_ran():
    rec = Recorder()
    pool = pool_of(rec, ["a", "b", "c"], window=3)
    pool.get("a")
    pool.close()
    assert sorted(rec.started) == ["a", "b", "c"]
    assert sorted(rec.stopped) == ["a", "b", "c"]


def test_a_start_failure_is_raised_in_the_test_that_asks_and_nothing_is_stopped():
    rec = Recorder()
    pool = pool_of(rec, ["a", "b"], window=2, b={"fail": True})
    pool.get("a")
    with pytest.raises(RuntimeError, match="b would not start"):
        pool.get("b")
    pool.release("b")
    pool.close()
    assert rec.stopped == ["a"]


def test_eager_entries_start_with_the_pool_outside_the_window():
    rec = Recorder()
    pool = pool_of(rec, ["a", "b", "cmd"], window=1, cmd={"eager": True})
    assert pool.get("cmd") == "thing-cmd"
    pool.get("a")
    assert sorted(rec.started) == ["a", "cmd"]  # the eager entry did not take a's slot
    pool.release("a")
    pool.get("b")
    pool.close()
    assert sorted(rec.stopped) == ["a", "b", "cmd"]


def test_an_entry_no_test_asks_for_is_never_started_and_a_released_one_is_not_restarted():
    rec = Recorder()
    pool = pool_of(rec, ["a"], window=4, unused={})
    pool.get("a")
    pool.release("a")
    with pytest.raises(RuntimeError, match="already stopped"):
        pool.get("a")
    pool.close()
    assert rec.started == ["a"]


def test_lease_releases_when_the_block_ends():
    rec = Recorder()
    pool = pool_of(rec, ["a", "b"], window=1)
    with pool.lease("a") as thing:
        assert thing == "thing-a"
        assert rec.stopped == []
    assert rec.stopped == ["a"]
    pool.close()


def test_start_ahead_starts_the_first_window_entries_before_any_test_asks():
    rec = Recorder()
    pool = pool_of(rec, ["a", "b", "c"], window=2)
    pool.start_ahead()
    pool.executor.shutdown(wait=True)  # the starts run in the background: let them finish
    assert sorted(rec.started) == ["a", "b"]  # not c: it waits for a slot
    pool.close()
    assert sorted(rec.stopped) == ["a", "b"]


def test_a_second_release_stops_nothing_again():
    rec = Recorder()
    pool = pool_of(rec, ["a"], window=1)
    pool.get("a")
    pool.release("a")  # after the entry's last test
    pool.release("a")  # and again when its fixture ends
    pool.close()
    assert rec.stopped == ["a"]


def test_start_ahead_can_start_fewer_than_the_window():
    rec = Recorder()
    pool = pool_of(rec, ["a", "b", "c", "d"], window=3)
    pool.start_ahead(1)
    pool.executor.shutdown(wait=True)
    assert rec.started == ["a"]
    pool.close()
