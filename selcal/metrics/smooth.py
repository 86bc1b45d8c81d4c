"""Smooth ECE and the smoothed reliability curve (CONVENTIONS.md, "Calibration beyond bins").

With residuals r_i = c_i - q_i and the Gaussian kernel reflected at 0 and 1,

    K_σ(t, x) = Σ_{m∈ℤ} [φ_σ(t - x - 2m) + φ_σ(t + x - 2m)],   t, x in [0, 1],

smECE_σ = ∫_0^1 |(1/N) Σ_i K_σ(t, q_i) r_i| dt, and ``smece`` = smECE_σ* at the fixed point
σ* = smECE_σ*. K_σ(·, x) is the Gaussian on a circle of circumference 2 centred at x plus the one
centred at -x, so the kernel sum is one circular convolution: the residual mass of every row is
spread linearly onto a grid of spacing h ≤ σ/256 (and mirrored), convolved by FFT with the wrapped
Gaussian (its DFT in closed form), and |g| integrated by the trapezoid rule. The discretisation error is below 1e-7 of
the value; smECE_σ decreases in σ (the reflected heat kernel is a semigroup), so σ* is the one root
of smECE_σ - σ, found by Brent's method to 1e-12.

relplot's ``smECE`` reflects its grid about the end points *without* doubling a mass that sits on the
end point itself (``ReflectedGaussianKernel.convolve``: the mirror copies exclude the boundary sample),
so a row with q = 1 keeps only half its kernel mass, and it divides by that smaller total mass: when
most confidences lie within one grid cell (h ≈ 0.001) of 1 its value grows (0.0606 against 0.0434 on
the cross-entropy ResNet-50 sample's test rows).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["SmoothEce", "smooth_ece", "smooth_ece_at", "smooth_ece_of_counts", "smooth_reliability", "SIGMA_FLOOR"]

POINTS_PER_SIGMA = 256  # grid spacing h <= sigma / 256: linear binning error ~ (h/σ)²/8 < 2e-6 relative
MIN_GRID = 1 << 10
MAX_GRID = 1 << 22
SIGMA_FLOOR = 2.0 ** -14  # σ* below this is reported as this (smECE then lies in [value, 6.1e-5])


@dataclass(frozen=True)
class SmoothEce:
    """smECE at its fixed point: ``value`` = smECE_σ*, ``sigma`` = σ*."""

    value: float
    sigma: float


def _prepare(confidence, correct, weights):
    """q, the weighted residuals and their total weight, the rows sorted by (q, residual): the grid's
    float sums then add the same numbers in the same order whatever the order of the rows, so every
    result is bit-for-bit independent of row order (CONVENTIONS.md, "Numbers")."""
    q = np.asarray(confidence, dtype=np.float64).ravel()
    r = np.asarray(correct, dtype=np.float64).ravel() - q
    if weights is None:
        order = np.lexsort((r, q))
        return q[order], r[order], float(q.size)
    w = np.asarray(weights, dtype=np.float64).ravel()
    residual = r * w
    order = np.lexsort((w, residual, q))
    return q[order], residual[order], math.fsum(w)


def _grid(sigma: float, points: int = POINTS_PER_SIGMA, most: int = MAX_GRID) -> int:
    wanted = points / sigma
    return int(min(most, max(MIN_GRID, 1 << max(0, math.ceil(math.log2(wanted))))))


def _kernel_spectrum(sigma: float, n_grid: int) -> np.ndarray:
    """The DFT of the wrapped Gaussian sampled at spacing h = 1/G on the circle of length 2: by Poisson
    summation G exp(-2 π² σ² (j/2)²), plus aliases j ± 2Gm that are below 1e-300 for h <= σ/256;
    frequencies whose factor underflows are 0."""
    spectrum = np.zeros(n_grid + 1)
    top = min(n_grid + 1, int(2.0 * math.sqrt(745.0 / 2.0) / (math.pi * sigma)) + 2)
    f = np.arange(top, dtype=np.float64) / 2.0
    spectrum[:top] = np.exp(-2.0 * (math.pi * sigma * f) ** 2) * n_grid
    return spectrum


def _circle_spectrum(q: np.ndarray, values: np.ndarray, n_grid: int) -> np.ndarray:
    """The DFT of the rows' masses on the circle of length 2 (grid spacing h = 1/G): each value spread
    linearly onto the two grid points around q_i, and mirrored. It does not depend on σ."""
    u = np.clip(q, 0.0, 1.0) * n_grid
    left = np.minimum(np.floor(u).astype(np.int64), n_grid - 1)
    frac = u - left
    mass = np.bincount(left, values * (1.0 - frac), minlength=n_grid + 1)
    mass += np.bincount(left + 1, values * frac, minlength=n_grid + 1)
    circle = np.zeros(2 * n_grid)
    circle[: n_grid + 1] = mass
    circle[n_grid + 1:] = mass[n_grid - 1:0:-1]  # the mirror images -x of 0 < x < 1
    circle[0] += mass[0]  # x = 0 and x = 1 are their own mirror images: their mass counts twice
    circle[n_grid] += mass[n_grid]
    return np.fft.rfft(circle)


def _smoothed(q: np.ndarray, values: np.ndarray, sigma: float, n_grid: int, spectrum=None) -> np.ndarray:
    """Σ_i K_σ(t, q_i) values_i at t = i/G, i = 0 .. G (``spectrum``: of the rows' masses, if known)."""
    if spectrum is None:
        spectrum = _circle_spectrum(q, values, n_grid)
    convolved = np.fft.irfft(spectrum * _kernel_spectrum(sigma, n_grid), n=2 * n_grid)
    return convolved[: n_grid + 1] / n_grid  # times h: the kernel samples are a density


def _trapezoid(values: np.ndarray, n_grid: int) -> float:
    return float((np.sum(values[1:-1]) + 0.5 * (values[0] + values[-1])) / n_grid)


def _at(q, residual, total, sigma, spectra: dict | None = None, points: int = POINTS_PER_SIGMA,
        most: int = MAX_GRID) -> float:
    """smECE_σ; ``spectra`` keeps the rows' mass spectrum per grid size across calls on the same rows
    (the σ search evaluates a few grid sizes only: each rows' binning and forward FFT done once)."""
    n_grid = _grid(sigma, points, most)
    spectrum = None
    if spectra is not None:
        spectrum = spectra.get(n_grid)
        if spectrum is None:
            spectrum = spectra[n_grid] = _circle_spectrum(q, residual, n_grid)
    g = _smoothed(q, residual, sigma, n_grid, spectrum) * n_grid / total
    return _trapezoid(np.abs(g), n_grid)


def smooth_ece_at(confidence, correct, sigma: float, weights=None) -> float:
    """smECE_σ: ∫_0^1 |(1/N) Σ_i K_σ(t, q_i)(c_i - q_i)| dt at a given bandwidth σ.

    ``weights`` (optional, >= 0) count each row that many times (bootstrap resamples).

    Examples
    --------
    >>> round(smooth_ece_at([0.9, 0.9], [1, 1], 0.1), 12)  # one sign: |mean(c - q)|
    0.1
    """
    q, residual, total = _prepare(confidence, correct, weights)
    return _at(q, residual, total, float(sigma))


def smooth_ece(confidence, correct, weights=None, *, points_per_sigma: int = POINTS_PER_SIGMA,
               xtol: float = 1e-13, max_grid: int = MAX_GRID) -> SmoothEce:
    """smECE at the fixed point σ* = smECE_σ* (Błasiok & Nakkiran).

    Parameters
    ----------
    confidence : array of float, in [0, 1]
        Top-label confidence q_i.
    correct : array of bool or {0, 1}
        c_i = [prediction is right].
    weights : array of float, optional
        Row multiplicities (a bootstrap resample); default one each.
    points_per_sigma, xtol, max_grid : the grid's resolution (h <= σ / points_per_sigma, at most max_grid
        points) and σ*'s tolerance; the defaults make the value exact to 1e-6. The bootstrap's resamples use
        32, 1e-8 and 2^12 (relative error about 1e-4 for σ* >= 0.008, far below an interval's own
        Monte-Carlo error; a resample whose residuals nearly cancel, σ* below that, keeps a bounded grid).

    Returns
    -------
    SmoothEce
        ``value`` and ``sigma``. When every residual has one sign the value is |mean(c - q)|
        (no cancellation) and σ* equals it; with no residual at all both are 0.

    References
    ----------
    Błasiok & Nakkiran, "Smooth ECE: principled reliability diagrams via kernel smoothing",
    ICLR 2024, sec. 3 (definition 3.1 and the fixed-point bandwidth).

    Examples
    --------
    >>> smooth_ece([0.8, 0.6], [1, 1]).value  # all under-confident: mean(c - q)
    0.3
    >>> smooth_ece([0.5, 0.5], [1, 0]).value  # the residuals cancel at every point
    0.0
    """
    q, residual, total = _prepare(confidence, correct, weights)
    positive, negative = math.fsum(residual[residual > 0]), math.fsum(residual[residual < 0])
    if positive == 0.0 or negative == 0.0:
        value = float(abs(positive + negative) / total)
        return SmoothEce(value, value)
    _, group = np.unique(q, return_inverse=True)
    at_each_confidence = np.bincount(group.ravel(), residual)
    if np.all(np.abs(at_each_confidence) <= 1e-15 * (positive - negative)):
        return SmoothEce(0.0, 0.0)  # the residuals cancel at every confidence: g = 0 for every σ
    upper = (positive - negative) / total  # smECE_σ <= mean |r|: f(upper) <= 0
    from scipy import optimize  # (here, not at the top: the command starts without scipy)

    spectra: dict = {}
    seen: dict[float, float] = {}  # smECE_σ of every σ tried (Brent's last point is the answer's σ)

    def at(sigma: float) -> float:
        if sigma not in seen:
            seen[sigma] = _at(q, residual, total, sigma, spectra, points_per_sigma, max_grid)
        return seen[sigma]

    def excess(sigma: float) -> float:
        return at(sigma) - sigma

    at_upper = excess(upper)
    if at_upper >= 0.0:
        return SmoothEce(upper, upper)
    # Fixed-point steps bracket σ*: smECE_σ decreases in σ, so from σ > σ*, σ' = smECE_σ lies below σ*,
    # and smECE_σ' above it. Two steps make the bracket narrow (by smECE's slope, small) for Brent.
    lower = upper + at_upper
    if lower > SIGMA_FLOOR:
        at_lower = excess(lower)
        if at_lower > 0.0:
            step = lower + at_lower
            if step < upper:
                at_step = excess(step)
                if at_step < 0.0:
                    upper = step
                elif at_step == 0.0:
                    return SmoothEce(step, step)
            sigma = optimize.brentq(excess, lower, upper, xtol=xtol, rtol=4 * np.finfo(float).eps)
            return SmoothEce(at(float(sigma)), float(sigma))
        if at_lower == 0.0:
            return SmoothEce(lower, lower)
        upper = lower  # (not met: smECE_σ not monotone at the grid's precision) search below, as for no step
    else:
        lower = upper
    while True:
        lower = max(lower / 4.0, SIGMA_FLOOR)
        value = excess(lower)
        if value > 0.0:
            break
        if lower == SIGMA_FLOOR:  # σ* < 2^-14: cancellations at nearly every confidence
            return SmoothEce(value + lower, lower)
        upper = lower
    sigma = optimize.brentq(excess, lower, upper, xtol=xtol, rtol=4 * np.finfo(float).eps)
    return SmoothEce(at(float(sigma)), float(sigma))


class SmoothEceOfCounts:
    """smECE and σ* of many reweightings of the same rows (bootstrap resamples), vectorised.

    Prepared once from the rows (``confidence``, ``correct``); calling it with ``counts`` (B x N,
    integers >= 0, row i counted ``counts[j, i]`` times in reweighting j, rows in the order given
    here) returns ``(values, sigmas)``, arrays of B: what ``smooth_ece(confidence, correct,
    weights=counts[j], ...)`` gives with the same ``points_per_sigma``, ``xtol`` and ``max_grid``,
    σ* within ``xtol`` of the fixed point there and here and the value smECE at that σ.

    The reweightings are searched together, each σ tried costing one inverse FFT per reweighting.
    A grid's masses are linear in the counts: one sparse matrix per grid size (two entries per row,
    its residual spread onto the two grid points around its confidence, as :func:`_circle_spectrum`
    spreads it) times the counts, summed in the rows' order (no BLAS: the same bits on any machine);
    their spectra are kept per grid size. From σ0, the σ* of the rows unweighted (a resample's lies
    near it), one fixed-point step σ1 = smECE_σ0 brackets σ* (smECE_σ decreases in σ, so σ0 and σ1
    lie on either side of it); secant steps, kept inside the bracket, close it (smECE_σ - σ is
    nearly linear in σ). A σ with |smECE_σ - σ| <= ``xtol`` is within ``xtol`` of σ* (the slope of
    smECE_σ - σ is at most -1). A reweighting whose residuals have one sign, or whose step does not
    bracket σ* (σ* at the floor, a grid too coarse for monotony), takes :func:`smooth_ece`'s own search.
    """

    def __init__(self, confidence, correct, *, points_per_sigma: int = POINTS_PER_SIGMA, xtol: float = 1e-13,
                 max_grid: int = MAX_GRID):
        from scipy import sparse

        self.q = np.asarray(confidence, dtype=np.float64).ravel()
        self.correct = np.asarray(correct, dtype=np.float64).ravel()
        self.r = self.correct - self.q
        self.points, self.xtol, self.most = points_per_sigma, xtol, max_grid
        self.start = smooth_ece(self.q, self.correct, points_per_sigma=points_per_sigma, xtol=xtol,
                                max_grid=max_grid).sigma if self.q.size else 0.0
        rows = np.arange(self.q.size)
        # positive residuals, negative ones, rows: their weighted sums in one product
        self.sums = sparse.csr_matrix((np.concatenate([np.maximum(self.r, 0.0), np.minimum(self.r, 0.0),
                                                       np.ones(self.q.size)]),
                                       (np.repeat([0, 1, 2], self.q.size), np.tile(rows, 3))), shape=(3, self.q.size))
        self.spread: dict[int, object] = {}

    def _spread(self, n_grid: int):
        """(G + 1) x N: row i's residual on the grid points around its confidence (linear binning)."""
        if n_grid not in self.spread:
            from scipy import sparse

            u = np.clip(self.q, 0.0, 1.0) * n_grid
            left = np.minimum(np.floor(u).astype(np.int64), n_grid - 1)
            frac = u - left
            rows = np.arange(self.q.size)
            self.spread[n_grid] = sparse.csr_matrix(
                (np.concatenate([self.r * (1.0 - frac), self.r * frac]),
                 (np.concatenate([left, left + 1]), np.concatenate([rows, rows]))), shape=(n_grid + 1, self.q.size))
        return self.spread[n_grid]

    def _grids(self, sigma: np.ndarray) -> np.ndarray:
        """:func:`_grid` of every σ."""
        wanted = np.ceil(np.log2(self.points / sigma))
        return np.minimum(self.most, np.maximum(MIN_GRID, 2.0 ** np.maximum(0, wanted))).astype(np.int64)

    def __call__(self, counts, by_row=None) -> tuple[np.ndarray, np.ndarray]:
        """``by_row``: ``counts.T`` as float64, C-contiguous, when the caller has it (N x B)."""
        counts = np.asarray(counts)
        if by_row is None:
            by_row = np.ascontiguousarray(counts.T, dtype=np.float64)  # N x B
        positive, negative, total = self.sums @ by_row
        total = np.maximum(total, 1.0)
        spectra: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # grid size: (spectra, which rows hold one)

        def spectrum(n_grid: int, rows: np.ndarray) -> np.ndarray:
            """The spectra on a grid (rows of reweightings), those of ``rows`` computed if not yet: each
            the first time it is needed (a grid that a few resamples' σ need costs those few)."""
            if n_grid not in spectra:
                spectra[n_grid] = (np.empty((by_row.shape[1], n_grid + 1), dtype=np.complex128),
                                   np.zeros(by_row.shape[1], dtype=bool))
            held, known = spectra[n_grid]
            missing = np.unique(rows[~known[rows]])
            if missing.size:
                chosen = by_row if missing.size == by_row.shape[1] else by_row[:, missing]
                mass = (self._spread(n_grid) @ chosen).T  # missing x (G + 1)
                circle = np.empty((mass.shape[0], 2 * n_grid))  # (every element written below)
                circle[:, : n_grid + 1] = mass
                circle[:, n_grid + 1:] = mass[:, n_grid - 1:0:-1]  # as _circle_spectrum
                circle[:, 0] += mass[:, 0]
                circle[:, n_grid] += mass[:, n_grid]
                held[missing] = np.fft.rfft(circle, axis=1)
                known[missing] = True
            return held

        def excess(sigma: np.ndarray, which: np.ndarray) -> np.ndarray:
            """smECE_σ - σ of the reweightings ``which``, one σ each (as :func:`_at`)."""
            grids = self._grids(sigma)
            out = np.empty(sigma.shape)
            for n_grid in np.unique(grids).tolist():
                chosen = grids == n_grid
                s = sigma[chosen][:, None]
                top = min(n_grid + 1, int(2.0 * math.sqrt(745.0 / 2.0) / (math.pi * s.min())) + 2)
                kernel = np.exp(-2.0 * (math.pi * s * (np.arange(top) / 2.0)) ** 2) * n_grid
                g = np.fft.irfft(spectrum(n_grid, which[chosen])[which[chosen], :top] * kernel, n=2 * n_grid, axis=1)
                g = np.abs(g[:, : n_grid + 1]) / total[which[chosen], None]
                out[chosen] = (np.sum(g[:, 1:-1], axis=1) + 0.5 * (g[:, 0] + g[:, -1])) / n_grid
            return out - sigma

        return self._search(counts, positive, negative, total, excess)

    def _search(self, counts, positive, negative, total, excess):
        b, xtol = counts.shape[0], self.xtol
        values, sigmas = np.zeros(b), np.zeros(b)
        upper = (positive - negative) / total
        which = np.flatnonzero((positive > 0.0) & (negative < 0.0) & (upper > SIGMA_FLOOR))
        rest = [np.setdiff1d(np.arange(b), which)]  # one sign or no rows: smooth_ece's first case

        def finish(done, x, f):
            values[which[done]], sigmas[which[done]] = x[done] + f[done], x[done]

        x0 = np.clip(self.start, SIGMA_FLOOR, upper[which])
        f0 = excess(x0, which) if which.size else x0
        x1 = x0 + f0  # the fixed-point step: σ* lies between x0 and x1
        f1 = np.zeros(which.size)
        stepped = x1 > SIGMA_FLOOR
        f1[stepped] = excess(x1[stepped], which[stepped])
        done = np.abs(f0) <= xtol
        finish(done, x0, f0)
        done1 = ~done & stepped & (np.abs(f1) <= xtol)
        finish(done1, x1, f1)
        bracketed = ~done & ~done1 & stepped & (np.sign(f0) * np.sign(f1) < 0)
        rest.append(which[~done & ~done1 & ~bracketed])
        below = f0 > 0  # smECE_σ - σ > 0 below σ*, < 0 above
        a, fa = np.where(below, x0, x1), np.where(below, f0, f1)
        c, fc = np.where(below, x1, x0), np.where(below, f1, f0)
        p, fp, x, f = x0, f0, x1, f1
        keep = bracketed
        for _ in range(200):
            which, a, fa, c, fc, p, fp, x, f = (v[keep] for v in (which, a, fa, c, fc, p, fp, x, f))
            if not which.size:
                break
            with np.errstate(divide="ignore", invalid="ignore"):
                guess = x - f * (x - p) / (f - fp)
            inside = (guess > a) & (guess < c)
            guess = np.where(inside, guess, 0.5 * (a + c))  # outside the bracket: bisect
            p, fp, x = x, f, guess
            f = excess(x, which)
            done = (np.abs(f) <= xtol) | (c - a <= xtol)
            finish(done, x, f)
            up = f > 0
            a, fa = np.where(up, x, a), np.where(up, f, fa)
            c, fc = np.where(up, c, x), np.where(up, fc, f)
            keep = ~done
        rest.append(which)
        for j in np.concatenate(rest):  # the scalar search, with its every case
            fixed_point = smooth_ece(self.q, self.correct, counts[j], points_per_sigma=self.points,
                                     xtol=xtol, max_grid=self.most)
            values[j], sigmas[j] = fixed_point.value, fixed_point.sigma
        return values, sigmas


def smooth_ece_of_counts(confidence, correct, counts, *, points_per_sigma: int = POINTS_PER_SIGMA,
                         xtol: float = 1e-13, max_grid: int = MAX_GRID) -> tuple[np.ndarray, np.ndarray]:
    """smECE and σ* of each reweighting ``counts[j]`` of the rows (:class:`SmoothEceOfCounts`)."""
    return SmoothEceOfCounts(confidence, correct, points_per_sigma=points_per_sigma, xtol=xtol,
                             max_grid=max_grid)(counts)


def smooth_reliability(confidence, correct, sigma: float | None = None, points: int = 201):
    """The smoothed reliability curve and the density of confidences, as relplot draws them.

    Returns ``(t, accuracy, density, sigma)``: at each t of ``points`` equally spaced points of
    [0, 1], accuracy(t) = t + Σ_i K_σ(t, q_i)(c_i - q_i) / Σ_i K_σ(t, q_i) (the kernel-weighted
    accuracy, with t for the kernel-weighted confidence as relplot does) and
    density(t) = (1/N) Σ_i K_σ(t, q_i), which integrates to 1 over [0, 1]. σ defaults to σ*.

    Examples
    --------
    >>> t, accuracy, density, sigma = smooth_reliability([0.9, 0.9, 0.9, 0.9], [1, 1, 1, 0], points=3)
    >>> t.tolist()
    [0.0, 0.5, 1.0]
    """
    q, residual, total = _prepare(confidence, correct, None)
    if sigma is None:
        sigma = smooth_ece(confidence, correct).sigma or 0.05
    n_grid = max(_grid(sigma), points - 1)
    n_grid = int(math.lcm(n_grid, points - 1)) if n_grid % (points - 1) else n_grid
    step = n_grid // (points - 1)
    density = _smoothed(q, np.ones_like(q), sigma, n_grid)[::step] * n_grid / total
    shift = _smoothed(q, residual, sigma, n_grid)[::step] * n_grid / total
    t = np.linspace(0.0, 1.0, points)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.where(density > 1e-12, t + shift / np.where(density > 1e-12, density, 1.0), np.nan)
    return t, accuracy, density, float(sigma)


# ------------------------------------------------------------------------ many weightings at once
MANY_GRID = 1 << 12  # the binning grid of smooth_ece_many by default (the bootstrap's resamples' largest)
SAMPLES_PER_SIGMA = 6  # smooth_ece_many samples g at >= 6/σ points: the kernel's spectrum is below e^-170 beyond


def many_grid(sigma: float, most: int = 1 << 16) -> int:
    """The binning grid of :func:`smooth_ece_many` for bandwidths down to ``sigma``: h <= σ/6, where
    smECE_σ is within 1e-3 (relative) of the exact one (measured: 6e-4 at 6 points per σ, 4e-4 at 10,
    2.4e-4 beyond, where the trapezoid's L >= 6/σ samples dominate); at least 2^10 points, at most ``most``."""
    return _grid(sigma, 6, most)


def _sample_points(sigma: np.ndarray, n_grid: int) -> np.ndarray:
    """Points L of the trapezoid over [0, 1] at each σ: the smallest of 2^k {1, 5/4, 3/2, 7/4} >= 6/σ (FFT
    sizes with small factors; a few sizes only, so a batch splits into few groups), at most the grid's."""
    wanted = np.ceil(SAMPLES_PER_SIGMA / np.maximum(sigma, 1e-300))
    power = 2.0 ** np.floor(np.log2(np.maximum(wanted, 1.0)))
    steps = np.array([1.0, 1.25, 1.5, 1.75, 2.0])
    ladder = power[:, None] * steps[None, :]
    chosen = ladder[np.arange(sigma.size), np.argmax(ladder >= wanted[:, None], axis=1)]
    return np.minimum(chosen, n_grid).astype(np.int64)


def spreading(q, n_grid: int):
    """(G + 1) x N sparse: row j's unit mass spread linearly onto the two grid points around q_j (as
    :func:`_circle_spectrum` spreads it); the same for every weighting of the same rows."""
    from scipy import sparse

    u = np.clip(np.asarray(q, dtype=np.float64), 0.0, 1.0) * n_grid
    left = np.minimum(np.floor(u).astype(np.int64), n_grid - 1)
    frac = u - left
    return sparse.csr_matrix((np.concatenate((1.0 - frac, frac)),
                              (np.concatenate((left, left + 1)), np.tile(np.arange(u.size), 2))),
                             shape=(n_grid + 1, u.size))


class _ManyWeightings:
    """smECE_σ of b weightings of the same sorted rows, each at its own σ.

    The residual mass of every weighting is spread linearly onto one grid of G + 1 points (a sparse
    spreading matrix) and transformed once. The circle of :func:`_circle_spectrum` (the grid mirrored, the
    end points counted twice) is even, so its DFT is real: the type-1 DCT of the grid's masses with the
    two end points doubled, half the work of the complex FFT. smECE_σ then takes the first L + 1 of these
    (the kernel's spectrum, exp(-(π σ j)² / 2), is below e^-170 beyond L >= 6/σ: nothing is lost), one
    inverse type-1 DCT (the samples of g at the L + 1 points t = i/L) and the trapezoid rule."""

    def __init__(self, q, residuals, totals, n_grid: int, spread=None):
        from scipy import fft

        spread = spreading(q, n_grid) if spread is None else spread
        mass = np.ascontiguousarray(np.asarray(spread @ residuals.T).T)  # (b, G + 1)
        mass[:, 0] *= 2.0  # x = 0 and x = 1 are their own mirror images: their mass counts twice
        mass[:, n_grid] *= 2.0
        self.spectra = fft.dct(mass, type=1, axis=1, overwrite_x=True)
        self.totals, self.n_grid = totals, n_grid

    def __call__(self, which: np.ndarray, sigma: np.ndarray) -> np.ndarray:
        """smECE_σ of the weightings ``which`` at their ``sigma``."""
        from scipy import fft

        out = np.empty(which.size)
        points = _sample_points(sigma, self.n_grid)
        for size in np.unique(points):
            chosen = points == size
            f = np.arange(size + 1, dtype=np.float64) / 2.0
            kernel = np.exp(-2.0 * (math.pi * sigma[chosen, None] * f[None, :]) ** 2)
            # the inverse DCT divides by 2L; the kernel's samples are a density on the grid of 2G: times L/G
            g = fft.idct(self.spectra[which[chosen], : size + 1] * kernel, type=1, axis=1, overwrite_x=True)
            g = np.abs(g) * (size / self.totals[which[chosen], None])
            out[chosen] = (np.sum(g[:, 1:-1], axis=1) + 0.5 * (g[:, 0] + g[:, -1])) / size
        return out


def smooth_ece_many(confidence, residuals, totals, *, positive=None, negative=None, n_grid: int = MANY_GRID,
                    guess: float | None = None, xtol: float = 1e-8, spread=None) -> tuple[np.ndarray, np.ndarray]:
    """smECE at its fixed point of many weightings of the same rows at once: (values, σ*), each (b,).

    Parameters
    ----------
    confidence : (n,) the rows' confidences q_j, sorted ascending.
    residuals : (b, n) per weighting i and row j, the sum of c - q over row j's copies (a resample that
        draws row j k times, h of them correct, gives h - k q_j).
    totals : (b,) the number of copies in each weighting (N).
    positive, negative : (b,) the sums of the positive and of the negative residuals of the copies (the
        one-sign case and σ*'s upper bracket); by default those of ``residuals`` (one copy per row).
    n_grid : points of the binning grid (h = 1/G); :func:`many_grid` chooses it for the smallest σ*.
    guess : a σ near most weightings' σ* (e.g. from a few of them): each search starts there, two
        evaluations bracket σ*. Without it, σ* is bracketed as :func:`smooth_ece` brackets it.
    xtol : σ*'s tolerance.
    spread : ``spreading(confidence, n_grid)``, when the caller keeps it for several calls.

    Every step evaluates smECE_σ of all the weightings still searching, in one batched inverse FFT per
    size (see :class:`_ManyWeightings`), then false position on log σ with the Illinois rule. smECE_σ
    is within 1e-3 (relative) of the exact one when G >= 6/σ (:func:`many_grid`).

    Examples
    --------
    >>> q = np.array([0.6, 0.9])
    >>> values, sigmas = smooth_ece_many(q, np.array([[0.4, 0.1], [-0.6, 0.1]]), np.array([2.0, 2.0]))
    >>> round(float(values[0]), 12)  # one sign: |mean(c - q)|
    0.25
    >>> bool(abs(values[1] - smooth_ece(q, [0, 1]).value) < 1e-3 * values[1])
    True
    """
    q = np.asarray(confidence, dtype=np.float64)
    residuals = np.atleast_2d(np.asarray(residuals, dtype=np.float64))
    totals = np.asarray(totals, dtype=np.float64)
    b = residuals.shape[0]
    if positive is None:
        positive = np.where(residuals > 0, residuals, 0.0).sum(axis=1)
        negative = np.where(residuals < 0, residuals, 0.0).sum(axis=1)
    values, sigmas = np.zeros(b), np.zeros(b)
    one_sign = (positive == 0.0) | (negative == 0.0)
    values[one_sign] = sigmas[one_sign] = np.abs(positive + negative)[one_sign] / totals[one_sign]
    run_starts = np.flatnonzero(np.concatenate(([True], q[1:] != q[:-1])))
    at_each_confidence = residuals if run_starts.size == q.size else np.add.reduceat(residuals, run_starts, axis=1)
    cancel = ~one_sign & (np.max(np.abs(at_each_confidence), axis=1, initial=0.0) <= 1e-15 * (positive - negative))
    searching = np.flatnonzero(~one_sign & ~cancel)
    if searching.size:
        at = _ManyWeightings(q, residuals[searching], totals[searching], n_grid, spread)
        upper = (positive - negative)[searching] / totals[searching]
        values[searching], sigmas[searching] = _fixed_points(at, upper, xtol, guess)
    return values, sigmas


def _fixed_points(at, upper: np.ndarray, xtol: float, guess: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """σ* = smECE_σ* of every weighting (``at(which, sigma)`` gives smECE_σ; ``upper`` >= σ*): a bracket
    from ``guess``, else as :func:`smooth_ece` brackets it, then false position on log σ. (values, σ*)."""
    b = upper.size
    values, sigmas = np.full(b, np.nan), np.full(b, np.nan)
    low, high = np.zeros(b), upper.copy()
    f_low, f_high = np.full(b, np.nan), np.full(b, np.nan)

    def done(which, sigma, value):
        sigmas[which], values[which] = sigma, value

    def bracket(which, sigma, excess):
        """Record f(σ) = smECE_σ - σ as a lower (f > 0) or upper (f < 0) end; f = 0 is the answer."""
        up, down = excess > 0.0, excess < 0.0
        low[which[up]], f_low[which[up]] = sigma[up], excess[up]
        high[which[down]], f_high[which[down]] = sigma[down], excess[down]
        done(which[excess == 0.0], sigma[excess == 0.0], sigma[excess == 0.0])

    searching = np.arange(b)
    if guess is not None and guess > 0:
        # smECE_σ falls as σ^s, s between -0.6 and -0.28 on noise: a step of log(smECE_σ / σ) / 1.25 in log σ
        # crosses σ* (log(smECE_σ / σ) / (1 - s) away), by at most 28%
        sigma = np.minimum(np.full(b, float(guess)), upper)
        for _ in range(4):
            value = at(searching, sigma)
            bracket(searching, sigma, value - sigma)
            open_ = np.isnan(sigmas[searching]) & (np.isnan(f_low[searching]) | np.isnan(f_high[searching]))
            open_ &= value > 0.0
            searching, sigma, value = searching[open_], sigma[open_], value[open_]
            if not searching.size:
                break
            sigma = np.minimum(sigma * np.exp(np.log(value / sigma) / 1.25), upper[searching])
        searching = np.flatnonzero(np.isnan(sigmas) & (np.isnan(f_low) | np.isnan(f_high)))
        # no bracket from the guess: start again from the upper bound
        low[searching], f_low[searching], high[searching], f_high[searching] = 0.0, np.nan, upper[searching], np.nan
    if searching.size:
        _bracket_from_above(at, searching, upper, low, f_low, high, f_high, done)
    # false position between low (f > 0) and high (f < 0) on x = log σ and φ = log(smECE_σ / σ), nearly
    # linear in x (smECE_σ ~ σ^s), with the Illinois rule against a stuck end; bisection where smECE_σ = 0
    active = np.flatnonzero(np.isnan(sigmas))
    a, b_ = np.log(low[active]), np.log(high[active])
    with np.errstate(divide="ignore"):
        fa, fb = np.log1p(f_low[active] / low[active]), np.log1p(f_high[active] / high[active])
    last_side = np.zeros(active.size, dtype=np.int8)
    best, best_f = low[active], f_low[active]
    for _ in range(200):
        if not active.size:
            break
        with np.errstate(invalid="ignore"):
            x = np.where(np.isfinite(fb), (a * fb - b_ * fa) / (fb - fa), (a + b_) / 2.0)
        x = np.clip(x, np.minimum(a, b_), np.maximum(a, b_))
        sigma = np.exp(x)
        value = at(active, sigma)
        fx = value - sigma
        with np.errstate(divide="ignore"):
            phi = np.log(value / sigma)
        closer = np.abs(fx) <= np.abs(best_f)
        best, best_f = np.where(closer, sigma, best), np.where(closer, fx, best_f)
        positive = fx > 0.0
        # replace the end of fx's sign; halve the kept end's value when it is kept twice in a row
        fb = np.where(positive & (last_side == 1), fb / 2.0, fb)
        fa = np.where(~positive & (last_side == -1), fa / 2.0, fa)
        a, fa = np.where(positive, x, a), np.where(positive, phi, fa)
        b_, fb = np.where(positive, b_, x), np.where(positive, fb, phi)
        last_side = np.where(positive, 1, -1).astype(np.int8)
        # σ* is about |φ| σ / (1 - s) <= |φ| σ / 1.28 away (s <= -0.28)
        converged = (fx == 0.0) | (np.abs(phi) * sigma <= xtol) \
            | (np.exp(b_) - np.exp(a) <= xtol + 8 * np.finfo(float).eps * sigma)
        done(active[converged], best[converged], best[converged] + best_f[converged])
        keep = ~converged
        active, a, b_, fa, fb, last_side, best, best_f = (v[keep] for v in (active, a, b_, fa, fb, last_side,
                                                                            best, best_f))
    done(active, best, best + best_f)
    return values, sigmas


def _bracket_from_above(at, which, upper, low, f_low, high, f_high, done) -> None:
    """:func:`smooth_ece`'s bracket of σ* for the weightings ``which``: σ = mean |r| (f <= 0), one
    fixed-point step below σ*, a second above it; or, when cancellations make the step fail, a search
    downwards by factors of 4 (down to SIGMA_FLOOR)."""
    f_upper = at(which, upper[which]) - upper[which]
    high[which], f_high[which] = upper[which], f_upper
    above = f_upper >= 0.0
    done(which[above], upper[which[above]], upper[which[above]])
    which, lower = which[~above], (upper[which] + f_upper)[~above]
    stepping = lower > SIGMA_FLOOR
    descending = which[~stepping]
    step_from, lower = which[stepping], lower[stepping]
    f_lower = at(step_from, lower) - lower
    positive = f_lower > 0.0
    low[step_from[positive]], f_low[step_from[positive]] = lower[positive], f_lower[positive]
    done(step_from[f_lower == 0.0], lower[f_lower == 0.0], lower[f_lower == 0.0])
    failed = f_lower < 0.0
    high[step_from[failed]], f_high[step_from[failed]] = lower[failed], f_lower[failed]
    descending = np.concatenate((descending, step_from[failed]))
    stepped = step_from[positive]
    step = low[stepped] + f_low[stepped]
    inside = step < high[stepped]
    stepped, step = stepped[inside], step[inside]
    f_step = at(stepped, step) - step
    high[stepped[f_step < 0.0]], f_high[stepped[f_step < 0.0]] = step[f_step < 0.0], f_step[f_step < 0.0]
    low[stepped[f_step > 0.0]], f_low[stepped[f_step > 0.0]] = step[f_step > 0.0], f_step[f_step > 0.0]
    done(stepped[f_step == 0.0], step[f_step == 0.0], step[f_step == 0.0])
    point = high[descending].copy()
    while descending.size:
        point = np.maximum(point / 4.0, SIGMA_FLOOR)
        f_point = at(descending, point) - point
        up = f_point > 0.0
        low[descending[up]], f_low[descending[up]] = point[up], f_point[up]
        floor = ~up & (point == SIGMA_FLOOR)
        done(descending[floor], point[floor], f_point[floor] + point[floor])
        still = ~up & ~floor
        high[descending[still]], f_high[descending[still]] = point[still], f_point[still]
        descending, point = descending[still], point[still]
