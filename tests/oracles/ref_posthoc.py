"""Brute-force references for the post-hoc fits, written without selcal's code.

Slow and direct on purpose: every formula is the textbook one (scipy's logsumexp,
np.linalg.norm, an explicit loop over tie groups), so that it shares no code path
with ``selcal.scores.fits`` / ``selcal.scores`` / ``selcal.metrics.selective``.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import logsumexp, softmax


# ---------------------------------------------------------------- temperature
def nll_at_temperature(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    """mean_i [logsumexp(v_i / T) - v_iy / T], the mean summed exactly."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    per_row = logsumexp(z, axis=1) - z[np.arange(labels.size), labels]
    return math.fsum(per_row) / labels.size


def nll_gradient_beta(logits: np.ndarray, labels: np.ndarray, temperature: float) -> float:
    """dNLL/dbeta at beta = 1/T: mean_i (sum_k softmax(beta v_i)_k v_ik - v_iy).

    Computed on logits shifted by the row's label logit, so that the value being
    averaged is small when the fit is good (no cancellation of large logits).
    """
    v = np.asarray(logits, dtype=np.float64)
    rows = np.arange(labels.size)
    d = v - v[rows, labels][:, None]
    p = softmax(d / temperature, axis=1)
    return math.fsum((p * d).sum(axis=1)) / labels.size


def reference_temperature(
    logits: np.ndarray,
    labels: np.ndarray,
    log10_range: tuple[float, float] | None = None,
    grid_points: int = 81,
) -> tuple[float, float]:
    """(T*, NLL(T*)) by a log-spaced grid over T, then a bounded Brent search in log T.

    The NLL is convex in beta = 1/T, hence unimodal in log T, so the minimiser lies between
    the two grid neighbours of the grid's best point. The grid spans 4 decades either side
    of the logits' typical scale (median row range) unless given.
    Raises AssertionError if the grid minimum lies on the edge of the grid (no interior
    minimiser: the caller picked a case without a finite optimum).
    """
    v = np.asarray(logits, dtype=np.float64)
    if log10_range is None:
        scale = float(np.median(v.max(axis=1) - v.min(axis=1)))
        centre = math.log10(scale) if scale > 0 else 0.0
        log10_range = (centre - 4.0, centre + 4.0)
    grid = np.linspace(log10_range[0], log10_range[1], grid_points)
    values = np.array([nll_at_temperature(v, labels, 10.0**u) for u in grid])
    i = int(np.argmin(values))
    assert 0 < i < grid_points - 1, f"grid minimum on the edge (T = {10.0 ** grid[i]:g}): no interior optimum"
    f = lambda u: nll_at_temperature(v, labels, 10.0**u)  # noqa: E731
    res = minimize_scalar(f, bounds=(grid[i - 1], grid[i + 1]), method="bounded",
                          options={"xatol": 1e-13, "maxiter": 500})
    # Brent may stop a hair away from the best point it evaluated; keep the best of both.
    u_best = res.x if res.fun <= values[i] else grid[i]
    t_best = 10.0**u_best
    return t_best, nll_at_temperature(v, labels, t_best)


# ---------------------------------------------------------------- p-norm and AURC
def pnorm_score(logits: np.ndarray, p: int, center: bool) -> np.ndarray:
    """max_k (v_k - mu) / ||v - mu||_p by np.linalg.norm (mu = row mean, or 0), in float64."""
    v = np.asarray(logits, dtype=np.float64)
    mu = v.mean(axis=1, keepdims=True) if center else 0.0
    c = v - mu
    norm = np.linalg.norm(c, ord=p, axis=1)
    out = np.zeros(v.shape[0])
    nz = norm > 0
    out[nz] = c[nz].max(axis=1) / norm[nz]
    return out


def _integer_rows(logits: np.ndarray) -> list[list[int]]:
    """Each row as integers a_k with v_k = a_k / D_row exactly (D_row a power of two)."""
    out = []
    for row in np.asarray(logits, dtype=np.float64).tolist():
        ratios = [x.as_integer_ratio() for x in row]
        d = max(den for _, den in ratios)
        out.append([num * (d // den) for num, den in ratios])
    return out


def pnorm_exact_keys(logits: np.ndarray, p: int, center: bool) -> list[Fraction]:
    """sign(s) |s|^p as an exact rational, for s = max_k (v_k - mu) / ||v - mu||_p.

    t -> sign(t) |t|^p is strictly increasing, so these keys order the rows exactly as the
    mathematically exact p-norm score does, and two rows tie exactly when their exact
    scores are equal. With v_k = a_k / D: centred, v_k - mu = (K a_k - sum a) / (K D); the
    common factor cancels in the ratio, so only integers are involved. This matters for
    p = 1 centred: s = 1/2 exactly for every row with a single logit above the row mean,
    a tie group that float64 evaluation splits by rounding noise.
    """
    keys = []
    n_classes = np.shape(logits)[1]
    for a in _integer_rows(logits):
        if center:
            total = sum(a)
            b = [n_classes * x - total for x in a]
        else:
            b = a
        top = max(b)
        denominator = sum(abs(x) ** p for x in b)
        if denominator == 0:
            keys.append(Fraction(0))
            continue
        numerator = abs(top) ** p
        keys.append(Fraction(numerator if top >= 0 else -numerator, denominator))
    return keys


def msp_rank_score(logits: np.ndarray) -> np.ndarray:
    """A score ordered exactly like the maximum softmax probability, without saturation.

    MSP = 1 / (1 + S) with S = sum_{k != argmax} exp(v_k - v_max); ranking by -S is
    ranking by MSP, and S keeps full relative precision when MSP is within 1e-16 of 1.
    """
    v = np.asarray(logits, dtype=np.float64)
    top = v.max(axis=1, keepdims=True)
    e = np.exp(v - top)
    pred = np.argmax(v, axis=1)
    e[np.arange(v.shape[0]), pred] = 0.0
    return -np.array([math.fsum(row) for row in e])


def expanded_error_counts(score, correct) -> list[float]:
    """E_k for k = 1..N: errors among the k most confident, ties expanded.

    ``score`` is any sequence of mutually comparable, hashable values (floats or
    Fractions); equal values form a tie group. Inside a group (size g, e errors, E0
    errors before it) the j-th accepted sample has E = E0 + j * e / g: the expectation
    under a random order within the group.
    """
    correct = [bool(c) for c in correct]
    score = score.tolist() if isinstance(score, np.ndarray) else list(score)
    groups: dict = {}
    for s, c in zip(score, correct):
        g = groups.setdefault(s, [0, 0])
        g[0] += 1
        g[1] += 0 if c else 1
    out: list[float] = []
    errors_before = 0
    for s in sorted(groups, reverse=True):
        size, errs = groups[s]
        for j in range(1, size + 1):
            out.append(errors_before + j * errs / size)
        errors_before += errs
    return out


def brute_aurc(score, correct) -> float:
    """(1/N) sum_k E_k / k."""
    e = expanded_error_counts(score, correct)
    return math.fsum(ek / k for k, ek in enumerate(e, start=1)) / len(e)


def brute_augrc(score, correct) -> float:
    """(1/N) sum_k E_k / N."""
    e = expanded_error_counts(score, correct)
    return math.fsum(e) / len(e) / len(e)


def choose_p(values: dict[int, float]) -> int:
    """The p of the lowest value; ties to the smallest p (explicit loop, strict improvement)."""
    best = None
    for p in sorted(values):
        if best is None or values[p] < values[best]:
            best = p
    return best


def reference_pnorm(logits, labels, p_grid, center=True, objective="aurc"):
    """(best p, fallback, {p: objective}, msp objective) by an explicit loop over the grid.

    Rows are ranked by the exact p-norm score (:func:`pnorm_exact_keys`); MSP by
    :func:`msp_rank_score`. Fallback when MSP's objective is <= the best p's.
    """
    v = np.asarray(logits, dtype=np.float64)
    correct = np.argmax(v, axis=1) == np.asarray(labels)
    measure = {"aurc": brute_aurc, "augrc": brute_augrc}[objective]
    values = {int(p): measure(pnorm_exact_keys(v, int(p), center), correct) for p in p_grid}
    best_p = choose_p(values)
    msp_value = measure(msp_rank_score(v), correct)
    return best_p, msp_value <= values[best_p], values, msp_value
