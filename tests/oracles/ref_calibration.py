"""Brute-force references for the calibration metrics and the confidence scores.

Written independently of ``selcal`` and as literally as possible from CONVENTIONS.md
("Scores", "Calibration"): explicit Python loops over bins, classes and samples, and
exact rational arithmetic (``fractions.Fraction`` of the float64 inputs) or decimal
arithmetic at high precision wherever floating point could hide a difference. Slow on
purpose; only for the tests.

Conventions referenced (decided for selcal):

* equal-width bin b is (b/B, (b+1)/B] with float64 edges b/B; q = 0 is in bin 0 and
  q = 1.0 in bin B - 1 (there is no extra bin for 1.0);
* adaptive (equal-mass) bins: sort by q, cut into B contiguous groups whose sizes differ
  by at most one, the first N mod B groups taking the extra sample; a run of equal q cut
  by a group boundary shares its correct count between the groups in proportion, the
  expected value under a random order of the tied samples;
* class-wise ECE: mean over all K classes of the equal-width ECE of p_k against [y = k].
"""

from __future__ import annotations

import itertools
import math
from decimal import MAX_EMAX, MIN_EMIN, Decimal, localcontext
from fractions import Fraction

import numpy as np
from scipy.special import logsumexp
from scipy.special import softmax as scipy_softmax

DECIMAL_DIGITS = 80


def _digits(rows) -> int:
    """Decimal digits enough for the literal formulas on these logit rows.

    1 + S with S = sum exp(v_k - v_max) as small as exp(-spread) needs about
    spread / ln 10 digits before S shows at all; twice that plus 80 keeps S, and the
    squares of the Brier score, to far more than float64's 16 digits.
    """
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float64))
    spread = float(np.max(rows.max(axis=1) - rows.min(axis=1))) if rows.size else 0.0
    return DECIMAL_DIGITS + 2 * int(math.ceil(spread / math.log(10)))


# ----------------------------------------------------------------------- binning
def bin_index(q: float, n_bins: int) -> int:
    """The equal-width bin of one confidence by the literal rule lo < q <= hi."""
    q = float(q)
    if q == 0.0:
        return 0
    for b in range(n_bins):
        lo = b / n_bins
        hi = (b + 1) / n_bins
        if lo < q <= hi:
            return b
    raise ValueError(f"confidence {q!r} is outside [0, 1]")


def _nonempty_bins(confidence, correct, n_bins):
    """Per non-empty equal-width bin: (accuracy, mean confidence, share of the rows) as Fractions,
    by explicit loop."""
    count = [0] * n_bins
    hits = [Fraction(0)] * n_bins
    conf = [Fraction(0)] * n_bins
    for q, c in zip(confidence, correct):
        b = bin_index(q, n_bins)
        count[b] += 1
        hits[b] += Fraction(int(c))
        conf[b] += Fraction(float(q))
    n = len(confidence)
    return [(hits[b] / count[b], conf[b] / count[b], Fraction(count[b], n)) for b in range(n_bins) if count[b] > 0]


def ece_exact(confidence, correct, n_bins: int) -> Fraction:
    """sum_b (n_b / N) |acc_b - conf_b| over non-empty bins, exactly."""
    return sum((prop_b * abs(acc_b - conf_b) for acc_b, conf_b, prop_b in _nonempty_bins(confidence, correct, n_bins)),
               Fraction(0))


def ece(confidence, correct, n_bins: int) -> float:
    return float(ece_exact(confidence, correct, n_bins))


def rmsce(confidence, correct, n_bins: int) -> float:
    """torchmetrics' ``CalibrationError(norm="l2")`` written out (its ``_ce_compute``): per bin the
    accuracy acc_b, the mean confidence conf_b and the proportion of rows prop_b = n_b / N, then
    sqrt(sum_b (acc_b - conf_b)^2 prop_b) over the non-empty bins; exact until the square root
    (on selcal's bins (b/B, (b+1)/B], where torchmetrics bins [b/B, (b+1)/B))."""
    total = sum(((acc_b - conf_b) ** 2 * prop_b for acc_b, conf_b, prop_b in _nonempty_bins(confidence, correct, n_bins)),
                Fraction(0))
    with localcontext() as context:
        context.prec = DECIMAL_DIGITS
        root = (Decimal(total.numerator) / Decimal(total.denominator)).sqrt()
    return float(root)


def mce(confidence, correct, n_bins: int) -> float:
    """max over non-empty bins of |acc_b - conf_b|."""
    return float(max(abs(acc_b - conf_b) for acc_b, conf_b, _ in _nonempty_bins(confidence, correct, n_bins)))


# ----------------------------------------------------------------- adaptive bins
def group_sizes(n: int, n_bins: int) -> list[int]:
    """Sizes of the B contiguous groups, the first N mod B one larger; empty groups dropped."""
    sizes = []
    for g in range(n_bins):
        size = n // n_bins + (1 if g < n % n_bins else 0)
        if size > 0:
            sizes.append(size)
    return sizes


def _aece_from_group_hits(sorted_q, group_hits, sizes) -> Fraction:
    total = Fraction(0)
    start = 0
    for size, hits in zip(sizes, group_hits):
        conf_sum = sum((Fraction(float(q)) for q in sorted_q[start:start + size]), Fraction(0))
        # (n_g / N) |acc_g - conf_g| = |hits_g - conf_sum_g| / N
        total += Fraction(size) * abs(hits / size - conf_sum / size)
        start += size
    return total / len(sorted_q)


def aece_exact(confidence, correct, n_bins: int) -> Fraction:
    """Adaptive ECE by an explicit loop over sorted positions.

    The expected correctness of the sample at a sorted position inside a run of equal
    confidences is the run's mean correctness (every tied sample is equally likely to
    sit there under a random order of the ties).
    """
    n = len(confidence)
    pairs = sorted(zip((float(q) for q in confidence), (int(c) for c in correct)), key=lambda t: t[0])
    sorted_q = [q for q, _ in pairs]
    expected = [Fraction(0)] * n
    i = 0
    while i < n:
        j = i
        while j < n and sorted_q[j] == sorted_q[i]:
            j += 1
        run_mean = Fraction(sum(c for _, c in pairs[i:j]), j - i)
        for k in range(i, j):
            expected[k] = run_mean
        i = j
    sizes = group_sizes(n, n_bins)
    group_hits = []
    start = 0
    for size in sizes:
        group_hits.append(sum(expected[start:start + size], Fraction(0)))
        start += size
    return _aece_from_group_hits(sorted_q, group_hits, sizes)


def aece(confidence, correct, n_bins: int) -> float:
    return float(aece_exact(confidence, correct, n_bins))


def aece_over_all_orderings(confidence, correct, n_bins: int) -> Fraction:
    """Adaptive ECE with each group's hit count averaged over every order of the ties.

    Enumerates every permutation of the samples inside each run of equal confidence
    (all runs at once), cuts each ordering into the groups, and averages the hit count
    of each group over the orderings; then the ECE sum of those expected hit counts.
    Exponential: only for N up to about 7.
    """
    n = len(confidence)
    q = [float(v) for v in confidence]
    c = [int(v) for v in correct]
    values = sorted(set(q))
    runs = [[i for i in range(n) if q[i] == v] for v in values]  # indices of each run, in value order
    sizes = group_sizes(n, n_bins)
    sums = [Fraction(0)] * len(sizes)
    orderings = 0
    for choice in itertools.product(*(itertools.permutations(run) for run in runs)):
        order = [i for run in choice for i in run]
        start = 0
        for g, size in enumerate(sizes):
            sums[g] += sum(c[i] for i in order[start:start + size])
            start += size
        orderings += 1
    sorted_q = sorted(q)
    return _aece_from_group_hits(sorted_q, [s / orderings for s in sums], sizes)


# -------------------------------------------------------------------- class-wise
def classwise_ece(probabilities, labels, n_bins: int) -> float:
    """Mean over every class k (present in the labels or not) of ECE(p_k, [y = k])."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    n, n_classes = probabilities.shape
    total = Fraction(0)
    for k in range(n_classes):
        column = [float(probabilities[i, k]) for i in range(n)]
        is_k = [1 if int(labels[i]) == k else 0 for i in range(n)]
        total += ece_exact(column, is_k, n_bins)
    return float(total / n_classes)


# ------------------------------------------------------------------ from logits
def softmax64(logits) -> np.ndarray:
    """Float64 softmax (scipy), the ordinary way."""
    return scipy_softmax(np.asarray(logits, dtype=np.float64), axis=1)


def argmax_first(row) -> int:
    """Index of the largest value, the first on ties, by a loop."""
    best = 0
    for k in range(1, len(row)):
        if row[k] > row[best]:
            best = k
    return best


def nll64(logits, labels) -> float:
    """mean(logsumexp(v) - v_y) with scipy in float64."""
    logits = np.asarray(logits, dtype=np.float64)
    rows = np.arange(len(labels))
    return float(np.mean(logsumexp(logits, axis=1) - logits[rows, labels]))


def nll64_literal(logits, labels) -> float:
    """mean(v_max + log(sum exp(v - v_max)) - v_y), the textbook float64 formula."""
    logits = np.asarray(logits, dtype=np.float64)
    top = logits.max(axis=1)
    lse = top + np.log(np.sum(np.exp(logits - top[:, None]), axis=1))
    return float(np.mean(lse - logits[np.arange(len(labels)), labels]))


def brier64(logits, labels) -> float:
    """mean sum_k (p_k - [y = k])^2, literally, from a float64 softmax."""
    p = softmax64(logits)
    onehot = np.zeros_like(p)
    onehot[np.arange(len(labels)), labels] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def _decimal_softmax_row(row):
    """Softmax of one row in decimal arithmetic (call inside a high-precision context)."""
    values = [Decimal(float(v)) for v in row]
    top = max(values)
    exps = [(v - top).exp() for v in values]
    total = sum(exps, Decimal(0))
    return [e / total for e in exps], total


def log_msp_exact(row) -> float:
    """log max_k softmax_k(v), in high-precision decimal arithmetic, rounded to float."""
    with localcontext() as ctx:
        ctx.prec = _digits(row)
        _, total = _decimal_softmax_row(row)
        return float(-total.ln())


def nll_exact(logits, labels) -> float:
    """mean(logsumexp(v) - v_y) in high-precision decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = _digits(logits)
        acc = Decimal(0)
        for row, y in zip(np.asarray(logits, dtype=np.float64), labels):
            values = [Decimal(float(v)) for v in row]
            top = max(values)
            lse = top + sum(((v - top).exp() for v in values), Decimal(0)).ln()
            acc += lse - values[int(y)]
        return float(acc / len(labels))


def brier_exact(logits, labels) -> float:
    """mean sum_k (p_k - [y = k])^2, the literal formula in high-precision decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = _digits(logits)
        acc = Decimal(0)
        for row, y in zip(np.asarray(logits, dtype=np.float64), labels):
            p, _ = _decimal_softmax_row(row)
            for k, pk in enumerate(p):
                target = Decimal(1) if k == int(y) else Decimal(0)
                acc += (pk - target) ** 2
        return float(acc / len(labels))


# ------------------------------------------------------------------------ pnorm
def pnorm_loop(logits, p: int, center: bool = True) -> np.ndarray:
    """max_k (v_k - mu) / ||v - mu||_p row by row with np.linalg.norm (0 for a zero row)."""
    out = []
    for row in np.asarray(logits, dtype=np.float64):
        mu = np.mean(row) if center else 0.0
        x = row - mu
        norm = np.linalg.norm(x, ord=p)
        out.append(0.0 if norm == 0 else float(np.max(x) / norm))
    return np.array(out)


def pnorm_exact(row, p: int, center: bool = True) -> float:
    """The p-norm score of one row in 80-digit decimal arithmetic (no overflow at any scale)."""
    with localcontext() as ctx:
        ctx.prec = DECIMAL_DIGITS
        ctx.Emin, ctx.Emax = MIN_EMIN, MAX_EMAX  # (1e-300)**10000 must not underflow here either
        values = [Decimal(float(v)) for v in row]
        mu = sum(values, Decimal(0)) / len(values) if center else Decimal(0)
        x = [v - mu for v in values]
        power_sum = sum((abs(v) ** p for v in x), Decimal(0))
        if power_sum == 0:
            return 0.0
        norm = power_sum ** (Decimal(1) / Decimal(p))
        return float(max(x) / norm)
