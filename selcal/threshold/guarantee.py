"""The numerical core of ``selcal threshold`` (CONVENTIONS.md, "Deployment thresholds with a guarantee").

Pure functions of arrays: a confidence score and whether each prediction is correct on the
*calibration* rows in, the lowest threshold θ (accept s >= θ) whose selective risk on new data
is at most a target r with probability at least 1 - δ out. The candidates are the operating
points of :func:`selcal.metrics.selective.risk_coverage` (one per tie group: ties are accepted or
rejected together); nothing here sorts.

- :func:`sgr`: Geifman & El-Yaniv 2017, Algorithm 1 (selection with guaranteed risk): a binary
  search over the candidates, ⌈log2 G⌉ tests each at δ / ⌈log2 G⌉ with the exact binomial tail
  bound B*.
- :func:`ltt`: Learn-then-Test (Angelopoulos et al. 2021) with fixed-sequence testing over the
  thresholds of the coverages 1%, 2%, ..., 100%, exact binomial p-values.
- :func:`empirical` (no guarantee): the threshold of ``cov@r`` on the calibration rows, what
  the guarantee is measured against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..metrics.selective import RiskCoverage, risk_coverage

__all__ = [
    "METHODS",
    "DEFAULT_RISK",
    "DEFAULT_DELTA",
    "DEFAULT_METHOD",
    "LTT_COVERAGES",
    "binomial_upper_bound",
    "binomial_p_value",
    "Candidate",
    "Certificate",
    "Applied",
    "sgr",
    "ltt",
    "empirical",
    "certify",
    "apply_threshold",
    "minimum_rows",
    "ltt_coverages",
    "check_level",
]

METHODS = ("sgr", "ltt")
DEFAULT_METHOD = "sgr"
DEFAULT_RISK = 0.05
DEFAULT_DELTA = 0.1
LTT_COVERAGES = tuple(range(1, 101))  # percent, tested in this order


def check_level(value, name: str) -> float:
    """``value`` as a float strictly inside (0, 1), else ValueError naming ``name``.

    Examples
    --------
    >>> check_level("0.05", "risk")
    0.05
    """
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0 < number < 1:  # also refuses NaN
        raise ValueError(f"{name} must be in (0, 1), e.g. 0.05; got {value!r}")
    return number


def binomial_upper_bound(errors, n, delta):
    """B*(e, n, δ): the b in [0, 1] with P(Binom(n, b) <= e) = δ, the exact binomial tail
    bound of Geifman & El-Yaniv 2017 (Lemma 3.1) solved for the risk.

    It is the one-sided Clopper-Pearson upper limit at level 1 - δ: P(Binom(n, b) <= e) =
    1 - I_b(e + 1, n - e), so b is the inverse of the regularised incomplete beta function,
    computed from its complement (``scipy.stats.beta.isf``) so that a small δ keeps its
    precision. 1 when every accepted prediction is wrong (e = n). Vectorised over arrays.

    Parameters
    ----------
    errors : int or array of int
        Errors e among the accepted calibration rows, 0 <= e <= n.
    n : int or array of int
        Accepted calibration rows, n >= 1.
    delta : float
        Confidence parameter in (0, 1).

    Returns
    -------
    float or ndarray of float64

    References
    ----------
    Geifman & El-Yaniv, "Selective classification for deep neural networks", NeurIPS 2017,
    Lemma 3.1 and Algorithm 1; Clopper & Pearson, Biometrika 1934.

    Examples
    --------
    >>> round(float(binomial_upper_bound(0, 10, 0.1)), 6)  # 1 - 0.1 ** (1 / 10)
    0.205672
    >>> float(binomial_upper_bound(3, 3, 0.1))
    1.0
    """
    from scipy import stats  # here: importing scipy.stats costs more than selcal's own import

    errors = np.asarray(errors, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = stats.beta.isf(delta, errors + 1.0, np.maximum(n - errors, 1.0))
    bound = np.where(errors >= n, 1.0, bound)
    return float(bound) if bound.ndim == 0 else bound


def binomial_p_value(errors, n, risk):
    """P(Binom(n, r) <= e): the exact p-value of the null hypothesis "selective risk > r"
    given e errors among n accepted rows (Angelopoulos et al. 2021, the binomial tail p-value).

    Examples
    --------
    >>> float(binomial_p_value(0, 2, 0.5))
    0.25
    """
    from scipy import stats

    value = stats.binom.cdf(np.asarray(errors), np.asarray(n), risk)
    return float(value) if np.ndim(value) == 0 else value


@dataclass(frozen=True)
class Candidate:
    """One candidate threshold a method tested: operating point ``index`` of the curve,
    ``accepted`` rows and ``errors`` among them, the ``statistic`` (SGR: the bound B*; LTT:
    the p-value) and whether it ``passed``."""

    index: int
    accepted: int
    errors: int
    statistic: float
    passed: bool


class _Selection:
    """Coverage and selective risk of ``accepted`` rows of ``n``, ``errors`` among them."""

    n: int
    accepted: int
    errors: int

    @property
    def coverage(self) -> float:
        """Fraction of the rows accepted."""
        return self.accepted / self.n

    @property
    def risk(self) -> float | None:
        """Selective risk; None when nothing is accepted."""
        return self.errors / self.accepted if self.accepted else None


@dataclass(frozen=True)
class Certificate(_Selection):
    """The threshold a method chose on the calibration rows, and what it certifies.

    Attributes
    ----------
    method : str
        ``sgr``, ``ltt`` or ``empirical``.
    risk_target, delta : float
        The target r and the confidence parameter δ (the guarantee holds with probability
        at least 1 - δ; ``empirical`` guarantees nothing).
    threshold : float or None
        Accept a new input when its score s >= threshold; None: abstain on everything.
    n : int
        Calibration rows.
    accepted, errors : int
        Calibration rows with s >= threshold, and the errors among them (0 when abstaining).
    bound : float or None
        The certified upper bound on the selective risk: SGR's B* of the chosen threshold
        (< r), the target r for LTT (what its test certifies), None when abstaining or for
        ``empirical``.
    tests : tuple of Candidate
        Every candidate tested, in the order tested.
    curve : RiskCoverage
        The calibration rows' operating points the candidates were taken from.
    """

    method: str
    risk_target: float
    delta: float
    threshold: float | None
    n: int
    accepted: int
    errors: int
    bound: float | None
    tests: tuple[Candidate, ...]
    curve: RiskCoverage

    @property
    def abstain_all(self) -> bool:
        return self.threshold is None


@dataclass(frozen=True)
class Applied(_Selection):
    """A threshold applied to rows: ``n`` rows, ``accepted`` of them, ``errors`` among those."""

    n: int
    accepted: int
    errors: int


def _curve(score, correct) -> RiskCoverage:
    return score if isinstance(score, RiskCoverage) else risk_coverage(score, correct)


def _certificate(method, risk, delta, curve: RiskCoverage, chosen: int | None, bound, tests) -> Certificate:
    if chosen is None:
        return Certificate(method, risk, delta, None, curve.n, 0, 0, None, tuple(tests), curve)
    return Certificate(method, risk, delta, float(curve.thresholds[chosen]), curve.n, int(curve.accepted[chosen]),
                       int(curve.errors[chosen]), bound, tuple(tests), curve)


def sgr(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA) -> Certificate:
    """Selection with guaranteed risk (Geifman & El-Yaniv 2017, Algorithm 1), over tie groups.

    The candidates are the G operating points of the calibration rows' risk-coverage curve
    (G = the number of calibration rows when no scores tie). A binary search runs
    k = max(1, ⌈log2 G⌉) steps; each tests one candidate, from the middle of the remaining
    range, at level δ' = δ / k: it passes when B*(e, a, δ') < r (a accepted rows, e errors),
    and the search then moves to higher coverage, else to lower. The answer is the passing
    candidate of highest coverage, with its bound B* (< r); when none passes, abstain on
    everything. A union bound over the k tests gives P(risk > bound) <= δ.

    As in the paper, the search starts with the whole range (``z_min = 0``), so that full
    coverage can be reached; its first test is at the median operating point.

    Parameters
    ----------
    score : array-like of float, shape (N,), or RiskCoverage
        Confidence score of the calibration rows (higher = more confident), or their curve.
    correct : array-like of bool, shape (N,)
        Whether each calibration prediction is correct (unused when ``score`` is a curve).
    risk : float
        Target selective risk r, in (0, 1).
    delta : float
        Confidence parameter δ, in (0, 1).

    Returns
    -------
    Certificate

    References
    ----------
    Geifman & El-Yaniv, "Selective classification for deep neural networks", NeurIPS 2017,
    Algorithm 1 (SGR) and Lemma 3.1.

    Examples
    --------
    >>> cert = sgr([4, 4, 3, 3, 2, 2, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0], risk=0.3, delta=0.5)
    >>> cert.threshold, cert.accepted, round(cert.bound, 4)
    (2.0, 6, 0.2063)
    """
    risk, delta = check_level(risk, "risk"), check_level(delta, "delta")
    curve = _curve(score, correct)
    groups = curve.accepted.size
    steps = max(1, math.ceil(math.log2(groups)))
    level = delta / steps
    low, high = 0, groups  # candidates low .. high - 1 remain; ``low`` may already have passed
    tests: list[Candidate] = []
    chosen = chosen_bound = None
    for _ in range(steps):
        middle = (low + high) // 2
        if any(test.index == middle for test in tests):
            break  # the range is down to a candidate already tested: nothing left to learn
        accepted, errors = int(curve.accepted[middle]), int(curve.errors[middle])
        bound = binomial_upper_bound(errors, accepted, level)
        passed = bool(bound < risk)
        tests.append(Candidate(middle, accepted, errors, bound, passed))
        if passed:
            low = middle
            if chosen is None or middle > chosen:
                chosen, chosen_bound = middle, bound
        else:
            high = middle
    return _certificate("sgr", risk, delta, curve, chosen, chosen_bound, tests)


def ltt_coverages(n: int, risk: float, delta: float, testable_only: bool = False) -> tuple[int, ...]:
    """The coverages (percent) LTT tests for ``n`` calibration rows, in order.

    1, 2, ..., 100 (CONVENTIONS.md). With ``testable_only``, from the first c whose threshold
    accepts at least :func:`minimum_rows` rows (⌈c n / 100⌉ >= m): a hypothesis on fewer rows
    has a p-value above δ whatever the data (even with no error, (1 - r)^a > δ), so testing it
    can only stop the sequence. That start depends on n, r and δ alone, never on the scores, so
    the guarantee holds; but it is not the default, because it makes the answer non-monotone:
    a larger δ (or r) moves the start to an earlier coverage whose hypothesis may fail, and
    then gives a *lower* coverage (``tests/test_threshold.py`` has the case).

    Examples
    --------
    >>> ltt_coverages(5000, 0.01, 0.1)[0], ltt_coverages(5000, 0.01, 0.1, testable_only=True)[0]
    (1, 5)
    """
    if not testable_only:
        return LTT_COVERAGES
    rows = minimum_rows(risk, delta, "ltt")
    return tuple(c for c in LTT_COVERAGES if -(-c * n // 100) >= rows)


def _coverage_points(curve: RiskCoverage, coverages) -> np.ndarray:
    """For each c %, the first operating point whose coverage is at least c % (exact
    integer comparison, as ``risk@c``)."""
    wanted = np.asarray(coverages, dtype=np.int64) * curve.n  # accepted * 100 >= c * n
    return np.searchsorted(curve.accepted * 100, wanted, side="left")


def ltt(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA,
        testable_only: bool = False) -> Certificate:
    """Learn-then-Test with fixed-sequence testing (Angelopoulos et al. 2021).

    The hypotheses are the thresholds of the coverages 1%, 2%, ..., 100% of the calibration
    rows (for c %, the first operating point whose coverage is at least c %; a tie group that
    spans several percents is one hypothesis, tested once); ``testable_only`` starts at the
    first coverage with enough rows for a test to reject (see :func:`ltt_coverages`: valid, but
    not monotone in δ and r). In that order, each null
    "selective risk > r" is tested with the exact binomial p-value P(Binom(a, r) <= e) and
    rejected when it is at most δ; the sequence stops at the first hypothesis not rejected.
    The answer is the last rejected one (the highest coverage), with the certified bound r;
    when the first is not rejected, abstain on everything. Fixed-sequence testing controls
    the family-wise error at δ without splitting it.

    Parameters and Returns as :func:`sgr`.

    References
    ----------
    Angelopoulos, Bates, Candès, Jordan & Lei, "Learn then Test: calibrating predictive
    algorithms to achieve risk control", 2021 (fixed-sequence testing, binomial p-values).

    Examples
    --------
    >>> cert = ltt([4, 4, 3, 3, 2, 2, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0], risk=0.3, delta=0.5)
    >>> cert.threshold, cert.accepted, [round(t.statistic, 4) for t in cert.tests]
    (2.0, 6, [0.49, 0.2401, 0.1176, 0.5518])
    """
    risk, delta = check_level(risk, "risk"), check_level(delta, "delta")
    curve = _curve(score, correct)
    coverages = ltt_coverages(curve.n, risk, delta, testable_only)
    points = np.unique(_coverage_points(curve, coverages))  # increasing coverage; duplicates tested once
    if not points.size:  # too few rows for any test
        return _certificate("ltt", risk, delta, curve, None, None, ())
    p_values = binomial_p_value(curve.errors[points], curve.accepted[points], risk)
    tests: list[Candidate] = []
    chosen = None
    for index, p_value in zip(points.tolist(), np.atleast_1d(p_values).tolist()):
        passed = p_value <= delta
        tests.append(Candidate(index, int(curve.accepted[index]), int(curve.errors[index]), float(p_value), passed))
        if not passed:
            break
        chosen = index
    return _certificate("ltt", risk, delta, curve, chosen, risk if chosen is not None else None, tests)


def empirical(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA) -> Certificate:
    """The threshold of ``cov@r`` on the calibration rows: the operating point of highest
    coverage whose calibration risk is at most r. No guarantee (``delta`` is ignored, ``bound``
    is None); what :func:`sgr` and :func:`ltt` are measured against.

    Examples
    --------
    >>> empirical([4, 4, 3, 3, 2, 2, 1, 1], [1, 1, 1, 1, 1, 1, 0, 0], risk=0.25).accepted
    8
    """
    risk = check_level(risk, "risk")
    curve = _curve(score, correct)
    feasible = np.flatnonzero(curve.risk <= risk)
    chosen = int(feasible[-1]) if feasible.size else None
    return _certificate("empirical", risk, delta, curve, chosen, None, ())


_METHODS = {"sgr": sgr, "ltt": ltt, "empirical": empirical}


def certify(score, correct=None, *, risk: float = DEFAULT_RISK, delta: float = DEFAULT_DELTA,
            method: str = DEFAULT_METHOD) -> Certificate:
    """The threshold of ``method`` (``sgr``, ``ltt`` or ``empirical``); see those functions."""
    if method not in _METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return _METHODS[method](score, correct, risk=risk, delta=delta)


def apply_threshold(score, correct, threshold: float | None) -> Applied:
    """Coverage and selective risk of "accept s >= threshold" on other rows (None: accept none).

    Examples
    --------
    >>> applied = apply_threshold([0.9, 0.5, 0.2], [True, False, True], 0.5)
    >>> applied.coverage, applied.risk
    (0.6666666666666666, 0.5)
    """
    score = np.asarray(score, dtype=np.float64).ravel()
    correct = np.asarray(correct, dtype=bool).ravel()
    if threshold is None:
        return Applied(int(score.size), 0, 0)
    accepted = score >= threshold
    return Applied(int(score.size), int(np.count_nonzero(accepted)), int(np.count_nonzero(accepted & ~correct)))


def minimum_rows(risk: float, delta: float, method: str = DEFAULT_METHOD) -> int:
    """The fewest calibration rows with which ``method`` can certify any threshold at all.

    The most favourable calibration set of m rows has no error and one tie group (a single
    candidate, tested at the full δ); it is certified when (1 - r)^m < δ (SGR: B*(0, m, δ) < r)
    or (1 - r)^m <= δ (LTT: the p-value is at most δ). Fewer rows can never give a guarantee,
    whatever their scores.

    Examples
    --------
    >>> minimum_rows(0.05, 0.1, "sgr"), minimum_rows(0.5, 0.25, "ltt")
    (45, 2)
    """
    risk, delta = check_level(risk, "risk"), check_level(delta, "delta")
    estimate = math.floor(math.log(delta) / math.log1p(-risk))
    if estimate >= 2 ** 53:  # more rows than any file holds (r ~ 1e-15 or less): the closed form is enough
        return estimate + 1

    def certified(m: int) -> bool:
        if method == "ltt":
            return binomial_p_value(0, m, risk) <= delta
        return binomial_upper_bound(0, m, delta) < risk

    # bisection between a row count that is not certified (lo, 0 = none) and one that is (hi): the
    # closed form is close, but a walk one row at a time from a wrong start took forever
    hi = max(1, estimate)
    while not certified(hi):
        hi *= 2
    lo = hi // 2
    while lo >= 1 and certified(lo):
        hi, lo = lo, lo // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if certified(mid):
            hi = mid
        else:
            lo = mid
    return hi
