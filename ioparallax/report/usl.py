"""Gunther's Universal Scalability Law fitted to (concurrency, throughput) points.

    X(N) = gamma N / (1 + sigma (N - 1) + kappa N (N - 1))

gamma is the throughput of one unit of concurrency (one VM, one job, one outstanding I/O), sigma the
contention (the share of the work that queues for a shared resource: it bends the curve towards the
Amdahl ceiling gamma / sigma) and kappa the coherency or crosstalk (the cost of keeping the units
consistent with each other: it makes the curve fall past the peak N* = sqrt((1 - sigma) / kappa)).

The fit is bounded non-linear least squares (scipy.optimize.least_squares, trust region reflective)
of all three coefficients with sigma in [0, 1], kappa >= 0 and gamma > 0, as the R package ``usl``
(smoeding/usl, version 2 and later) fits them; ``gamma_fixed`` gives the older normalisation where
gamma is the throughput of the smallest step divided by its concurrency and only sigma and kappa
are fitted. Confidence intervals come from the covariance s^2 (J'J)^-1 at the optimum with Student's
t quantile on n - p degrees of freedom (two-sided).

Degenerate ramps never give a curve: fewer than MIN_POINTS distinct steps, a flat or falling ramp
(the system was saturated from the first step) and a fit that does not converge give a
:class:`UslFit` with ``ok`` False and a statement saying why. A kappa of 0 means no peak (the curve
only approaches the Amdahl ceiling); a sigma of 0 means no Amdahl ceiling.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# _scipy_note: scipy is imported by the functions that fit, not with this module: the report
# imports this module whatever the data (ioparallax.report.scaling), scipy adds ~56 MB of resident
# libraries, and the report's drawing workers are forked from its process, each counting them
# again (bench/report.py measures the process tree). Only a report with a ramp fits.

MIN_POINTS = 4  # distinct concurrency levels: three coefficients need at least one more
RISE_MIN = 1.05  # a ramp "rises" when some later step is >= 5 % above the first one
SIGMA_MAX = 1.0  # sigma 1: X(N) = gamma for every N, nothing left to share
BOUND_EPS = 1e-9  # sigma or kappa whose term moves X(N) less than this is "at the bound", 0
#: Largest concurrency and throughput fitted. The model squares N and least squares squares X, so
#: values near 1e300 overflowed into infinities and NaNs inside scipy (a traceback). No VM count,
#: job count or queue depth comes near 1e9, and no IO/s or bytes/s figure near 1e18 (an EB/s).
N_MAX = 1e9
X_MAX = 1e18


class UslInputError(ValueError):
    """Points that cannot be fitted at all (non-positive or non-finite values, mismatched lengths)."""


@dataclass(frozen=True)
class Coefficient:
    name: str
    value: float
    stderr: float | None  # None when the covariance is singular
    low: float | None  # confidence interval, clipped to the coefficient's bounds
    high: float | None
    at_bound: bool = False  # the optimum sits on the bound (sigma or kappa 0, sigma 1)


@dataclass
class UslFit:
    """The result of :func:`fit`: ``ok`` False means no curve, and ``statement`` says why."""

    ok: bool
    statement: str  # one sentence (or two) for a PoC reader
    n: np.ndarray  # the points, as given
    x: np.ndarray
    sigma: Coefficient | None = None
    kappa: Coefficient | None = None
    gamma: Coefficient | None = None
    level: float = 0.95  # confidence level of the intervals
    r_squared: float | None = None
    residual_se: float | None = None  # residual standard error, sqrt(RSS / df)
    df: int = 0  # residual degrees of freedom
    gamma_fixed: bool = False
    peak_n: float | None = None  # N* = sqrt((1 - sigma) / kappa); None: no peak
    peak_x: float | None = None  # X(N*)
    amdahl_x: float | None = None  # gamma / sigma; None when sigma is 0
    n_max: float = 0.0  # largest measured concurrency
    linear_share: float | None = None  # X(n_max) / (gamma n_max), the model's, 0..1
    notes: list[str] = field(default_factory=list)  # caveats (wide intervals, extrapolated peak...)

    def predict(self, n: np.ndarray | Sequence[float] | float) -> np.ndarray:
        if not self.ok or self.sigma is None or self.kappa is None or self.gamma is None:
            raise ValueError("no USL curve: " + self.statement)
        return usl(np.asarray(n, dtype=float), self.sigma.value, self.kappa.value, self.gamma.value)

    def coefficients(self) -> list[Coefficient]:
        return [c for c in (self.sigma, self.kappa, self.gamma) if c is not None]


def usl(n: np.ndarray, sigma: float, kappa: float, gamma: float) -> np.ndarray:
    """X(N) for an array of concurrency values."""
    n = np.asarray(n, dtype=float)
    return gamma * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


def _jacobian(n: np.ndarray, sigma: float, kappa: float, gamma: float) -> np.ndarray:
    """d X / d (sigma, kappa, gamma), one row per point."""
    d = 1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0)
    top = gamma * n / (d * d)
    return np.column_stack([-top * (n - 1.0), -top * n * (n - 1.0), n / d])


def _start(n: np.ndarray, x: np.ndarray, gamma: float) -> tuple[float, float]:
    """sigma and kappa from the linear form N / C(N) - 1 = sigma (N - 1) + kappa N (N - 1) with
    C = X / gamma, by non-negative least squares: a good start for the non-linear fit."""
    c = x / gamma
    a = np.column_stack([n - 1.0, n * (n - 1.0)])
    b = n / c - 1.0
    # Scale the columns so that NNLS treats both alike (N (N - 1) is much larger than N - 1).
    scale = np.maximum(np.abs(a).max(axis=0), 1e-12)
    from scipy import optimize  # here, not at import: see _scipy_note

    coef, _ = optimize.nnls(a / scale, b)
    sigma, kappa = coef / scale
    return float(min(sigma, SIGMA_MAX * 0.99)), float(kappa)


def _check(n: Sequence[float], x: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    na = np.asarray(n, dtype=float).ravel()
    xa = np.asarray(x, dtype=float).ravel()
    if na.shape != xa.shape:
        raise UslInputError(f"{na.size} concurrency values but {xa.size} throughput values")
    bad = ~np.isfinite(na) | ~np.isfinite(xa)
    if bad.any():
        i = int(np.argmax(bad))
        raise UslInputError(f"point {i + 1}: concurrency {na[i]} and throughput {xa[i]} must be numbers")
    if (na <= 0).any():
        i = int(np.argmax(na <= 0))
        raise UslInputError(f"point {i + 1}: concurrency must be > 0, got {na[i]:g}")
    if (xa < 0).any():
        i = int(np.argmax(xa < 0))
        raise UslInputError(f"point {i + 1}: throughput must be >= 0, got {xa[i]:g}")
    order = np.argsort(na, kind="stable")
    return na[order], xa[order]


def fit(
    n: Sequence[float],
    x: Sequence[float],
    *,
    level: float = 0.95,
    gamma_fixed: bool = False,
    unit: str = "",
    what: str = "",
) -> UslFit:
    """Fit the USL to the points (n[i], x[i]).

    ``gamma_fixed``: gamma is X / N of the smallest step (the older normalisation) and only sigma
    and kappa are fitted; by default all three are fitted, as R's usl package does.
    ``unit`` (e.g. "IO/s") and ``what`` (e.g. "VMs") only word the statement.
    Raises :class:`UslInputError` for points that are not numbers or not positive.
    """
    na, xa = _check(n, x)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        # Whatever the points, a failure of the numerics is a "no fit" with its reason, never a
        # traceback or a page of RuntimeWarnings.
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            return _fit(na, xa, level, gamma_fixed, unit, what)
        except (ArithmeticError, ValueError, np.linalg.LinAlgError) as exc:
            return UslFit(
                ok=False,
                statement=f"No scalability fit: the numerics failed on these points ({type(exc).__name__}).",
                n=na,
                x=xa,
                level=level,
                gamma_fixed=gamma_fixed,
                n_max=float(na.max()) if na.size else 0.0,
            )


def _fit(na: np.ndarray, xa: np.ndarray, level: float, gamma_fixed: bool, unit: str, what: str) -> UslFit:
    result = UslFit(
        ok=False,
        statement="",
        n=na,
        x=xa,
        level=level,
        gamma_fixed=gamma_fixed,
        n_max=float(na.max()) if na.size else 0.0,
    )
    if na.size and (na.max() > N_MAX or xa.max() > X_MAX):
        big, name, limit = (na.max(), "concurrency", N_MAX) if na.max() > N_MAX else (xa.max(), "throughput", X_MAX)
        result.statement = (
            f"No scalability fit: a {name} of {big:.3g} is beyond what the model can compute "
            f"(at most {limit:.0e}); check the points."
        )
        return result
    levels = np.unique(na)
    if levels.size < MIN_POINTS:
        result.statement = (
            f"No scalability fit: {levels.size} concurrency level"
            f"{'' if levels.size == 1 else 's'} measured, at least {MIN_POINTS} are needed "
            f"(three coefficients and one more to judge them); run a longer ramp."
        )
        return result
    first = xa[na == levels[0]].mean()
    later = xa[na > levels[0]].max()
    if first <= 0 or later < RISE_MIN * first:
        result.statement = (
            (
                f"No scalability fit: throughput does not rise with concurrency "
                f"({_num(first)} {unit} at {_count(levels[0], what)}, never more than {_num(later)} "
                f"{unit} above it): the system was saturated from the first step, so this ramp cannot "
                f"tell contention from coherency; start the ramp lower."
            )
            .replace("  ", " ")
            .replace(" ,", ",")
        )
        return result

    gamma0 = first / levels[0]
    sigma0, kappa0 = _start(na, xa, gamma0)
    if gamma_fixed:
        solved = _solve(na, xa, [sigma0, kappa0], gamma=gamma0)
    else:
        solved = _solve(na, xa, [sigma0, kappa0, gamma0])
    if solved is None:
        result.statement = "No scalability fit: the least-squares fit did not converge on these points."
        return result
    params, jac = solved
    sigma, kappa = float(params[0]), float(params[1])
    gamma = float(params[2]) if not gamma_fixed else gamma0

    residuals = xa - usl(na, sigma, kappa, gamma)
    rss = float(residuals @ residuals)
    p = jac.shape[1]
    df = na.size - p
    tss = float(((xa - xa.mean()) ** 2).sum())
    result.df = df
    result.r_squared = 1.0 - rss / tss if tss > 0 else None
    result.residual_se = math.sqrt(rss / df) if df > 0 else None
    stderr = _stderr(jac, rss, df)
    from scipy import stats  # here, not at import: see _scipy_note

    t = float(stats.t.ppf(0.5 + level / 2.0, df)) if df > 0 else math.inf
    bounds = {"sigma": (0.0, SIGMA_MAX), "kappa": (0.0, math.inf), "gamma": (0.0, math.inf)}
    values = {"sigma": sigma, "kappa": kappa, "gamma": gamma}
    coefs: dict[str, Coefficient] = {}
    for i, name in enumerate(("sigma", "kappa", "gamma")):
        lo, hi = bounds[name]
        v = values[name]
        # A term that changes X(N) by less than BOUND_EPS over the measured range is 0 (the
        # optimiser's 1e-35 is its way of saying so): "at the bound".
        weight = {"sigma": na.max() - 1.0, "kappa": na.max() * (na.max() - 1.0), "gamma": 0.0}[name]
        at_zero = name != "gamma" and v * max(weight, 1.0) <= BOUND_EPS
        at_bound = bool(at_zero or (name == "sigma" and v >= hi))
        if at_zero:
            v = values[name] = lo
        if name == "gamma" and gamma_fixed:
            coefs[name] = Coefficient(name, v, None, None, None)
            continue
        se = None if stderr is None else stderr[i]
        if se is None or not math.isfinite(se):
            coefs[name] = Coefficient(name, v, None, None, None, at_bound)
        else:
            coefs[name] = Coefficient(name, v, se, max(lo, v - t * se), min(hi, v + t * se), at_bound)
    result.sigma, result.kappa, result.gamma = coefs["sigma"], coefs["kappa"], coefs["gamma"]
    result.ok = True
    _derive(result, unit, what)
    return result


def _solve(
    n: np.ndarray, x: np.ndarray, start: list[float], gamma: float | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """Bounded least squares from a few starting points; the lowest cost wins. Returns the
    parameters and the Jacobian of the model at the optimum (columns: the fitted parameters)."""
    free_gamma = gamma is None
    lower = [0.0, 0.0] + ([0.0] if free_gamma else [])
    upper = [SIGMA_MAX, np.inf] + ([np.inf] if free_gamma else [])

    def model_jac(p: np.ndarray) -> np.ndarray:
        g = p[2] if gamma is None else gamma
        j = _jacobian(n, p[0], p[1], g)
        return j if free_gamma else j[:, :2]

    def resid(p: np.ndarray) -> np.ndarray:
        return usl(n, p[0], p[1], p[2] if gamma is None else gamma) - x

    from scipy import optimize  # here, not at import: see _scipy_note

    starts = [list(start)]
    # The R package's customary start (sigma 0.01, kappa 0.0001) as a second opinion.
    starts.append([0.01, 1e-4] + ([start[2]] if free_gamma else []))
    best = None
    for s in starts:
        s = np.clip(np.asarray(s, dtype=float), lower, [u if np.isfinite(u) else np.inf for u in upper])
        s[:2] = np.minimum(s[:2], [SIGMA_MAX * (1 - 1e-6), np.inf])
        try:
            r = optimize.least_squares(
                resid,
                s,
                jac=model_jac,
                bounds=(lower, upper),
                method="trf",
                x_scale="jac",
                xtol=1e-14,
                ftol=1e-14,
                gtol=1e-14,
                max_nfev=20000,
            )
        except (ValueError, FloatingPointError):
            continue
        if not np.all(np.isfinite(r.x)):
            continue
        if best is None or r.cost < best.cost:
            best = r
    if best is None or best.status <= 0:
        return None
    return best.x, model_jac(best.x)


def _stderr(jac: np.ndarray, rss: float, df: int) -> np.ndarray | None:
    """Standard errors from s^2 (J'J)^-1; None when J'J is singular or there is no residual df."""
    if df <= 0:
        return None
    _, s, vt = np.linalg.svd(jac, full_matrices=False)
    if s.size == 0 or s[-1] <= np.finfo(float).eps * max(jac.shape) * s[0]:
        return None
    cov = (vt.T / s**2) @ vt * (rss / df)
    return np.sqrt(np.diag(cov))


def _derive(r: UslFit, unit: str, what: str) -> None:
    """Peak, Amdahl ceiling, share of linear, the caveats and the statement."""
    assert r.sigma and r.kappa and r.gamma
    sigma, kappa, gamma = r.sigma.value, r.kappa.value, r.gamma.value
    if kappa > 0 and not r.kappa.at_bound and sigma < 1:
        r.peak_n = math.sqrt((1.0 - sigma) / kappa)
        r.peak_x = float(usl(np.array([r.peak_n]), sigma, kappa, gamma)[0])
    if sigma > 0 and not r.sigma.at_bound:
        r.amdahl_x = gamma / sigma
    r.linear_share = float(usl(np.array([r.n_max]), sigma, kappa, gamma)[0] / (gamma * r.n_max))

    w = f" {what}" if what else ""
    u = f" {unit}" if unit else ""
    if r.df <= 1:
        r.notes.append(
            f"only {r.n.size} points for three coefficients: the intervals rest on {r.df} residual "
            f"degree{'' if r.df == 1 else 's'} of freedom; more steps make them trustworthy"
        )
    if r.kappa.low is not None and r.kappa.low <= 0 < kappa and r.peak_n is not None:
        r.notes.append(
            f"kappa's {r.level:.0%} interval reaches 0: the ramp does not prove that throughput falls, "
            "so the peak is uncertain"
        )
    if r.peak_n is not None and r.peak_n > 2 * r.n_max:
        r.notes.append(
            f"the peak at {_count(r.peak_n, what)} is extrapolated well beyond the largest measured "
            f"{_count(r.n_max, what)}"
        )

    lin = f"{100 * r.linear_share:.0f} % of linear"
    head = f"Throughput at {_count(r.n_max, what)} is {lin} ({_pct(sigma)} contention, {_pct(kappa)} coherency)"
    if r.peak_n is not None and r.peak_x is not None:
        if r.peak_n <= r.n_max:
            tail = (
                f"; it peaked at about {_num(r.peak_x)}{u} near {_count(r.peak_n, what)} and adding more "
                f"lowers total throughput"
            )
        else:
            tail = (
                f"; the fit predicts a peak of about {_num(r.peak_x)}{u} at {_count(r.peak_n, what)}, past which "
                f"adding more lowers total throughput"
            )
    elif r.amdahl_x is not None:
        tail = (
            f"; with no coherency cost measured it never falls, but it cannot pass the contention ceiling of "
            f"{_num(r.amdahl_x)}{u} however many{w or ' units'} are added"
        )
    else:
        tail = "; no limit shows within the measured range (neither contention nor coherency measured)"
    r.statement = head + tail + "."


def _count(v: float, what: str) -> str:
    """'1 VM', '6 VMs', '1 outstanding I/O': ``what`` is given in the plural."""
    if not what:
        return _num(v)
    return f"{_num(v)} {what[:-1] if v == 1 and what.endswith('s') else what}"


def _pct(v: float) -> str:
    """A coefficient as a percentage with three significant digits (0.074 %, 5.00 %, 0.200 %)."""
    p = 100.0 * v
    if p == 0:
        return "0 %"
    return f"{p:.{max(0, 2 - int(math.floor(math.log10(abs(p)))))}f} %"


def _num(v: float) -> str:
    """A count or rate for a sentence: three significant digits, thousands separated."""
    if not math.isfinite(v):
        return str(v)
    if abs(v) >= 100:
        return f"{round(v, 2 - int(math.floor(math.log10(abs(v))))):,.0f}"
    if v == round(v):
        return f"{v:.0f}"
    return f"{v:.{max(0, 2 - int(math.floor(math.log10(abs(v)))))}f}"
