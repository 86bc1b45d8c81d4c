"""Confidence scores from logits (CONVENTIONS.md, "Scores"). Pure functions of arrays.

The registry that names them is :mod:`selcal.scores.registry`; the built-in entries are in
:mod:`selcal.scores.builtin`.

All functions take a float64 logit matrix of shape (N, K) with K >= 2 and return one
float64 value per row (higher = more confident).
"""

from __future__ import annotations

import math
import numpy as np

__all__ = [
    "row_chunks",
    "CACHE_ELEMENTS",
    "CHUNK_ELEMENTS",
    "exact_mean",
    "row_sums",
    "ChunkTerms",
    "energy",
    "negative_entropy",
    "margin",
    "logit_margin",
    "gini",
    "normalised_logits",
    "normalised_grid",
    "softmax_terms",
    "log_msp",
    "max_logit",
    "pnorm",
    "pnorm_grid",
]

# Up to this many classes, per-row sums run over the terms sorted ascending: rows that are
# permutations of one another then get bit-identical scores (and tie, as they do exactly),
# for a negligible cost. Beyond it a sort would cost more than the rest of the pass, and
# permuted duplicate rows are vanishingly rare, so sums run in class order.
SORTED_SUM_MAX_CLASSES = 64


CHUNK_ELEMENTS = 1 << 19  # logits per row batch read from a file (float32: 2 MB)
# Logits per block of a computing pass: each float64 temporary is 1 MB, so that the dozen
# passes over a block (shift, exp, sums, powers) run in a core's L2 cache instead of memory.
# On the ImageNet-size benchmark's evaluation rows (2 MB L2 per core), blocks of 2**17 took 0.6x
# the time of 2**19 on one thread and 0.5x on two; 2**16 and below lose it again to the GIL.
CACHE_ELEMENTS = 1 << 17


def row_chunks(n_rows: int, n_classes: int, rows_per_chunk: int | None = None):
    """Slices of at most ``rows_per_chunk`` rows (default: about CACHE_ELEMENTS logits each)."""
    step = rows_per_chunk or max(1, CACHE_ELEMENTS // max(n_classes, 1))
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))


def exact_mean(values: np.ndarray) -> float:
    """The mean of float64 values from their exact (correctly rounded) sum, ``math.fsum``.

    Independent of the order of the values. Values near float64's largest are first
    scaled by a power of two (exact), so the sum cannot overflow.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    try:
        return math.fsum(values) / values.size
    except OverflowError:
        shift = values.size.bit_length()
        return math.ldexp(math.fsum(np.ldexp(values, -shift)) / values.size, shift)


def row_sums(terms: np.ndarray) -> np.ndarray:
    """Sum over each row; in sorted order when K <= SORTED_SUM_MAX_CLASSES."""
    if terms.shape[1] <= SORTED_SUM_MAX_CLASSES:
        return np.sort(terms, axis=1).sum(axis=1)
    return terms.sum(axis=1)


def softmax_terms(logits: np.ndarray, inverse_temperature: float = 1.0, pred: np.ndarray | None = None,
                  shifted: np.ndarray | None = None):
    """Shifted exponentials of a softmax, kept apart from the top class.

    Returns ``(pred, exps, rest)`` where ``pred`` is argmax_k v_k (first index on ties),
    ``exps[i, k] = exp(beta (v_ik - v_i,max))`` with the entry of ``pred`` set to 0, and
    ``rest[i] = sum_k exps[i, k]`` = S, so that softmax_k = exps_k / (1 + S) off the top
    class and 1 / (1 + S) on it. Keeping S apart from the 1 of the top class is what
    preserves the precision of confidences within 1e-16 of 1. ``pred`` may be passed when
    already known (it does not depend on the temperature), and with it ``shifted``, the rows
    v - v_max (:attr:`ChunkTerms.shifted`, read and left unchanged).
    """
    if pred is None:
        pred = np.argmax(logits, axis=1)
    rows = np.arange(logits.shape[0])
    if shifted is None:
        exps = logits - logits[rows, pred][:, None]
        if inverse_temperature != 1.0:
            exps *= inverse_temperature
        np.exp(exps, out=exps)
    elif inverse_temperature != 1.0:  # the shared rows stay as they are
        exps = shifted * inverse_temperature
        np.exp(exps, out=exps)
    else:
        exps = np.exp(shifted)
    exps[rows, pred] = 0.0
    return pred, exps, row_sums(exps)


def log_msp(logits: np.ndarray, inverse_temperature: float = 1.0) -> np.ndarray:
    """log of the maximum softmax probability, -log1p(S) with S = sum_{k != pred} exp(v_k - v_max).

    Examples
    --------
    >>> float(np.exp(log_msp(np.array([[0.0, 0.0]]))[0]))
    0.5
    """
    return -np.log1p(softmax_terms(logits, inverse_temperature)[2])


def max_logit(logits: np.ndarray) -> np.ndarray:
    """v_max, the largest logit of each row."""
    return logits.max(axis=1)


def _unit_factors(largest: np.ndarray) -> np.ndarray:
    """1 / the power of two just above each row's ``largest`` |value|: the row times it is exact, and below 1."""
    exponent = np.maximum(np.frexp(largest)[1], -1020)  # 2**1020 is finite
    return np.ldexp(1.0, -exponent)


def _scale_to_unit(values: np.ndarray, largest: np.ndarray) -> np.ndarray:
    """Divide each row by the power of two just above ``largest`` (its largest |value|), in place: exact,
    and |result| < 1. Returns the factors (1 / that power of two)."""
    factors = _unit_factors(largest)
    values *= factors[:, None]  # a power of two: the product is exact
    return factors


def centred_scaled(logits: np.ndarray, center: bool, shifted: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(x / m, max_k x_k / m) with x = v - mean(v) (or v, uncentred) and m a power of two above
    max_k |x_k| (see below). ``shifted``: the rows d = v - v_max, when already made
    (:attr:`ChunkTerms.shifted`, read and left unchanged).

    One N x K array is allocated (the result); every step after it runs in place.
    """
    if center:
        shared = shifted is not None
        if not shared:
            shifted = logits - logits.max(axis=1, keepdims=True)  # d <= 0, and 0 at the top: max |d| = -min d
        lowest = shifted.min(axis=1)
        factors = _unit_factors(-lowest)
        centred = np.multiply(shifted, factors[:, None], out=None if shared else shifted)  # exact
        lowest *= factors  # a power of two: the lowest scaled d is the scaled lowest d
        sums = row_sums(centred)  # of the shifted rows, before they are multiplied by K
        n_classes = logits.shape[1]
        # x_k = fl(fl(K d_k) - sum) rounds monotonically in d_k, so its largest is at d = 0 (-sum, exactly) and
        # its smallest at the lowest d: the same bits as a max and a min over the row, without the two passes.
        top = 0.0 - sums  # +0.0, as the max over the row, for a row of equal logits
        bottom = lowest * n_classes
        bottom -= sums
        # Then x / m = fl(d K / m) - sum / m in two passes instead of three (times K, minus the sum, over m):
        # m is a power of two, so each rounding is the one of x scaled by it (|K d| < 2**-900 rounds to -sum
        # either way), the same bits.
        scale = _unit_factors(np.maximum(top, -bottom))
        centred *= (scale * n_classes)[:, None]
        centred -= (sums * scale)[:, None]
        top *= scale
        return centred, top
    centred = logits.copy()
    # max_k |x_k| as max(max_k x_k, -min_k x_k), without an N x K temporary
    top, bottom = centred.max(axis=1), centred.min(axis=1)
    # rounding is monotone, so the largest scaled entry is the scaled largest entry, bit for bit
    top *= _scale_to_unit(centred, np.maximum(top, -bottom))
    return centred, top


def _normalised_magnitudes(logits: np.ndarray, center: bool, positive_part: bool = True,
                           shifted: np.ndarray | None = None, signed: bool = False):
    """(top, |x| / m, positive part of x / m) for x = v - mu, m a power of two above max_k |x_k|
    (the positive part only with ``positive_part``, else None; with ``signed``, x / m itself
    instead of |x| / m, for even powers, which do not need the absolute value).

    Scaling by powers of two is exact, so the terms keep every bit of x and no power
    |x / m|^p overflows whatever the logits' scale. Centred, x is computed as
    K d - sum_k d with d = v - v_max (scale-free, so the same score as v - mean(v)),
    which is exact for logits on a coarse grid (float16 dumps): rows whose scores are
    equal in exact arithmetic then get equal float64 scores. A row of equal logits gives
    x = 0 and scores 0.
    """
    centred, top = centred_scaled(logits, center, shifted)
    if signed:
        return top, centred, None
    magnitudes = np.abs(centred)
    positive = np.maximum(centred, 0.0, out=centred) if positive_part else None
    return top, magnitudes, positive


# Up to this p the powers of |x| / m (m the power of two just above max |x|, so the largest
# term is in [1/2, 1)) are summed as they are: the largest power is at least 2**-1000, a
# normal float64, and every term it could lose to underflow is below 2**-75 of the sum.
# Above it, each row is first divided by its largest |x| (largest term exactly 1), so no
# power that matters underflows for any p.
_EXACT_SCALE_MAX_P = 1000
# Powers up to this p are built by products (shared by the grid's values); above it each is
# one np.power. Either way the score of a p does not depend on the rest of the grid, bit for
# bit, and the work grows with the number of grid values, not with p.
_PRODUCT_MAX_P = 16


def _halves(p: int) -> tuple[int, int]:
    """The two smaller powers whose product is x**p: x**(p/2) squared for even p, x**(p-1) x for odd p
    (binary powering: p = 10 takes 4 products, x2, x4, x5, x10, instead of 9 repeated ones)."""
    return (p // 2, p // 2) if p % 2 == 0 else (p - 1, 1)


def _chained_powers(base: np.ndarray, ps):
    """Yield ``(p, base ** p)`` for every p of ``ps`` in increasing order, each power the product of
    the two of :func:`_halves`: one product per power made, and each power the same bits whether
    made alone or for a grid. A yielded array may be overwritten once the next is asked for."""
    wanted = {int(p) for p in ps}
    needed, stack = set(), list(wanted)
    while stack:  # every power the wanted ones are made of
        p = stack.pop()
        if p > 1 and p not in needed:
            needed.add(p)
            stack.extend(_halves(p))
    last_use = {half: p for p in sorted(needed) for half in _halves(p)}  # the last power made from each
    if 1 in wanted:
        yield 1, base
    powers = {1: base}
    for p in sorted(needed):
        a, b = _halves(p)
        done = [q for q in {a, b} if q != 1 and last_use[q] == p]  # not needed after this product
        powers[p] = np.multiply(powers[a], powers[b], out=powers[done[0]] if done else None)
        for q in done:
            del powers[q]
        if p in wanted:
            yield p, powers[p]


def _power_sums(base: np.ndarray, ps) -> dict[int, np.ndarray]:
    """{p: sum_k base_k ** p} for every p in ``ps``."""
    sums: dict[int, np.ndarray] = {}
    wanted = set(ps)
    products = [p for p in wanted if p <= _PRODUCT_MAX_P]
    for p, power in _chained_powers(base, products):
        sums[p] = row_sums(power)
    for p in sorted(wanted):
        if p > _PRODUCT_MAX_P:
            sums[p] = row_sums(np.power(base, float(p)))
    return sums


def pnorm_grid(logits: np.ndarray, ps, center: bool = True, shifted: np.ndarray | None = None) -> np.ndarray:
    """The p-norm score for every p in ``ps`` (positive integers), shape (N, len(ps)).

    s_p = max_k (v_k - mu) / ||v - mu||_p, computed for all p in one pass: the powers
    |x|^p are built by binary powering (|x|^10 = (|x|^4 |x|)^2), each power shared by the
    grid values made from it. Each row is
    scaled by a power of two (exact) so that no power overflows; for p above 1000 it is
    also divided by its largest |x|, so that no power underflows either (the score stays
    exact to a few units in the last place for any p). A row whose centred logits are all
    zero (every logit equal) scores 0. For the centred p = 1 the norm is taken as
    2 sum_k max(x_k, 0), equal to sum_k |x_k| because x sums to 0, so that rows tied in
    exact arithmetic are tied in float64 too.

    References
    ----------
    Cattelan & Silva, "How to fix a broken confidence estimator", 2023 (MaxLogit-pNorm);
    Xia et al., "Towards understanding why label smoothing degrades selective
    classification", ICLR 2025, eq. 17 (``center=False``).

    Examples
    --------
    >>> pnorm_grid(np.array([[3.0, 0.0, -3.0]]), [1, 2, 2000]).round(6).tolist()
    [[0.5, 0.707107, 0.999653]]
    """
    ps = [int(p) for p in ps]
    if any(p < 1 for p in ps):
        raise ValueError("p must be a positive integer")
    # even powers made by products need no absolute value (x*x = |x|*|x|, bit for bit): one pass fewer
    signed = all(p % 2 == 0 and p <= _PRODUCT_MAX_P for p in ps)
    top, base, positive = _normalised_magnitudes(np.asarray(logits, dtype=np.float64), center,
                                                 positive_part=center and 1 in ps, shifted=shifted, signed=signed)
    sums = _power_sums(base, [p for p in ps if p <= _EXACT_SCALE_MAX_P])
    largest = None
    if max(ps) > _EXACT_SCALE_MAX_P:
        largest = base.max(axis=1)
        largest[largest == 0] = 1.0  # a zero row stays zero and scores 0
        sums.update(_power_sums(base / largest[:, None], [p for p in ps if p > _EXACT_SCALE_MAX_P]))
    if center and 1 in sums:
        # Centred x sums to 0, so ||x||_1 = 2 sum_k max(x_k, 0): the usual one-class-above-
        # the-mean row then scores exactly 1/2, and such rows tie, as they do exactly.
        sums[1] = 2.0 * row_sums(positive)
    out = np.empty((top.size, len(ps)))
    for j, p in enumerate(ps):
        norm = sums[p] ** (1.0 / p)
        if p > _EXACT_SCALE_MAX_P:
            norm *= largest
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, j] = np.where(norm > 0, top / norm, 0.0)
    return out


def pnorm(logits: np.ndarray, p: int, center: bool = True, shifted: np.ndarray | None = None) -> np.ndarray:
    """max_k (v_k - mu) / ||v - mu||_p for one p (see :func:`pnorm_grid`; ``shifted``: the rows
    v - v_max, when already made).

    Examples
    --------
    >>> pnorm(np.array([[3.0, 0.0, -3.0]]), p=2).round(6).tolist()
    [0.707107]
    """
    return pnorm_grid(logits, [p], center, shifted)[:, 0]


def normalised_logits(logits: np.ndarray, p: int, center: bool = True) -> np.ndarray:
    """x / ||x||_p row by row, x = v - mean_k v_k (``center``) or v; a row of zeros stays zero.

    The input of pNormSoftmax. Computed from the same exactly rescaled x as :func:`pnorm_grid`
    (and the same centred p = 1 norm, 2 sum_k max(x_k, 0)), so the result does not depend
    on the logits' scale and permuted rows give permuted results.

    Examples
    --------
    >>> normalised_logits(np.array([[3.0, 1.0, -1.0]]), p=1).tolist()
    [[0.5, 0.0, -0.5]]
    """
    p = int(p)
    if p < 1:
        raise ValueError("p must be a positive integer")
    x, _ = centred_scaled(np.asarray(logits, dtype=np.float64), center)
    ((_, normalised),) = normalised_grid(x, [p], center, out=x)
    return normalised


def normalised_grid(x: np.ndarray, ps, center: bool, out: np.ndarray | None = None):
    """Yield ``(p, x / ||x||_p)`` for every p of ``ps`` in increasing order, x from
    :func:`centred_scaled` (what :func:`normalised_logits` returns for each p, bit for bit).

    The powers |x|^p of p <= 64 are built by repeated products shared between the values
    of p (p - 1 products for each p alone: the same numbers). Each array yielded is ``out``
    (by default one new array), overwritten by the next p: use it before asking for the
    next. ``x`` is left unchanged unless it is ``out`` (then only one p may be asked for).
    """
    ps = sorted({int(p) for p in ps})
    if out is None:
        out = np.empty_like(x)
    magnitudes = power = None
    built = 0  # power = magnitudes ** built
    for p in ps:
        if center and p == 1:
            norm = 2.0 * row_sums(np.maximum(x, 0.0))
            yield p, _divide_rows(x, norm, out)
        elif p > 64:
            # |x| / m lies in [1/2, 1) at its largest, whose p-th power would underflow for p > 1074:
            # divide each row by its largest |x| first (the largest term is then exactly 1).
            top = np.abs(x).max(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                unit = np.where(top > 0, x / top, 0.0)
            norm = row_sums(np.power(np.abs(unit), p)) ** (1.0 / p)
            yield p, _divide_rows(unit, norm, out)
        else:
            if magnitudes is None:
                magnitudes = np.abs(x)
                power, built = magnitudes.copy(), 1
            while built < p:
                power *= magnitudes
                built += 1
            norm = row_sums(power) ** (1.0 / p)
            yield p, _divide_rows(x, norm, out)


def _divide_rows(x: np.ndarray, norm: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x / norm row by row into ``out`` (which may be ``x``); a row whose norm is 0 (x is zero) gives 0."""
    positive = norm > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        np.divide(x, norm[:, None], out=out, where=positive[:, None])
    if not positive.all():
        out[~positive] = 0.0
    return out


# --------------------------------------------------------------------------- registry
class ChunkTerms:
    """What the scores of one chunk of logits share, each computed once, on first use.

    ``logits`` is the float64 chunk (N, K); ``pred``, ``exps``, ``rest`` are those of
    :func:`softmax_terms` at T = 1 (``exps[i, pred_i] = 0``, ``rest`` = S); ``top`` is
    v_max, ``shifted`` is v - v_max, ``log_msp`` = -log1p(S). Scores read these and never modify them.
    """

    def __init__(self, logits: np.ndarray, terms: tuple | None = None):
        self.logits = logits
        self._terms = terms
        self._cache: dict = {}

    def cached(self, key, compute):
        """``compute()`` once per chunk for ``key`` (e.g. a score's values read by two entries)."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    @property
    def softmax(self) -> tuple:
        if self._terms is None:
            self._terms = softmax_terms(self.logits, 1.0, self.pred, self.shifted)
        return self._terms

    @property
    def pred(self) -> np.ndarray:
        if self._terms is not None:
            return self._terms[0]
        return self.cached("pred", lambda: np.argmax(self.logits, axis=1))

    @property
    def shifted(self) -> np.ndarray:
        """d = v - v_max, each row shifted to its top logit: the common first step of the softmaxes and the p-norm."""
        return self.cached("shifted", lambda: self.logits - self.top[:, None])

    @property
    def exps(self) -> np.ndarray:
        return self.softmax[1]

    @property
    def rest(self) -> np.ndarray:
        return self.softmax[2]

    @property
    def top(self) -> np.ndarray:
        return self.cached("top", lambda: self.logits[np.arange(self.logits.shape[0]), self.pred])

    @property
    def log_msp(self) -> np.ndarray:
        return -np.log1p(self.rest)


def _terms(logits, terms: ChunkTerms | None) -> ChunkTerms:
    return terms if terms is not None else ChunkTerms(np.asarray(logits, dtype=np.float64))


def energy(logits: np.ndarray, terms: ChunkTerms | None = None) -> np.ndarray:
    """logsumexp_k v_k = v_max + log1p(S), the negative free energy at T = 1 (Liu et al. 2020).

    Examples
    --------
    >>> round(float(energy(np.array([[0.0, 0.0]]))[0]), 12) == round(math.log(2), 12)
    True
    """
    t = _terms(logits, terms)
    return t.top + np.log1p(t.rest)


def negative_entropy(logits: np.ndarray, terms: ChunkTerms | None = None) -> np.ndarray:
    """sum_k p_k log p_k = -H(softmax(v)), from the logits: with d_k = v_k - v_max and
    e_k = exp(d_k), it is (sum_k e_k d_k) / (1 + S) - log1p(S); no log(0) arises (an
    underflowed e_k contributes 0), and the sum runs in sorted order for K <= 64.

    Examples
    --------
    >>> round(float(negative_entropy(np.array([[0.0, 0.0]]))[0]), 12) == round(-math.log(2), 12)
    True
    """
    t = _terms(logits, terms)
    weighted = t.logits - t.top[:, None]
    weighted *= t.exps  # the top class has e = 0 in exps and d = 0: its term is 0 either way
    return row_sums(weighted) / (1.0 + t.rest) - np.log1p(t.rest)


def margin(logits: np.ndarray, terms: ChunkTerms | None = None) -> np.ndarray:
    """p_(1) - p_(2) = (1 - exp(v_(2) - v_(1))) / (1 + S).

    Examples
    --------
    >>> margin(np.array([[0.0, 0.0], [math.log(3.0), 0.0]])).round(12).tolist()
    [0.0, 0.5]
    """
    t = _terms(logits, terms)
    return (1.0 - t.exps.max(axis=1)) / (1.0 + t.rest)


def logit_margin(logits: np.ndarray, terms: ChunkTerms | None = None) -> np.ndarray:
    """v_(1) - v_(2), the gap between the two largest logits (0 when the top is tied).

    Examples
    --------
    >>> logit_margin(np.array([[1.0, 4.0, 2.5]])).tolist()
    [1.5]
    """
    t = _terms(logits, terms)
    # the largest logit once the top class's is set aside (a copy and a max: 3x faster than a partition)
    rest = t.logits.copy()
    rest[np.arange(rest.shape[0]), t.pred] = -np.inf
    return t.top - rest.max(axis=1)


def gini(logits: np.ndarray, terms: ChunkTerms | None = None) -> np.ndarray:
    """sum_k p_k^2 = (1 + sum_{k != top} e_k^2) / (1 + S)^2 (DOCTOR, Granese et al. 2021).

    Examples
    --------
    >>> gini(np.array([[0.0, 0.0]])).tolist()
    [0.5]
    """
    t = _terms(logits, terms)
    denominator = 1.0 + t.rest
    return (1.0 + row_sums(t.exps * t.exps)) / (denominator * denominator)
