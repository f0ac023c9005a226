"""The USL fit against published fits (R package usl, github.com/smoeding/usl) and its degenerate cases.

Dataset values and expected numbers are facts from the usl package:
- specsdm91 and raytracer: the values of data/specsdm91.rda and data/raytracer.rda (Gunther,
  Guerrilla Capacity Planning, 2007); the same tables are in the book.
- Expected coefficients, standard errors, peak, limit: tests/*.Rout.save and README.md of the
  package (version 3.x, which fits gamma with alpha = sigma and beta = kappa, as fit() does by default).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ioparallax.report import usl

# data/specsdm91.rda: Sun SPARCcenter 2000 in SPEC SDM91, load (users) -> scripts per hour.
SPECSDM91_N = [1, 18, 36, 72, 108, 144, 216]
SPECSDM91_X = [64.9, 995.9, 1652.4, 1853.2, 1828.9, 1775.0, 1702.2]
# data/raytracer.rda: BRL-CAD ray tracer on an SGI Origin 2000, processors -> operations per second.
RAYTRACER_N = [1, 4, 8, 12, 16, 20, 24, 28, 32, 48, 64]
RAYTRACER_X = [20, 78, 130, 170, 190, 200, 210, 230, 260, 280, 310]


def sig(v: float, digits: int = 3) -> float:
    """R's signif()."""
    if v == 0:
        return 0.0
    return round(v, digits - 1 - int(math.floor(math.log10(abs(v)))))


def test_specsdm91_matches_r_usl_summary():
    # README.md / tests/summary.Rout.save: alpha 0.0277285 (se 0.0091217), beta 0.0001044
    # (se 0.0000199), gamma 89.9952330 (se 14.2134894), residual standard error 82.8 on 4 df.
    r = usl.fit(SPECSDM91_N, SPECSDM91_X)
    assert r.ok
    assert sig(r.sigma.value) == 0.0277
    assert sig(r.kappa.value) == 0.000104
    assert sig(r.gamma.value) == 90.0
    assert r.gamma.value == pytest.approx(89.9952330, rel=1e-5)
    assert sig(r.sigma.stderr) == 0.00912
    assert sig(r.kappa.stderr) == 0.0000199
    assert sig(r.gamma.stderr) == 14.2
    assert r.df == 4
    assert sig(r.residual_se) == 82.8  # tests/sigma.Rout.save: signif(sigma(u), 3) 82.8


def test_specsdm91_peak_and_limit_match_r_usl():
    r = usl.fit(SPECSDM91_N, SPECSDM91_X)
    # tests/peak-scalability.R: peak.scalability(u) = 96.51956; summary: peak throughput 1884.
    assert r.peak_n == pytest.approx(96.51956, rel=1e-4)
    assert sig(r.peak_x, 4) == 1884
    # tests/limit-scalability.R: limit.scalability(u) = 3245.589 (gamma / alpha, Amdahl's asymptote).
    assert r.amdahl_x == pytest.approx(3245.589, rel=1e-4)
    assert r.statement.startswith("Throughput at 216 is 8 % of linear (2.77 % contention, 0.0104 % coherency)")
    assert "peaked at about 1,880 near 96.5" in r.statement


def test_specsdm91_efficiency_matches_r_usl():
    # tests/efficiency.Rout.save: efficiency = X / gamma / N at each load, e.g. 0.7211 at 1, 0.0876 at 216.
    r = usl.fit(SPECSDM91_N, SPECSDM91_X)
    eff = np.asarray(SPECSDM91_X) / r.gamma.value / np.asarray(SPECSDM91_N)
    assert [sig(e, 3) for e in eff] == [0.721, 0.615, 0.51, 0.286, 0.188, 0.137, 0.0876]


def test_raytracer_first_six_matches_r_usl_coefficients_and_intervals():
    # tests/confint.Rout.save: raytracer[1:6]: alpha 0.02444, beta 0.00163, gamma 20.85605;
    # confint(u): alpha 0.00754 .. 0.04135, beta 0.00110 .. 0.00215, gamma 19.26717 .. 22.44492.
    r = usl.fit(RAYTRACER_N[:6], RAYTRACER_X[:6])
    assert (sig(r.sigma.value), sig(r.kappa.value), sig(r.gamma.value)) == (0.0244, 0.00163, 20.9)
    assert r.gamma.value == pytest.approx(20.85605, rel=1e-5)
    # R's usl widens the standard error by qt(level, n - 1) (a one-sided quantile on n - 1 df);
    # fit() uses the two-sided quantile on n - 3 df. Same standard errors, so R's numbers follow:
    t_r = stats.t.ppf(0.95, len(RAYTRACER_N[:6]) - 1)
    assert sig(r.sigma.value - t_r * r.sigma.stderr) == 0.00754
    assert sig(r.sigma.value + t_r * r.sigma.stderr) == 0.0414
    assert sig(r.kappa.value - t_r * r.kappa.stderr) == 0.0011
    assert sig(r.kappa.value + t_r * r.kappa.stderr) == 0.00215
    assert sig(r.gamma.value - t_r * r.gamma.stderr) == 19.3
    assert sig(r.gamma.value + t_r * r.gamma.stderr) == 22.4
    # ... and ours is the textbook two-sided interval on n - p degrees of freedom.
    t = stats.t.ppf(0.975, 3)
    assert r.kappa.low == pytest.approx(r.kappa.value - t * r.kappa.stderr)
    assert r.kappa.high == pytest.approx(r.kappa.value + t * r.kappa.stderr)
    assert r.sigma.low == 0.0  # clipped to the bound: sigma - t se < 0


def test_raytracer_first_five_matches_r_usl():
    # tests/warn-accuracy.Rout.save (digits=1): alpha 0.028, beta 0.001, gamma 21.059.
    r = usl.fit(RAYTRACER_N[:5], RAYTRACER_X[:5])
    assert (sig(r.sigma.value, 2), sig(r.kappa.value, 1), round(r.gamma.value, 3)) == (0.028, 0.001, 21.059)


def test_exact_curve_of_r_usl_coef_test_is_recovered():
    # tests/coef.Rout.save: these points give alpha 0.02, beta 0.02, gamma 1.00.
    r = usl.fit([1, 2, 4, 6, 8, 10], [1, 1.8868, 3.0769, 3.5294, 3.5398, 3.3557])
    assert (sig(r.sigma.value), sig(r.kappa.value), sig(r.gamma.value)) == (0.02, 0.02, 1.0)
    assert r.r_squared == pytest.approx(1.0, abs=1e-8)
    assert r.peak_n == pytest.approx(math.sqrt(0.98 / 0.02), rel=1e-3)


def test_xray_like_ramp_states_percent_linear_and_extrapolated_peak():
    # The shape of issue 12's example: 0.074 % contention, peak near 600 outstanding I/Os.
    sigma, kappa, gamma = 0.00074, (1 - 0.00074) / 600**2, 2500.0
    n = np.array([4, 8, 16, 32, 64, 128])
    r = usl.fit(n, usl.usl(n, sigma, kappa, gamma), unit="IO/s", what="outstanding I/Os")
    assert r.sigma.value == pytest.approx(sigma, rel=1e-4)
    assert r.peak_n == pytest.approx(600, rel=1e-3)
    assert r.linear_share == pytest.approx(1 / (1 + sigma * 127 + kappa * 128 * 127))
    assert "0.0740 % contention" in r.statement
    assert "peak of about" in r.statement and "600 outstanding I/Os" in r.statement
    assert any("extrapolated well beyond the largest measured 128" in note for note in r.notes)


@pytest.mark.parametrize("seed", range(5))
def test_noisy_points_give_intervals_that_cover_the_truth(seed):
    rng = np.random.default_rng(seed)
    sigma, kappa, gamma = 0.05, 0.002, 5000.0
    n = np.repeat(np.arange(1, 13), 3).astype(float)
    x = usl.usl(n, sigma, kappa, gamma) * (1 + rng.normal(0, 0.01, n.size))
    r = usl.fit(n, x)
    assert r.ok and r.r_squared > 0.99
    for c, truth in ((r.sigma, sigma), (r.kappa, kappa), (r.gamma, gamma)):
        assert c.low <= truth <= c.high, (c, truth)


def test_gamma_fixed_normalises_on_the_smallest_step():
    n = np.array([2, 4, 6, 8, 10, 12])
    x = usl.usl(n, 0.03, 0.001, 100.0)
    r = usl.fit(n, x, gamma_fixed=True)
    assert r.gamma_fixed and r.gamma.stderr is None
    assert r.gamma.value == pytest.approx(x[0] / 2)  # X(2) / 2, not the true 100
    assert r.sigma.value > 0 and r.kappa.value > 0
    free = usl.fit(n, x)
    assert free.gamma.value == pytest.approx(100.0, rel=1e-6)
    assert free.sigma.value == pytest.approx(0.03, rel=1e-5)


# -- degenerate ramps: a statement, never a curve ----------------------------------------------


def test_fewer_than_four_levels_gives_no_fit():
    r = usl.fit([1, 2, 3, 3], [10, 19, 27, 26], unit="IO/s", what="VMs")
    assert not r.ok and r.sigma is None
    assert r.statement == (
        "No scalability fit: 3 concurrency levels measured, at least 4 are needed "
        "(three coefficients and one more to judge them); run a longer ramp."
    )
    with pytest.raises(ValueError, match="no USL curve"):
        r.predict([1, 2])


@pytest.mark.parametrize("x", [[5000, 5000, 5010, 4990], [5000, 4500, 4000, 3500]])
def test_flat_or_falling_ramp_gives_no_fit(x):
    r = usl.fit([1, 2, 3, 4], x, unit="IO/s", what="VMs")
    assert not r.ok
    assert "throughput does not rise with concurrency (5,000 IO/s at 1 VM," in r.statement
    assert "saturated from the first step" in r.statement


def test_no_retrograde_term_means_no_peak_but_a_ceiling():
    n = np.arange(1, 9)
    r = usl.fit(n, usl.usl(n, 0.1, 0.0, 1000.0), unit="IO/s", what="VMs")
    assert r.ok and r.kappa.value == 0.0 and r.kappa.at_bound
    assert r.peak_n is None and r.peak_x is None
    assert r.amdahl_x == pytest.approx(10000.0, rel=1e-6)
    assert "never falls" in r.statement and "10,000 IO/s" in r.statement


def test_linear_ramp_has_neither_peak_nor_ceiling():
    r = usl.fit([1, 2, 3, 4, 5], [100, 200, 300, 400, 500], unit="IO/s", what="VMs")
    assert r.ok and r.sigma.at_bound and r.kappa.at_bound
    assert r.peak_n is None and r.amdahl_x is None
    assert r.linear_share == pytest.approx(1.0)
    assert "no limit shows within the measured range" in r.statement


def test_coherency_without_contention_still_has_a_peak():
    n = np.arange(1, 9)
    r = usl.fit(n, usl.usl(n, 0.0, 0.01, 1000.0))
    assert r.sigma.value == 0.0 and r.amdahl_x is None
    assert r.peak_n == pytest.approx(10.0, rel=1e-4)


def test_four_points_warn_of_wide_intervals():
    n = np.array([1, 2, 3, 4])
    r = usl.fit(n, usl.usl(n, 0.1, 0.02, 100.0) * np.array([1, 1.01, 0.99, 1.0]))
    assert r.ok and r.df == 1
    assert any("intervals rest on 1 residual degree of freedom" in note for note in r.notes)


@pytest.mark.parametrize(
    "n, x, message",
    [
        ([1, 2], [1], "2 concurrency values but 1 throughput values"),
        ([1, 0, 2, 3], [1, 1, 2, 3], "point 2: concurrency must be > 0, got 0"),
        ([1, 2, 3, 4], [1, -2, 2, 3], "point 2: throughput must be >= 0, got -2"),
        ([1, 2, float("nan"), 4], [1, 2, 3, 4], "point 3: concurrency nan and throughput 3.0 must be numbers"),
    ],
)
def test_bad_points_raise_a_named_error(n, x, message):
    with pytest.raises(usl.UslInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        usl.fit(n, x)
