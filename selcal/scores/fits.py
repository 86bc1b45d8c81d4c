"""Fits on the validation split: temperature, the p of p-norm, (p, T) of pNormSoftmax.

Both fits read validation rows only (CONVENTIONS.md, "Scores" and "Validation split").
"""

from __future__ import annotations

import math
import os
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import functions as scores
from ..errors import carried
from ..metrics.selective import AURC_ESTIMATORS, augrc, aurc, risk_coverage

__all__ = ["TemperatureFit", "fit_temperature", "fit_temperature_by_aurc", "PnormFit", "fit_pnorm", "mean_nll",
           "PnormSoftmaxFit", "fit_pnorm_softmax", "PNORM_SOFTMAX_T_GRID",
           "TEMPERATURE_OBJECTIVES", "PNORM_OBJECTIVES"]

GRADIENT_TOLERANCE = 1e-9


def mean_nll(logits: np.ndarray, labels: np.ndarray, inverse_temperature: float = 1.0) -> float:
    """mean_i (logsumexp(beta v_i) - beta v_iy), summed exactly (order-independent)."""
    def per_row(rows) -> np.ndarray:
        chunk, chunk_labels = np.asarray(logits[rows], dtype=np.float64), labels[rows]
        pred, _, rest = scores.softmax_terms(chunk, inverse_temperature)
        index = np.arange(chunk_labels.size)
        gap = chunk[index, pred] - chunk[index, chunk_labels]
        return inverse_temperature * gap + np.log1p(rest)

    chunks = list(scores.row_chunks(*logits.shape))
    with _threads(len(chunks)) as run:  # the chunks on threads, gathered in order
        return scores.exact_mean(np.concatenate(list(run(per_row, chunks))))


@dataclass
class TemperatureFit:
    """Result of :func:`fit_temperature`.

    ``fallback`` names why T = 1 was kept instead of a fitted value (``None`` when fitted).
    """

    temperature: float
    nll_before: float
    nll_after: float
    gradient: float | None
    iterations: int
    fallback: str | None = None
    objective: str = "nll"
    val_objective: float | None = None  # the validation AURC, when T was chosen by AURC
    nll_temperature: float | None = None  # the NLL-optimal T, when T was chosen by AURC


@contextmanager
def _threads(n_items: int):
    """A ``map`` over up to 4 threads (numpy's loops run without the GIL) whose results come in order,
    each item computed as it would be alone: the same bits as the builtin ``map``, which is what it
    is for one item or one core."""
    threads = min(4, os.cpu_count() or 1, n_items)
    if threads <= 1:
        yield map
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads) as pool:
        yield lambda fn, *items: pool.map(carried(fn), *items)  # (its messages in the caller's face)


KEEP_SHIFTED_ELEMENTS = 1 << 24  # validation logits up to this many: their d' is kept in float64 (128 MB)


class _ScaledNll:
    """NLL as a function of beta' = beta s, and its first two derivatives.

    The logits are shifted so each row's top logit is 0 and divided by s, a power of two
    at least the largest spread v_max - v_min of a row (exact): d' = (v - v_max) / s lies
    in [-1, 0] whatever the logits' magnitude (1e-3 or 1e300), so nothing overflows and
    the search for beta' starts at the right scale.
    """

    def __init__(self, logits: np.ndarray, labels: np.ndarray):
        self.logits, self.labels, self.n = logits, labels, labels.size
        self.chunks = list(scores.row_chunks(*logits.shape))

        def spread(rows) -> float:
            chunk = np.asarray(logits[rows], dtype=np.float64)
            return float(np.max(chunk.max(axis=1) * 0.5 - chunk.min(axis=1) * 0.5))

        def row_terms(rows) -> tuple[np.ndarray, np.ndarray]:
            shifted = self._shift(rows)
            return shifted[np.arange(shifted.shape[0]), labels[rows]], shifted.mean(axis=1)

        # d' of every chunk is kept between the derivatives' evaluations when it is small (a third of
        # their work, e.g. 80 MB for 10 000 x 1000 validation rows), else made again each time.
        self._kept: dict | None = {} if logits.size <= KEEP_SHIFTED_ELEMENTS else None
        # one array, not a block per chunk from each thread's malloc arena (which kept 65 MB more resident)
        self._store = np.empty(logits.shape, dtype=np.float64) if self._kept is not None else None
        with _threads(len(self.chunks)) as run:  # the chunks on threads, gathered in order
            largest = max(run(spread, self.chunks), default=0.0)
            self.scale = math.ldexp(1.0, math.frexp(largest)[1] + 1) if largest > 0 else 1.0
            terms = list(run(row_terms, self.chunks))
        self.label_shift = np.concatenate([label for label, _ in terms])  # d'_iy <= 0
        self.mean_shift = np.concatenate([mean for _, mean in terms])  # mean_k d'_ik: E_p[d'] at beta = 0

    def _shift(self, rows) -> np.ndarray:
        if self._kept is not None:
            if rows.start in self._kept:
                return self._kept[rows.start]
            shifted = self._store[rows]  # made in place in the one array allocated by the calling thread
            np.divide(self.logits[rows], self.scale, out=shifted, dtype=np.float64)
            shifted -= shifted.max(axis=1, keepdims=True)
            self._kept[rows.start] = shifted
            return shifted
        chunk = np.asarray(self.logits[rows], dtype=np.float64) / self.scale
        return chunk - chunk.max(axis=1, keepdims=True)

    def _moments(self, rows, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """E_p[d'] and Var_p[d'] of the rows of one chunk: the sums of e, e d' and e d'^2 with
        e = exp(beta d') in (0, 1] (1 at the top logit), divided once per row."""
        shifted = self._shift(rows)
        weights = np.multiply(shifted, beta)
        np.exp(weights, out=weights)
        total = weights.sum(axis=1)
        weights *= shifted  # e d'
        first = weights.sum(axis=1) / total
        second = np.einsum("ij,ij->i", weights, shifted) / total
        return first, np.maximum(second - first * first, 0.0)

    def derivatives(self, beta: float) -> tuple[float, float]:
        """dNLL/dbeta' = mean(E_p[d'] - d'_y) and d2NLL/dbeta'2 = mean(Var_p[d'])."""
        with _threads(len(self.chunks)) as run:  # the chunks on threads, gathered in order
            parts = list(run(lambda rows: self._moments(rows, beta), self.chunks))
        mean_d, variance = [first for first, _ in parts], [var for _, var in parts]
        gradient = math.fsum(np.concatenate(mean_d) - self.label_shift) / self.n
        curvature = math.fsum(np.concatenate(variance)) / self.n
        return gradient, curvature


# Validation sets of at least this many rows start Newton's method from the T fitted on a sixteenth of
# their rows, chosen by content (WARM_START_SHARE), instead of from a power-of-two bracket.
WARM_START_ROWS = 1 << 13
WARM_START_SHARE = 16


def _warm_start(nll: "_ScaledNll", logits: np.ndarray, labels: np.ndarray) -> float | None:
    """beta' of the T fitted (to 1e-6) on about 1 / WARM_START_SHARE of the rows, or None when there are too
    few rows or no finite T fits them.

    The rows are chosen by a hash of their content (d'_y, mean d', label), never by their position,
    so the start, and so the fitted T bit for bit, does not depend on the order of the rows.
    """
    if nll.n < WARM_START_ROWS:
        return None
    with np.errstate(over="ignore"):
        key = (nll.label_shift.view(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
               ^ nll.mean_shift.view(np.uint64) * np.uint64(0xBF58476D1CE4E5B9)
               ^ labels.astype(np.uint64) * np.uint64(0x94D049BB133111EB))
        key ^= key >> np.uint64(31)
        key *= np.uint64(0xD6E8FEB86659FD93)
    rows = np.flatnonzero(key >> np.uint64(60) == 0)  # the top 4 bits: 1 / 16 of the rows
    if rows.size < WARM_START_ROWS // WARM_START_SHARE // 2:
        return None
    sub = fit_temperature(np.asarray(logits)[rows], labels[rows], tolerance=1e-6)
    if sub.fallback is not None:
        return None
    return nll.scale / sub.temperature


def fit_temperature(logits: np.ndarray, labels: np.ndarray, max_iterations: int = 200, *,
                    tolerance: float = GRADIENT_TOLERANCE) -> TemperatureFit:
    """Temperature T > 0 minimising the validation NLL of softmax(v / T), solved exactly.

    The NLL is convex in beta = 1/T, so its minimiser is the root of dNLL/dbeta. The root
    is bracketed (dNLL/dbeta < 0 at beta -> 0+ and > 0 past the minimiser), starting from
    T = the logits' spread, and found by Newton's method safeguarded by bisection, until |dNLL/dbeta| < 1e-9
    or the bracket is as narrow as float64 allows (logits of magnitude 1e300). No fixed
    step count, no learning rate. From 8 192 validation rows up, Newton's method starts instead
    from the T fitted on a sixteenth of the rows chosen by content (:func:`_warm_start`): about
    half the passes over the logits.

    When no finite T > 0 minimises the NLL, T = 1 is kept and ``fallback`` says why:
    ``"no validation errors"`` (NLL decreases forever as T -> 0) or
    ``"no better than uniform"`` (NLL decreases forever as T -> infinity).

    References
    ----------
    Guo et al., "On calibration of modern neural networks", ICML 2017, sec. 4.2.
    """
    labels = np.asarray(labels, dtype=np.int64)
    nll = _ScaledNll(logits, labels)
    before = mean_nll(logits, labels)
    scale = nll.scale  # beta' = beta * scale; dNLL/dbeta = scale * dNLL/dbeta'
    tolerance = tolerance / max(scale, 1.0)  # |dNLL/dbeta| < 1e-9, and |dNLL/dbeta'| < 1e-9

    def keep_one(reason: str, gradient: float) -> TemperatureFit:
        return TemperatureFit(1.0, before, before, gradient * scale, 0, fallback=reason)

    gradient_at_zero = math.fsum(nll.mean_shift - nll.label_shift) / nll.n
    if gradient_at_zero > -tolerance:
        # dNLL/dbeta >= 0 at beta = 0 (within the solver's tolerance, which rounding of the mean
        # logit can reach when it is 0 in exact arithmetic): the NLL is smallest as T -> infinity.
        return keep_one("no better than uniform", gradient_at_zero)
    if not (nll.label_shift < 0).any():
        # Every label attains its row's top logit: dNLL/dbeta < 0 for every beta, no root.
        return keep_one("no validation errors", gradient_at_zero)
    # Bracket the root: high = the first beta' = 2**k (k = 0, 1, ...) where the gradient turns
    # positive (or within tolerance), low = the power before it (0 for k = 0). The gradient increases
    # with beta', so that power is searched from T = 1 (beta' = scale, itself a power of two, where
    # most models' T is near): halving while the gradient stays positive, else doubling. The same
    # bracket, and so the same bits, as doubling from beta' = 1, in 2-3 evaluations instead of ~8.
    def reached(gradient: float) -> bool:
        return gradient > 0 or abs(gradient) < tolerance

    def newton(low: float, high: float, beta: float, gradient: float, curvature: float, most: int):
        """Newton's method safeguarded by bisection (in log scale) inside [low, high] (high may be infinite)."""
        iterations = 0
        while abs(gradient) >= tolerance and iterations < most:
            iterations += 1
            if gradient > 0:
                high = beta
            else:
                low = beta
            step = beta - gradient / curvature if curvature > 0 else math.nan
            if math.isinf(high):
                halfway = 2.0 * beta
            else:
                halfway = math.sqrt(low * high) if low > 0 else 0.5 * high  # bisect in log scale
            beta = step if low < step < high else halfway
            if not low < beta < high:  # the bracket cannot shrink any further
                break
            gradient, curvature = nll.derivatives(beta)
        return beta, gradient, curvature, iterations

    start = _warm_start(nll, logits, labels)
    if start is not None:
        beta, gradient, curvature, iterations = newton(0.0, math.inf, start, *nll.derivatives(start), most=20)
        if abs(gradient) >= tolerance:
            start = None  # not there within 20 steps: the bracketed search below, as for few rows
    if start is None:
        low, high = 0.0, None
        beta = max(scale, 1.0)
        gradient, curvature = nll.derivatives(beta)
        if reached(gradient):
            while beta > 1.0:
                below = nll.derivatives(beta / 2)
                if not reached(below[0]):
                    if below[1] == 0.0:  # flat below the root: every softmax already one-hot (see below)
                        return keep_one("no validation errors", below[0])
                    low = beta / 2
                    break
                beta, (gradient, curvature) = beta / 2, below
            high = beta
        else:
            for _ in range(2100):
                low = beta
                if curvature == 0.0 or not math.isfinite(beta * 2):
                    break  # flat: every softmax is already one-hot at this beta
                beta *= 2.0
                gradient, curvature = nll.derivatives(beta)
                if reached(gradient):
                    high = beta
                    break
        if high is None:
            return keep_one("no validation errors", gradient)
        beta, gradient, curvature, iterations = newton(low, high, beta, gradient, curvature, max_iterations)
    if curvature > 0 and gradient != 0:
        # One more Newton step past the tolerance: quadratic convergence takes T to the last digits.
        polished = beta - gradient / curvature
        polished_gradient, polished_curvature = nll.derivatives(polished) if polished > 0 else (math.inf, 0.0)
        if abs(polished_gradient) < abs(gradient):  # and never past beta = 0 (T > 0)
            beta, gradient = polished, polished_gradient
    return TemperatureFit(
        temperature=scale / beta,
        nll_before=before,
        nll_after=mean_nll(logits, labels, beta / scale),
        gradient=gradient * scale,
        iterations=iterations,
    )


TEMPERATURE_OBJECTIVES = ("nll", "aurc")


def fit_temperature_by_aurc(logits: np.ndarray, labels: np.ndarray, around: float, *, estimator: str = AURC_ESTIMATORS[0],
                            octaves: int = 6, steps_per_octave: int = 8) -> tuple[float, float]:
    """(T, validation AURC at T): the T of a log grid that ranks validation errors best.

    The grid is ``around`` * 2**(j / steps_per_octave) for |j| <= octaves * steps_per_octave
    (a factor 64 either way of the NLL-optimal T by default). AURC is piecewise constant in
    T, so a grid, not a derivative, finds its minimum; ties go to the T nearest ``around``,
    then to the smaller T. This is the option of Cattelan & Silva (2023), who tune T for
    selective classification rather than for calibration.
    """
    labels = np.asarray(labels, dtype=np.int64)
    span = octaves * steps_per_octave
    exponents = np.arange(-span, span + 1)
    temperatures = around * np.exp2(exponents / steps_per_octave)
    log_msps = np.empty((labels.size, temperatures.size))
    correct = np.empty(labels.size, dtype=bool)
    for rows in scores.row_chunks(*logits.shape):
        chunk = np.asarray(logits[rows], dtype=np.float64)
        correct[rows] = np.argmax(chunk, axis=1) == labels[rows]
        for j, temperature in enumerate(temperatures):
            log_msps[rows, j] = scores.log_msp(chunk, 1.0 / temperature)
    objective = np.array([aurc(risk_coverage(log_msps[:, j], correct), estimator) for j in range(temperatures.size)])
    best = min(range(temperatures.size), key=lambda j: (objective[j], abs(exponents[j]), exponents[j]))
    return float(temperatures[best]), float(objective[best])


@dataclass
class PnormFit:
    """Result of :func:`fit_pnorm`: the grid's best p and whether MSP is used instead."""

    p: int
    fallback: bool
    center: bool
    objective: str
    val_objective: dict[int, float] = field(default_factory=dict)
    val_objective_msp: float = math.nan


PNORM_OBJECTIVES = ("aurc", "augrc")
P_BLOCK = 16  # values of p scored per pass over the validation logits


def fit_pnorm(
    logits: np.ndarray,
    labels: np.ndarray,
    p_grid=range(1, 11),
    *,
    center: bool = True,
    objective: str = PNORM_OBJECTIVES[0],
    estimator: str = AURC_ESTIMATORS[0],
) -> PnormFit:
    """Choose p by the lowest validation AURC (or AUGRC); fall back to MSP when it is no worse.

    Ties between values of p go to the smallest p. Fallback when the MSP's validation
    objective is lower than or equal to the best p's (Cattelan & Silva, sec. 4).
    """
    if objective not in PNORM_OBJECTIVES:
        raise ValueError(f"unknown p-norm objective {objective!r}; use one of {PNORM_OBJECTIVES}")
    p_grid = sorted({int(p) for p in p_grid})
    labels = np.asarray(labels, dtype=np.int64)
    n = labels.size
    correct, msp_scores = np.empty(n, dtype=bool), np.empty(n)
    val_objective = {}

    def measure(score: np.ndarray) -> float:
        curve = risk_coverage(score, correct)
        return aurc(curve, estimator) if objective == "aurc" else augrc(curve)

    # One pass over the validation logits per block of p values: memory N x P_BLOCK floats,
    # whatever the grid's size (the score of a p does not depend on the rest of the grid).
    chunks = list(scores.row_chunks(*logits.shape))
    with _threads(len(chunks)) as run:  # the chunks, then the values of p, on threads
        for first in range(0, len(p_grid), P_BLOCK):
            block = p_grid[first:first + P_BLOCK]
            grid_scores = np.empty((n, len(block)))

            def chunk_scores(rows, block=block, grid_scores=grid_scores, first=first):
                chunk = np.asarray(logits[rows], dtype=np.float64)
                if first == 0:
                    correct[rows] = np.argmax(chunk, axis=1) == labels[rows]
                    msp_scores[rows] = scores.log_msp(chunk)
                grid_scores[rows] = scores.pnorm_grid(chunk, block, center)

            list(run(chunk_scores, chunks))
            val_objective.update(zip(block, run(lambda j, grid_scores=grid_scores: measure(grid_scores[:, j]),
                                                range(len(block)))))
            del grid_scores
    best_p = min(p_grid, key=lambda p: (val_objective[p], p))
    msp_objective = measure(msp_scores)
    return PnormFit(
        p=best_p,
        fallback=bool(msp_objective <= val_objective[best_p]),
        center=center,
        objective=objective,
        val_objective=val_objective,
        val_objective_msp=msp_objective,
    )


# T of pNormSoftmax: 2**(j/2) for j = -20 .. 4, i.e. 1/1024 .. 4. The normalised logits
# z_c / ||z_c||_p have entries in [-1, 1], so the softmax of z_c / (T ||z_c||_p) goes from
# nearly uniform (T = 4) to nearly one-hot (T = 1/1024) over this grid.
PNORM_SOFTMAX_T_GRID = tuple(2.0 ** (j / 2) for j in range(-20, 5))


@dataclass
class PnormSoftmaxFit:
    """Result of :func:`fit_pnorm_softmax`: the best (p, T) of the grid and whether MSP is used instead."""

    p: int
    temperature: float
    fallback: bool
    center: bool
    val_objective: float  # validation AURC at the chosen (p, T)
    val_objective_msp: float


def fit_pnorm_softmax(logits: np.ndarray, labels: np.ndarray, p_grid=range(1, 11), t_grid=PNORM_SOFTMAX_T_GRID, *,
                      center: bool = True, estimator: str = AURC_ESTIMATORS[0]) -> PnormSoftmaxFit:
    """(p, T) of pNormSoftmax, MSP(z_c / (T ||z_c||_p)), by the lowest validation AURC over the grid.

    Ties go to the smallest p, then the smallest T. Falls back to MSP when MSP's validation
    AURC is lower or equal (as :func:`fit_pnorm`). The choice is that of the exact scores
    ``log_msp(normalised_logits(v, p), 1 / T)`` of every (p, T). Most cells of the grid are
    computed exactly, bit for bit (see :func:`_pnorm_softmax_grid` for how, faster). A cell
    whose exponentials underflow (the smallest T) is first computed without its terms below
    e**-700, with a bound on each row's error; its AURC is then bounded below
    (:func:`_aurc_lower_bound`), and the cell is computed exactly only when that bound does
    not already exceed the best exact AURC: branch and bound, the same choice. Memory: the
    validation rows times the grid, by blocks of p of at most GRID_VALUES numbers.

    References
    ----------
    Cattelan & Silva, "How to fix a broken confidence estimator: evaluating post-hoc methods
    for selective classification with deep neural networks", UAI 2024 (pNormSoftmax).
    """
    labels = np.asarray(labels, dtype=np.int64)
    p_grid = sorted({int(p) for p in p_grid})
    t_grid = sorted(float(t) for t in t_grid)
    n = labels.size
    correct = np.empty(n, dtype=bool)
    msp = np.empty(n)
    chunks = list(scores.row_chunks(*logits.shape, max(1, GRID_CHUNK_ELEMENTS // max(logits.shape[1], 1))))
    # Slack for every T when some T is twice another (their exponentials are then squares: see
    # _pnorm_softmax_grid), else only for the smallest T, which alone can underflow: the normalised
    # logits lie in [-1, 1], so v / T >= -2 / T.
    n_slack = (len(t_grid) if any(d is not None for d in _doublings(t_grid))
               else sum(1 for t in t_grid if t * -_EXP_FAST_FROM < _NORMALISED_SPAN))
    block = max(1, GRID_VALUES // max(1, n * (len(t_grid) + n_slack)))  # the values, and the slack of those T
    tail = _aurc_tail(n)  # for the lower bounds of every bounded cell
    exact: dict[tuple[int, int], float] = {}  # (index of p, index of T) -> validation AURC
    bounds: dict[tuple[int, int], float] = {}  # cells computed with slack -> a lower bound of their AURC
    with _threads(len(chunks)) as run:  # chunks, then cells, on threads
        for first in range(0, len(p_grid), block):
            ps = p_grid[first:first + block]
            values = np.empty((len(ps), len(t_grid), n))
            slack = np.empty((len(ps), n_slack, n))

            def chunk_values(rows, ps=ps, values=values, slack=slack, first=first):
                chunk = np.asarray(logits[rows], dtype=np.float64)
                if first == 0:
                    correct[rows] = np.argmax(chunk, axis=1) == labels[rows]
                    msp[rows] = scores.log_msp(chunk)
                _pnorm_softmax_grid(chunk, ps, t_grid, center, values[:, :, rows], slack[:, :, rows])

            # Chunks on threads (numpy's exp, the bulk of the work, runs without the GIL); every
            # number is computed as one chunk after the other would, so the bits do not change.
            list(run(chunk_values, chunks))
            cells = [(i, j) for i in range(len(ps)) for j in range(len(t_grid))]

            def objective(cell, values=values, slack=slack):
                if cell[1] < n_slack and slack[cell].any():
                    return False, _aurc_lower_bound(values[cell], slack[cell], correct, estimator, tail)
                return True, aurc(risk_coverage(values[cell], correct), estimator)

            for (i, j), (is_exact, value) in zip(cells, run(objective, cells)):
                (exact if is_exact else bounds)[first + i, j] = value
            del values, slack

    def better(cell, value, best):  # lower AURC; on a tie the smaller p, then the smaller T
        return best is None or (value, cell) < (best[1], best[0])

    best = None
    for cell, value in exact.items():
        if better(cell, value, best):
            best = (cell, value)
    for cell in sorted(bounds, key=lambda c: (bounds[c], c)):
        if best is not None and bounds[cell] > best[1] + _aurc_margin(best[1], n):
            break  # this cell and every later one cannot reach the best, nor tie with it
        value = aurc(risk_coverage(_pnorm_softmax_cell(logits, chunks, p_grid[cell[0]], t_grid[cell[1]], center),
                                   correct), estimator)
        if better(cell, value, best):
            best = (cell, value)
    (i, j), objective_value = best
    msp_objective = aurc(risk_coverage(msp, correct), estimator)
    return PnormSoftmaxFit(p=p_grid[i], temperature=t_grid[j], fallback=bool(msp_objective <= objective_value),
                           center=center, val_objective=objective_value, val_objective_msp=msp_objective)


# The bound is compared with exact AURCs summed in another order: a relative margin above float64's
# rounding of either (the bound's running sums of 1/k are within N * 2**-53 of their value, so the
# margin grows with N past about 10 million rows: see _aurc_margin).
_AURC_ROUNDING = 1e-9


def _aurc_margin(best: float, n: int) -> float:
    """How far above the best exact AURC a lower bound computed on ``n`` rows must be to exclude a cell."""
    return (_AURC_ROUNDING + 4.0 * n * 2.0 ** -53) * max(abs(best), 1e-300)


def _pnorm_softmax_cell(logits: np.ndarray, chunks, p: int, temperature: float, center: bool) -> np.ndarray:
    """The exact scores of one (p, T) on every row, chunk by chunk: the grid's exact path, which is
    ``log_msp(normalised_logits(v, p), 1 / T)`` bit for bit and faster where exp underflows."""
    values = np.empty((1, 1, logits.shape[0]))
    for rows in chunks:
        _pnorm_softmax_grid(np.asarray(logits[rows], dtype=np.float64), [p], [temperature], center, values[:, :, rows])
    return values[0, 0]


def _aurc_lower_bound(score: np.ndarray, slack: np.ndarray, correct: np.ndarray, estimator: str,
                      tail: np.ndarray | None = None) -> float:
    """A lower bound of the AURC of every score within ``slack`` of ``score`` (row by row).

    AURC = (1/N) sum over errors of (H_N - H_{r-1}), r the error's rank (1 = most confident;
    with ties, the mean over the tied orders), which decreases as r grows. An error can be
    ranked no later than N minus the rows certainly below it (their largest possible score
    under its smallest), so the sum over errors at those ranks is at most the AURC of any
    order the true scores can take. ``tail`` (:func:`_aurc_tail` of N), when the caller has it.
    """
    n = score.size
    low, high = score - slack, score + slack
    errors = ~correct
    below = np.searchsorted(np.sort(high), low[errors], side="left")  # rows j with high_j < low_i
    latest = n - below  # 1-based
    if tail is None:
        tail = _aurc_tail(n)
    value = float(np.sum(tail[latest - 1]) / n)
    if estimator == "trapz":
        value -= errors.sum() / n / (2 * n)
    return value


def _aurc_tail(n: int) -> np.ndarray:
    """tail[r - 1] = sum_{k >= r} 1 / k for r = 1..n, summed from the smallest term."""
    return np.cumsum(1.0 / np.arange(n, 0, -1, dtype=np.float64))[::-1]


GRID_VALUES = 1 << 22  # scores of the pNormSoftmax grid held at once (32 MB): the rows times a block of p times T
# Logits per chunk of the grid: each of its float64 arrays is 2 MiB, so that the 25 passes over a chunk
# for each p run mostly in cache (the same numbers, row by row; measured in bench/README.md).
GRID_CHUNK_ELEMENTS = 1 << 18

# numpy's vectorised exp is fast from this argument up; below about -708 (the log of the smallest
# normal float64 is -708.396) it takes a slow path, 10 to 100 times slower per value.
_EXP_FAST_FROM = -700.0


def _pnorm_softmax_grid(chunk: np.ndarray, ps, t_grid, center: bool, out: np.ndarray,
                        slack: np.ndarray | None = None) -> None:
    """``out[i, j] = log_msp(normalised_logits(chunk, ps[i], center), 1 / t_grid[j])``, bit for bit.

    Each array is built once per chunk and reused: the rescaled centred logits once for every p
    (:func:`~selcal.scores.functions.normalised_grid` shares their powers between the values of p),
    for each p the top class and the shift by its value once for every T (log_msp's operations on
    the same numbers). No N x K array is allocated inside the loops.

    With ``slack`` (of shape (len(ps), J, rows) for the J smallest T of ``t_grid``, which must be
    increasing), a (p, T) of those whose exponentials underflow is computed faster, its terms below
    e**-700 taken as e**-700 (numpy's exp takes a slow path below, value by value), and
    ``slack[i, j]`` bounds each row's error (0 where no term was below: those rows are bit for
    bit); elsewhere ``slack`` is 0. The other T are computed exactly. See :func:`_underflow_slack`.
    With ``slack`` for every T, a T half of another T of the grid has its exponentials computed as
    the squares of that T's (exp(2 v) = exp(v)**2, and v / T is exactly twice v / (2 T)): one
    multiplication instead of a multiplication and an exp, at most _SQUARINGS times in a row, and
    ``slack`` bounds the error (:func:`_squared_slack`); a cell after an exp is exact (slack 0).
    """
    x, _ = scores.centred_scaled(chunk, center)
    terms = np.empty_like(x)
    low, keep = np.empty(x.shape, dtype=bool), np.empty_like(x)
    at = np.arange(x.shape[0])
    chained = slack is not None and slack.shape[1] == len(t_grid)
    doubled = _doublings(t_grid)
    halved = {d for d in doubled if d is not None}
    spare: list[np.ndarray] = []  # arrays for the exponentials of the chains
    for i, (_, normalised) in enumerate(scores.normalised_grid(x, ps, center)):
        top = np.argmax(normalised, axis=1)
        normalised -= normalised[at, top][:, None]  # v - v_max, as softmax_terms shifts
        row_lowest = normalised.min(axis=1)
        lowest = row_lowest.min()
        row_second = None  # each row's largest value off its top class, when an underflowing T asks
        kept: dict[int, tuple[np.ndarray, int]] = {}  # index of a T -> (its exponentials, squarings since an exp)
        order = reversed(range(len(t_grid))) if chained else range(len(t_grid))  # chains run from the largest T
        for j in order:
            temperature = t_grid[j]
            fast = lowest * (1.0 / temperature) >= _EXP_FAST_FROM  # the smallest of terms (a product is monotone)
            if chained and fast:
                source = kept.pop(doubled[j], None) if doubled[j] is not None else None
                if source is not None and source[1] < _SQUARINGS:
                    exps, steps = source[0], source[1] + 1
                    np.multiply(exps, exps, out=exps)  # exp(v / T) = exp(v / (2 T))**2
                else:
                    if source is not None:
                        spare.append(source[0])
                    exps, steps = (spare.pop() if spare else np.empty_like(x)), 0
                    np.multiply(normalised, 1.0 / temperature, out=exps)
                    np.exp(exps, out=exps)
                exps[at, top] = 0.0
                sums = scores.row_sums(exps)
                exps[at, top] = 1.0  # exp(0), for the next square
                out[i, j] = -np.log1p(sums)
                slack[i, j] = 0.0 if steps == 0 else _squared_slack(sums, steps, out[i, j], x.shape[1])
                if j in halved:
                    kept[j] = (exps, steps)
                else:
                    spare.append(exps)
                continue
            np.multiply(normalised, 1.0 / temperature, out=terms)
            bounded = False
            if (not fast and slack is not None and j < slack.shape[1]
                    and np.count_nonzero(np.less(terms, _EXP_FAST_FROM, out=low)) >= _SLOW_VALUES_PER_ROW * x.shape[0]):
                if row_second is None:  # (in ``keep``, a free buffer)
                    np.copyto(keep, normalised)
                    keep[at, top] = -np.inf
                    row_second = keep.max(axis=1)
                bounded = np.count_nonzero(row_second * (1.0 / temperature) < _SATURATED_BELOW) <= (
                    _SATURATED_SHARE * x.shape[0])
            if fast:
                np.exp(terms, out=terms)
            elif not bounded:
                np.exp(terms, out=terms)
            else:  # the terms below e**-700 raised to it (numpy's fast path), the error this may cause bounded
                np.maximum(terms, _EXP_FAST_FROM, out=terms)
                np.exp(terms, out=terms)
            terms[at, top] = 0.0
            sums = scores.row_sums(terms)
            out[i, j] = -np.log1p(sums)
            if slack is not None and j < slack.shape[1]:  # rows whose smallest term is not below e**-700 are exact
                slack[i, j] = 0.0 if not bounded else _underflow_slack(
                    sums, row_lowest * (1.0 / temperature) < _EXP_FAST_FROM, out[i, j], terms.shape[1])
        spare.extend(exps for exps, _ in kept.values())


def _doublings(t_grid) -> list:
    """For each T of the grid, the index of 2 T in the grid (exactly), or None."""
    index = {float(t): k for k, t in enumerate(t_grid)}
    return [index.get(2.0 * float(t)) for t in t_grid]


# Squarings in a row before an exp again: the error bound doubles with each (_squared_slack).
_SQUARINGS = 6
# numpy's float64 exp is taken to be within this many units in the last place of exp (it is within 1
# where tests/scores/test_pnorm_softmax_bound.py measures it against Python's correctly rounded Decimal.exp).
_EXP_ULPS = 4


def _squared_slack(sums: np.ndarray, steps: int, score: np.ndarray, n_classes: int) -> np.ndarray:
    """Per row, a bound of |exact score - score| when the score is -log1p(S') and S' the row sum of
    terms computed as numpy's exp of v / (2**steps T) squared ``steps`` times instead of exp(v / T).

    Each term is then within eta = 1.01 (2 EXP_ULPS + 2) 2**steps 2**-53 of its exact value: the exp's
    error and each square's rounding are raised to the later powers (the exact-path term is within
    EXP_ULPS units too). Both sums, of K nonnegative terms, are within gamma = 1.01 K 2**-53 of their
    exact sums (Higham, eq. 4.4): |S - S'| <= (2 gamma + eta) S' / ((1 - gamma) (1 - eta)). log1p adds
    at most that (slope at most 1 on S >= 0) plus 8 * 2**-53 of the scores' size, as in _underflow_slack.
    """
    unit = 2.0 ** -53
    gamma = 1.01 * n_classes * unit
    eta = 1.01 * (2 * _EXP_ULPS + 2) * 2.0 ** steps * unit
    sum_error = (2.0 * gamma + eta) * sums / ((1.0 - gamma) * (1.0 - eta))
    return _score_slack(sum_error, score)


# A chunk of a (p, T) is computed with slack only when it pays: at least this many of its values per
# row take exp's slow path (about 25 ns each, against about 150 ns per row for the cell's lower bound
# of AURC), and at most this share of its rows are saturated, their largest term off the top class
# below e**-640 (their slack, K * 1e-304, is then not negligible against their sum: such rows tie
# within their slack, the bound is loose and the cell is computed again; up to 11% of the rows on
# the ImageNet-size benchmark, 80-95% on CIFAR-10 at the smallest T). Few classes (K = 10) and
# saturated cells are computed exactly at once.
_SLOW_VALUES_PER_ROW = 32
_SATURATED_BELOW = -640.0
_SATURATED_SHARE = 0.25
# The normalised logits' largest spread within a row (they lie in [-1, 1]), with room for rounding.
_NORMALISED_SPAN = 2.001
# e**-700 < 1e-304: a term the grid's fast path raises to e**-700, and e**-700 itself, are below this
_RAISED_TERM = 1e-304


def _underflow_slack(sums: np.ndarray, raised: np.ndarray, score: np.ndarray, n_classes: int) -> np.ndarray:
    """Per row, a bound of |exact score - score| when the score is -log1p(S') and S' a row sum of
    ``n_classes`` terms of which some (in the rows where ``raised``) were computed as e**-700 instead
    of their exp, also below 1e-304; 0 in the other rows (their terms are the exact ones).

    Both S (the exact terms) and S' are float64 sums of K nonnegative terms (in whatever order
    ``row_sums`` adds them), each within gamma = 1.01 K 2**-53 of its exact sum (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed., eq. 4.4), and the exact sums differ by at most D = K * 1e-304:
    |S - S'| <= gamma (2 S' / (1 - gamma) + D) + D. log1p has slope at most 1 on S >= 0, and each of
    the two log1p values is within a few units in the last place: 8 * 2**-53 of their size is added.
    """
    unit = 2.0 ** -53
    gamma = 1.01 * n_classes * unit
    moved = n_classes * _RAISED_TERM
    sum_error = gamma * (2.0 * sums / (1.0 - gamma) + moved) + moved
    return np.where(raised, _score_slack(sum_error, score), 0.0)


def _score_slack(sum_error: np.ndarray, score: np.ndarray) -> np.ndarray:
    """The slack of -log1p(S') when S' is within ``sum_error`` of the exact S >= 0: log1p has slope at
    most 1 there, and each of the two log1p values is within a few units in the last place (8 * 2**-53
    of their size is added)."""
    return sum_error + 8.0 * 2.0 ** -53 * (np.abs(score) + sum_error)
