"""Ramp detection on synthetic per-second series: steps, noise, transients, gaps, user-given steps."""

from __future__ import annotations

import numpy as np
import pytest

from ioparallax.report import ramps, usl

STEP_S = 120
SETTLE_S = 80  # a 1m rate window plus a 20 s vCenter sample


def staircase(levels, step_s=STEP_S, lag_s=60, noise=0.02, seed=0, sigma=0.05, kappa=0.02, gamma=5000.0):
    """1 s samples of a ramp: concurrency jumps at each step; throughput follows X(N) through a
    1m moving mean (the rules' rate1m), so the first lag_s seconds of a step are a transient."""
    rng = np.random.default_rng(seed)
    n = np.repeat(np.asarray(levels, dtype=float), step_s)
    t = np.arange(n.size, dtype=float) + 1_700_000_000
    instant = usl.usl(np.maximum(n, 1), sigma, kappa, gamma) * (n > 0)
    instant = instant * (1 + rng.normal(0, noise, n.size))
    kernel = np.ones(lag_s) / lag_s
    rate = np.convolve(np.concatenate([np.full(lag_s - 1, instant[0]), instant]), kernel, mode="valid")
    return t, n, rate


def test_each_step_found_with_its_settled_mean_and_spread():
    t, n, x = staircase([1, 2, 3, 4, 5, 6])
    got = ramps.find_plateaus(t, n, x, settle=SETTLE_S, min_length=20)
    assert [p.concurrency for p in got] == [1, 2, 3, 4, 5, 6]
    for k, p in enumerate(got, start=1):
        truth = usl.usl(np.array([k]), 0.05, 0.02, 5000.0)[0]
        # Settled: within 1 % (the 2 % noise averaged); the transient would pull the mean by several %.
        assert p.throughput == pytest.approx(truth, rel=0.01)
        assert p.start == t[0] + (k - 1) * STEP_S + SETTLE_S
        assert p.end <= t[0] + k * STEP_S - 1
        assert 30 <= p.samples <= STEP_S - SETTLE_S
        assert 0 < p.std < 0.02 * truth  # a 1m mean of 2 % noise: well under 2 %
        assert p.q25 < p.throughput < p.q75


def test_without_settling_the_transient_biases_the_step():
    t, n, x = staircase([1, 2, 3, 4], noise=0.0)
    raw = ramps.find_plateaus(t, n, x, settle=0, min_length=20)
    settled = ramps.find_plateaus(t, n, x, settle=SETTLE_S, min_length=20)
    truth = usl.usl(np.array([2.0]), 0.05, 0.02, 5000.0)[0]
    assert settled[1].throughput == pytest.approx(truth, rel=1e-9)
    assert raw[1].throughput < 0.9 * truth  # the 1m rate still climbing from step 1


def test_noisy_concurrency_by_littles_law_still_gives_the_steps():
    # Outstanding I/Os by Little's law: 4 per VM, noisy, with single-sample spikes.
    t, n, x = staircase([1, 2, 3, 4, 5], seed=3)
    rng = np.random.default_rng(4)
    oio = 4 * n + rng.normal(0, 0.25, n.size)
    oio[rng.choice(n.size, 12, replace=False)] *= 3  # spikes a rolling median removes
    got = ramps.find_plateaus(t, oio, x, settle=SETTLE_S, min_length=20)
    assert [round(p.concurrency) for p in got] == [4, 8, 12, 16, 20]


def test_short_steps_are_transients_and_idle_is_left_out():
    t, n, x = staircase([0, 1, 2, 3, 4])
    n[2 * STEP_S + 30 : 2 * STEP_S + 70] = 7  # a 40 s excursion: never settles
    got = ramps.find_plateaus(t, n, x, settle=SETTLE_S, min_length=20)
    assert [p.concurrency for p in got] == [1, 3, 4]  # the step at 2 was cut in pieces too short to keep
    assert all(p.concurrency != 7 for p in got)


def test_a_gap_ends_a_plateau():
    t, n, x = staircase([1, 2, 3, 4])
    n[STEP_S + 90 : STEP_S + 95] = np.nan  # no samples for 5 s late in step 2
    got = ramps.find_plateaus(t, n, x, settle=SETTLE_S, min_length=20)
    assert [p.concurrency for p in got] == [1, 3, 4]  # step 2 kept only 10 s before the gap


def test_descending_and_repeated_levels_are_plateaus_too():
    t, n, x = staircase([1, 2, 3, 2, 1])
    got = ramps.find_plateaus(t, n, x, settle=SETTLE_S, min_length=20)
    assert [p.concurrency for p in got] == [1, 2, 3, 2, 1]


def test_plateaus_feed_the_usl_fit():
    t, n, x = staircase([1, 2, 3, 4, 5, 6, 7, 8], noise=0.01, seed=7)
    got = ramps.find_plateaus(t, n, x, settle=SETTLE_S, min_length=20)
    r = usl.fit([p.concurrency for p in got], [p.throughput for p in got])
    assert r.sigma.value == pytest.approx(0.05, rel=0.1)
    assert r.kappa.value == pytest.approx(0.02, rel=0.1)


def test_user_given_steps_with_and_without_concurrency():
    t, n, x = staircase([1, 2, 3, 4])
    steps = ramps.parse_steps("0, 2m, 4m, 6m")
    got = ramps.plateaus_from_steps(t, n, x, steps, range_start=t[0], range_end=t[-1], settle=SETTLE_S)
    assert [p.concurrency for p in got] == [1, 2, 3, 4]
    assert got[0].start == t[0] + SETTLE_S and got[-1].end == t[-1]
    given = ramps.plateaus_from_steps(
        t, None, x, ramps.parse_steps("0=4,120=8,240=12,360=16"), range_start=t[0], range_end=t[-1], settle=SETTLE_S
    )
    assert [p.concurrency for p in given] == [4, 8, 12, 16]
    assert [p.throughput for p in given] == [p.throughput for p in got]


@pytest.mark.parametrize(
    "text, message",
    [
        ("0,2m,x", "--steps: expected OFFSET or OFFSET=CONCURRENCY (e.g. 3m=2), got 'x'"),
        ("0=0,2m=2", "--steps: concurrency must be > 0, got '0=0'"),
        ("0,120,2m", "--steps: an offset is given twice"),
        (" , ", "--steps: no step given"),
    ],
)
def test_bad_steps_are_named(text, message):
    with pytest.raises(ValueError) as e:
        ramps.parse_steps(text)
    assert message in str(e.value)


def test_parse_steps_accepts_durations():
    assert ramps.parse_steps("3m=2,0=1,1m30s") == [ramps.Step(0, 1), ramps.Step(90, None), ramps.Step(180, 2)]


def test_mismatched_series_are_refused():
    with pytest.raises(ValueError, match="series of different lengths: 3 times, 2 concurrency, 3 throughput"):
        ramps.find_plateaus([1, 2, 3], [1, 1], [1, 2, 3], settle=0, min_length=0)


@pytest.mark.parametrize("after_step", [1, 2, 3])
def test_a_step_in_the_last_samples_stays_out_of_the_last_plateau(after_step):
    """The range ends ``after_step`` seconds after a step: the centred median there (a shorter
    window) moves less than the tolerance, so those samples would join the old level and lift its
    throughput by the new level's first instants (a CI run read a 6-VM plateau 0.7 % high)."""
    t, n, x = staircase([5, 6, 7], noise=0.0, lag_s=1)  # throughput follows each step at once
    end = 2 * STEP_S + after_step  # samples up to after_step seconds into the 7-VM step
    got = ramps.find_plateaus(t[:end], n[:end], x[:end], settle=SETTLE_S, min_length=20)
    assert [p.concurrency for p in got] == [5, 6]
    truth = usl.usl(np.array([6]), 0.05, 0.02, 5000.0)[0]
    assert got[-1].throughput == pytest.approx(truth, rel=1e-9)
    assert got[-1].end < t[2 * STEP_S]
